/* The scope's file (os/machine.h), as both families make and open it. A new
 * file is made where no one else can see it (on Linux O_TMPFILE, or a
 * temporary name no one can predict), and put in place (linkat, or a rename
 * that fails if another process's came first: renameat2 with
 * RENAME_NOREPLACE on Linux, renamex_np with RENAME_EXCL on macOS). The
 * POSIX family takes the temporary name wherever it runs, as it must on
 * macOS, so that its tests on Linux take that path too. An existing file is
 * used only if it is a regular file of ours, or another user's that both
 * that user's permission bits and ours (the mode asked for) open to others,
 * with one name (a hard link would give its agents two sets of FIFO names,
 * os/unix/wake.c). On Linux its pages are reserved (fallocate) before they
 * are first stored to; macOS has no call that reserves a sparse file's
 * pages without writing them, and keeps the old behaviour (a full disk may
 * fault a store). Each family closes its descriptors as its locks allow
 * (wl__os_file_leave). */
#define _GNU_SOURCE      /* O_TMPFILE, fallocate, renameat2's number */
#define _DARWIN_C_SOURCE /* renamex_np */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
/* The kernel's (linux/fs.h), where the C library does not say it (musl). */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#endif

#include "machine.h"

#define WL__PAGE 4096

static int wl__map(wl_manager_t *m, uint64_t size) {
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);

  if (map == MAP_FAILED)
    return -errno;
  m->map = map;
  m->map_size = size;
  return 0;
}

/* A new file in the directory of path that no other process can open yet:
 * O_TMPFILE where the family and the file system have it, else a temporary
 * name that no other user can take first (drawn at random, again if taken;
 * in *tmp, which the caller removes). */
static int wl__open_unlinked(const char *path, unsigned mode, char *tmp,
                             size_t tmplen) {
  uint64_t r;
  int fd = -1, tries;

  tmp[0] = '\0';
#if !WL_OS_POSIX
  {
    char dir[WL__PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash != NULL && (size_t)(slash - path) < sizeof(dir)) {
      memcpy(dir, path, (size_t)(slash - path));
      dir[slash == path ? 1 : slash - path] = '\0';
      if (slash == path)
        dir[0] = '/';
      fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
      if (fd >= 0 ||
          (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
    }
  }
#endif
  for (tries = 0; tries < 4; tries++) {
    if (wl__os_draw(&r) != 0)
      return -1;
    snprintf(tmp, tmplen, "%s.new-%016llx", path, (unsigned long long)r);
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0 || errno != EEXIST)
      break;
  }
  if (fd < 0)
    tmp[0] = '\0';
  return fd;
}

int wl__os_file_create(wl_manager_t *m, const char *path, uint64_t size,
                       unsigned mode, char *err, size_t errlen) {
  struct stat st;
  int rc;

  if (access(path, F_OK) == 0 || errno != ENOENT)
    return -EEXIST;
  m->fd = wl__open_unlinked(path, mode, m->tmp, sizeof(m->tmp));
  if (m->fd < 0)
    return wl__say(err, errlen, -errno, "cannot create %s: %s", path,
                   strerror(errno));
  /* Exactly the bits asked for, whatever the umask. */
  if (fchmod(m->fd, mode) != 0 || ftruncate(m->fd, (off_t)size) != 0 ||
      fstat(m->fd, &st) != 0) {
    rc = wl__say(err, errlen, -errno, "cannot create %s: %s", path,
                 strerror(errno));
  } else if ((st.st_mode & 0666) != mode) {
    /* Other processes would refuse the file (wl__check_owner), or let in
     * users who should not be. */
    rc = wl__say(err, errlen, WL_EACCES,
                 "cannot create %s: its file system gives the permission "
                 "bits %#o, not the %#o asked for (a FAT, SMB or WSL drvfs "
                 "mount?); choose a directory on a file system that keeps "
                 "them",
                 path, (unsigned)(st.st_mode & 0777), mode);
  } else if (st.st_uid != geteuid()) {
    rc = wl__say(err, errlen, WL_EACCES,
                 "cannot create %s: its file system gives it the owner uid "
                 "%u, not this process's %u (NFS with root squash, an id "
                 "mapping?), so other processes would refuse it; choose a "
                 "directory on a file system that keeps owners",
                 path, (unsigned)st.st_uid, (unsigned)geteuid());
  } else if ((rc = wl__map(m, size)) != 0) {
    wl__say(err, errlen, rc, "cannot map %s: %s", path, strerror(-rc));
  } else if ((rc = wl__os_file_join(m, &st)) != 0) {
    wl__say(err, errlen, rc, "cannot create %s: out of memory", path);
    munmap(m->map, m->map_size);
  } else {
    m->gid = st.st_gid;
    return 0;
  }
  if (m->tmp[0] != '\0')
    unlink(m->tmp);
  wl__os_file_leave(m);
  return rc;
}

#ifdef __APPLE__
static int wl__rename_noreplace(const char *from, const char *to) {
  return renamex_np(from, to, RENAME_EXCL) == 0 ? 0 : -errno;
}
#else
static int wl__rename_noreplace(const char *from, const char *to) {
  return syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to,
                 RENAME_NOREPLACE) == 0
             ? 0
             : -errno;
}
#endif

/* With one name at every moment (a rename, not a link then an unlink). */
int wl__os_file_publish(wl_manager_t *m, const char *path, char *err,
                        size_t errlen) {
  int rc;

  WL__FAULT("create");
#if WL_OS_POSIX
  rc = wl__rename_noreplace(m->tmp, path);
#else
  if (m->tmp[0] != '\0') {
    rc = wl__rename_noreplace(m->tmp, path);
  } else {
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", m->fd);
    rc = linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0
             ? 0
             : -errno;
  }
#endif
  if (rc == 0)
    m->tmp[0] = '\0';
  else if (rc != -EEXIST)
    wl__say(err, errlen, rc, "cannot create %s: %s", path, strerror(-rc));
  return rc;
}

/* Owned by us (or by root and open to no other user: root can write any
 * file anyway, and a process that gave up root keeps the scopes it opened
 * as root; root's file that its bits open to others, any of them could
 * write), or another user's file
 * that both that user (its permission bits) and we (the mode asked for: a
 * private scope trusts no other user, who could write anything in it) open
 * to others on purpose; and bits that let no user hold its locks without
 * being of the scope (WL__MODE_OK). */
static int wl__check_owner(const char *path, const struct stat *st,
                           unsigned mode, char *err, size_t errlen) {
  int foreign = st->st_uid != geteuid() &&
                !(st->st_uid == 0 && (st->st_mode & 0066) == 0);

  if (!S_ISREG(st->st_mode))
    return wl__say(err, errlen, WL_ECORRUPT, "%s is not a regular file",
                   path);
  if (foreign && (st->st_mode & 0066) == 0)
    return wl__say(err, errlen, WL_EACCES,
                   "%s belongs to another user (uid %u) who has not granted "
                   "access to it",
                   path, (unsigned)st->st_uid);
  /* Execute bits grant no lock: only read and write are weighed. */
  if (!WL__MODE_OK(st->st_mode & 0666))
    return wl__say(err, errlen, WL_EACCES,
                   "%s has the permission bits %#o: a user who may only read "
                   "it, or only write it, could hold its locks and stall "
                   "every process of the scope; its owner (uid %u) can give "
                   "each class of users both or neither (chmod 0600, 0660, "
                   "0606 or 0666)",
                   path, (unsigned)(st->st_mode & 07777),
                   (unsigned)st->st_uid);
  if (foreign && (mode & 0066) == 0)
    return wl__say(err, errlen, WL_EACCES,
                   "%s belongs to another user (uid %u), and this scope was "
                   "opened as private (mode %#o): open it with a mode that "
                   "shares it to trust another user's file",
                   path, (unsigned)st->st_uid, mode);
  return 0;
}

int wl__os_file_attach(wl_manager_t *m, const char *path, unsigned mode,
                       char *err, size_t errlen) {
  struct stat st;
  int rc;

  m->tmp[0] = '\0';
  m->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (m->fd < 0)
    return errno == ENOENT ? -ENOENT
                           : wl__say(err, errlen, -errno, "cannot open %s: %s",
                                     path, strerror(errno));
  if (fstat(m->fd, &st) != 0)
    rc = wl__say(err, errlen, -errno, "cannot open %s: %s", path,
                 strerror(errno));
  else if ((rc = wl__check_owner(path, &st, mode, err, errlen)) != 0)
    ;
  else if ((uint64_t)st.st_size < WL__PAGE)
    rc = wl__say(err, errlen, WL_ECORRUPT,
                 "%s is corrupt: %llu bytes is too short for a web-locks "
                 "manager file",
                 path, (unsigned long long)st.st_size);
  else if ((rc = wl__map(m, (uint64_t)st.st_size)) != 0)
    wl__say(err, errlen, rc, "cannot map %s: %s", path, strerror(-rc));
  else if ((rc = wl__os_file_join(m, &st)) != 0) {
    wl__say(err, errlen, rc, "cannot open %s: out of memory", path);
    munmap(m->map, m->map_size);
  }
  if (rc != 0) {
    wl__os_file_leave(m);
    return rc;
  }
  m->mode = st.st_mode & 0777;
  m->gid = st.st_gid;
  return 0;
}

int wl__os_file_admit(wl_manager_t *m, const char *path, unsigned mode,
                      char *err, size_t errlen) {
  struct stat st;

  if (fstat(m->fd, &st) != 0)
    return wl__say(err, errlen, -errno, "cannot open %s: %s", path,
                   strerror(errno));
  return wl__check_owner(path, &st, mode, err, errlen);
}

void wl__os_file_drop(wl_manager_t *m) {
  munmap(m->map, m->map_size);
  if (m->tmp[0] != '\0')
    unlink(m->tmp);
  m->tmp[0] = '\0';
  wl__os_file_leave(m);
}

/* From where the last reservation ended, and the first page with the
 * first. */
int wl__os_file_reserve(wl_manager_t *m, uint64_t upto) {
#ifdef __linux__
  uint64_t from = m->limit == 0 ? 0 : WL__PAGE + m->limit;

  while (fallocate(m->fd, 0, (off_t)from, (off_t)(WL__PAGE + upto - from)) !=
         0) {
    if (errno == EOPNOTSUPP)
      break;
    if (errno != EINTR)
      return WL_ENOMEM;
  }
#endif
  m->limit = upto;
  return 0;
}

/* With one name (agents of processes that opened it by two names would look
 * for each other's FIFOs under different names). */
int wl__os_file_same(wl_manager_t *m, const char *path, const struct stat *st,
                     char *err, size_t errlen) {
  struct stat a;

  if (fstat(m->fd, &a) != 0 || a.st_dev != st->st_dev ||
      a.st_ino != st->st_ino)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s was replaced while it was being opened", path);
  if (a.st_nlink != 1)
    return wl__say(err, errlen, -EMLINK,
                   "%s has %llu names (hard links); a scope's file must "
                   "have one: remove the others",
                   path, (unsigned long long)a.st_nlink);
  return 0;
}

int wl__os_file_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino) {
  struct stat st;

  if (fstat(m->fd, &st) != 0)
    return -errno;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return 0;
}

int wl__os_path_identity(const char *path, uint64_t *dev, uint64_t *ino) {
  struct stat st;

  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
    return -1;
  *dev = (uint64_t)st.st_dev;
  *ino = (uint64_t)st.st_ino;
  return 0;
}

void wl__os_file_close(wl_manager_t *m) {
  if (m->probe_fd >= 0)
    close(m->probe_fd);
  m->probe_fd = -1;
  wl__os_file_drop(m);
}

/* MAP_NORESERVE: address space until a repair touches it, which gives it
 * back after (wl__os_discard). */
int wl__os_work_map(wl_manager_t *m, uint64_t size) {
  void *work = size > SIZE_MAX ? MAP_FAILED
                               : mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                      -1, 0);

  if (work == MAP_FAILED)
    return WL_ENOMEM;
  m->work = work;
  m->work_size = size;
  return 0;
}

void wl__os_work_unmap(wl_manager_t *m) { munmap(m->work, m->work_size); }
