/* The scope's file on Windows (os/machine.h; the design: os/win/machine.h,
 * point 1). Paths are UTF-8 and converted to UTF-16 for the wide API. */
#include <wchar.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "machine.h"

#define WL__PAGE 4096
#define WL__WPATH_MAX (WL__PATH_MAX + 32)

/* A message for the last Windows error, rc its errno. */
static int wl__fail(char *err, size_t errlen, const char *what,
                    const char *path) {
  DWORD e = GetLastError();
  int rc = wl__win_errno(e);

  return wl__say(err, errlen, rc, "cannot %s %s: %s (Windows error %lu)",
                 what, path, strerror(-rc), (unsigned long)e);
}

static int wl__slash(char c) { return c == '\\' || c == '/'; }

static int wl__letter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* path as the wide API takes it. An absolute one gets the \\?\ prefix
 * (\\?\UNC\ for \\server\share), which turns Win32's normalisation off:
 * "web-locks.." (scope "..") keeps its name instead of losing its trailing
 * dots and naming "web-locks", and no MAX_PATH applies. Its separators are
 * then backslashes, and "." or ".." in it name no directory (lib/ gives
 * resolved paths). A relative path is left as it is. */
static int wl__wide(const char *path, wchar_t *out) {
  const wchar_t *prefix = L"";
  size_t skip = 0, n;
  wchar_t *c;

  if (wl__letter(path[0]) && path[1] == ':' && wl__slash(path[2])) {
    prefix = L"\\\\?\\";
  } else if (wl__slash(path[0]) && wl__slash(path[1]) && path[2] != '?' &&
             path[2] != '.') {
    prefix = L"\\\\?\\UNC\\";
    skip = 2;
  }
  n = wcslen(prefix);
  wcscpy(out, prefix);
  if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path + skip, -1,
                          out + n, (int)(WL__WPATH_MAX - n)) <= 0)
    return -1;
  for (c = out + n; n > 0 && *c != L'\0'; c++) {
    if (*c == L'/')
      *c = L'\\';
  }
  return 0;
}

static int wl__map(wl_manager_t *m, uint64_t size) {
  HANDLE mapping = CreateFileMappingW(m->fd, NULL, PAGE_READWRITE, 0, 0,
                                      NULL);
  void *map;

  if (mapping == NULL)
    return -1;
  /* The view keeps the mapping: its handle is not needed any more. */
  map = size > SIZE_MAX ? NULL
                        : MapViewOfFile(mapping, FILE_MAP_READ | FILE_MAP_WRITE,
                                        0, 0, (SIZE_T)size);
  if (map == NULL) {
    DWORD e = GetLastError();
    CloseHandle(mapping);
    SetLastError(e);
    return -1;
  }
  CloseHandle(mapping);
  m->map = map;
  m->map_size = size;
  return 0;
}

static int wl__local(wl_manager_t *m) {
  m->local = calloc(1, sizeof(*m->local));
  if (m->local == NULL)
    return WL_ENOMEM;
  InitializeSRWLock(&m->local->mu);
  InitializeSRWLock(&m->local->probe_mu);
  m->local->pid = GetCurrentProcessId();
  return 0;
}

static void wl__close_fd(wl_manager_t *m) {
  if (m->fd != NULL)
    CloseHandle(m->fd);
  m->fd = NULL;
}

/* Whether the file of h (a handle with DELETE access) is removed when its
 * last handle closes. */
static BOOL wl__doomed(HANDLE h, BOOL doomed) {
  FILE_DISPOSITION_INFO d;

  d.DeleteFile = doomed;
  return SetFileInformationByHandle(h, FileDispositionInfo, &d, sizeof(d));
}

/* A temporary name no one can predict, drawn again if taken. The file is
 * to be removed with its last handle from just after it is made (through
 * *doom, a handle of its own with DELETE access: the scope's handle has
 * none, so that the file stays open to programs that share no delete
 * access) until just before its rename, and so before it is mapped, which
 * Windows would refuse: a process killed while it makes the file leaves
 * none behind. */
static HANDLE wl__create_tmp(wl_manager_t *m, const char *path,
                             HANDLE *doom) {
  wchar_t wtmp[WL__WPATH_MAX];
  SECURITY_ATTRIBUTES *sa = wl__win_file();
  HANDLE h = INVALID_HANDLE_VALUE, d = INVALID_HANDLE_VALUE;
  uint64_t r;
  int tries;

  for (tries = 0; sa != NULL && tries < 4; tries++) {
    if (wl__os_draw(&r) != 0)
      break;
    snprintf(m->tmp, sizeof(m->tmp), "%s.new-%016llx", path,
             (unsigned long long)r);
    if (wl__wide(m->tmp, wtmp) != 0) {
      SetLastError(ERROR_INVALID_NAME);
      break;
    }
    d = CreateFileW(wtmp, DELETE,
                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                    sa, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
    if (d != INVALID_HANDLE_VALUE || GetLastError() != ERROR_FILE_EXISTS)
      break;
  }
  if (d != INVALID_HANDLE_VALUE) {
    h = CreateFileW(wtmp, GENERIC_READ | GENERIC_WRITE,
                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                    NULL, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
    if (h == INVALID_HANDLE_VALUE || !wl__doomed(d, TRUE)) {
      DWORD e = GetLastError();
      if (h != INVALID_HANDLE_VALUE)
        CloseHandle(h);
      CloseHandle(d);
      DeleteFileW(wtmp);
      SetLastError(e);
      h = INVALID_HANDLE_VALUE;
    }
  }
  if (h == INVALID_HANDLE_VALUE)
    m->tmp[0] = '\0';
  else
    *doom = d;
  return h;
}

static void wl__remove_tmp(wl_manager_t *m) {
  wchar_t wtmp[WL__WPATH_MAX];

  if (m->tmp[0] != '\0' && wl__wide(m->tmp, wtmp) == 0)
    DeleteFileW(wtmp);
  m->tmp[0] = '\0';
}

/* The file is this user's (os/win/machine.h, point 1): another user's,
 * who could change every lock in it, is refused. */
static int wl__check_owner(HANDLE h, const char *path, char *err,
                           size_t errlen) {
  char owner[192];
  int rc = wl__win_owned(h, SE_FILE_OBJECT, owner, sizeof(owner));

  if (rc < 0)
    return wl__fail(err, errlen, "read the owner of", path);
  if (rc > 0)
    return wl__say(err, errlen, WL_EACCES,
                   "cannot open %s: it belongs to %s, not to this process's "
                   "user; on Windows a scope is its user's alone",
                   path, owner);
  return 0;
}

/* Closing the handles removes the file: it is doomed until published. */
int wl__os_file_create(wl_manager_t *m, const char *path, uint64_t size,
                       unsigned mode, char *err, size_t errlen) {
  wchar_t wpath[WL__WPATH_MAX];
  LARGE_INTEGER end;
  HANDLE h;
  int rc;

  (void)mode; /* no permission bits: os/win/machine.h, point 1 */
  if (wl__wide(path, wpath) != 0)
    return wl__say(err, errlen, WL_EINVAL, "cannot create %s: not UTF-8",
                   path);
  if (GetFileAttributesW(wpath) != INVALID_FILE_ATTRIBUTES ||
      (GetLastError() != ERROR_FILE_NOT_FOUND &&
       GetLastError() != ERROR_PATH_NOT_FOUND))
    return -EEXIST;
  if ((rc = wl__local(m)) != 0)
    return wl__say(err, errlen, rc, "cannot create %s: out of memory", path);
  h = wl__create_tmp(m, path, &m->local->doom);
  if (h == INVALID_HANDLE_VALUE) {
    rc = wl__fail(err, errlen, "create", path);
  } else {
    m->fd = h;
    end.QuadPart = (LONGLONG)size;
    /* Refused now if other processes would refuse it: a volume that
     * records no owner (FAT, exFAT). */
    if ((rc = wl__check_owner(h, path, err, errlen)) == 0) {
      if (SetFilePointerEx(h, end, NULL, FILE_BEGIN) && SetEndOfFile(h) &&
          wl__map(m, size) == 0)
        return 0;
      rc = wl__fail(err, errlen, "create", path);
    }
    wl__close_fd(m);
    CloseHandle(m->local->doom);
    m->tmp[0] = '\0';
  }
  free(m->local);
  m->local = NULL;
  return rc;
}

/* A rename that fails if a file is at path: one name at every moment. */
int wl__os_file_publish(wl_manager_t *m, const char *path, char *err,
                        size_t errlen) {
  wchar_t wtmp[WL__WPATH_MAX], wpath[WL__WPATH_MAX];
  DWORD e;

  WL__FAULT("create");
  if (wl__wide(m->tmp, wtmp) != 0 || wl__wide(path, wpath) != 0)
    return wl__say(err, errlen, WL_EINVAL, "cannot create %s: not UTF-8",
                   path);
  /* From here to the rename, a kill leaves the temporary file. */
  if (!wl__doomed(m->local->doom, FALSE))
    return wl__fail(err, errlen, "create", path);
  if (MoveFileExW(wtmp, wpath, 0)) {
    m->tmp[0] = '\0';
    CloseHandle(m->local->doom);
    m->local->doom = NULL;
    return 0;
  }
  e = GetLastError();
  if (e == ERROR_ALREADY_EXISTS || e == ERROR_FILE_EXISTS)
    return -EEXIST;
  SetLastError(e);
  return wl__fail(err, errlen, "create", path);
}

/* A regular file (not a directory or a reparse point: a link could lead
 * anywhere, and is refused as O_NOFOLLOW refuses one, ELOOP), not sparse (a
 * store into a hole could fail), of at least one page. */
static int wl__check(const char *path, const BY_HANDLE_FILE_INFORMATION *fi,
                     char *err, size_t errlen) {
  uint64_t size = ((uint64_t)fi->nFileSizeHigh << 32) | fi->nFileSizeLow;

  if ((fi->dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0)
    return wl__say(err, errlen, -ELOOP,
                   "cannot open %s: it is a symbolic link (a reparse point)",
                   path);
  if ((fi->dwFileAttributes &
       (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_SPARSE_FILE)) != 0)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is not a regular file that web-locks made", path);
  if (size < WL__PAGE)
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s is corrupt: %llu bytes is too short for a web-locks "
                   "manager file",
                   path, (unsigned long long)size);
  return 0;
}

int wl__os_file_attach(wl_manager_t *m, const char *path, unsigned mode,
                       char *err, size_t errlen) {
  wchar_t wpath[WL__WPATH_MAX];
  BY_HANDLE_FILE_INFORMATION fi;
  int rc;

  m->tmp[0] = '\0';
  if (wl__wide(path, wpath) != 0)
    return wl__say(err, errlen, WL_EINVAL, "cannot open %s: not UTF-8", path);
  m->fd = CreateFileW(wpath, GENERIC_READ | GENERIC_WRITE,
                      FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                      NULL, OPEN_EXISTING,
                      FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT,
                      NULL);
  if (m->fd == INVALID_HANDLE_VALUE) {
    m->fd = NULL;
    if (GetLastError() == ERROR_FILE_NOT_FOUND)
      return -ENOENT;
    return wl__fail(err, errlen, "open", path);
  }
  if (!GetFileInformationByHandle(m->fd, &fi))
    rc = wl__fail(err, errlen, "open", path);
  else if ((rc = wl__check(path, &fi, err, errlen)) != 0 ||
           (rc = wl__check_owner(m->fd, path, err, errlen)) != 0)
    ;
  else if (wl__map(m, ((uint64_t)fi.nFileSizeHigh << 32) | fi.nFileSizeLow) !=
           0)
    rc = wl__fail(err, errlen, "map", path);
  else if ((rc = wl__local(m)) != 0) {
    wl__say(err, errlen, rc, "cannot open %s: out of memory", path);
    UnmapViewOfFile(m->map);
  }
  if (rc != 0) {
    wl__close_fd(m);
    return rc;
  }
  m->mode = mode;
  return 0;
}

/* Every scope file is its user's (point 1), whatever the mode. Asked
 * through the probe handle: a call on m->fd may wait behind a thread's
 * LockFileEx on it (point 2). */
int wl__os_file_admit(wl_manager_t *m, const char *path, unsigned mode,
                      char *err, size_t errlen) {
  wl__os_local_t *l = m->local;
  int rc;

  (void)mode;
  AcquireSRWLockShared(&l->probe_mu);
  rc = wl__check_owner(l->probe, path, err, errlen);
  ReleaseSRWLockShared(&l->probe_mu);
  return rc;
}

void wl__os_file_drop(wl_manager_t *m) {
  UnmapViewOfFile(m->map);
  m->map = NULL;
  if (m->local != NULL && m->local->probe != NULL)
    CloseHandle(m->local->probe);
  if (m->local != NULL && m->local->doom != NULL)
    CloseHandle(m->local->doom);
  free(m->local);
  m->local = NULL;
  /* Closed first: the file is removed once no handle has it open. */
  wl__close_fd(m);
  wl__remove_tmp(m);
}

/* The file is not sparse: its creation allocated all of it. */
int wl__os_file_reserve(wl_manager_t *m, uint64_t upto) {
  m->limit = upto;
  return 0;
}

/* An open of the file at wpath to probe through (os/win/life.c), and what
 * it is in *fi. */
static HANDLE wl__probe_open(const wchar_t *wpath,
                             BY_HANDLE_FILE_INFORMATION *fi) {
  HANDLE h = CreateFileW(wpath, GENERIC_READ,
                         FILE_SHARE_READ | FILE_SHARE_WRITE |
                             FILE_SHARE_DELETE,
                         NULL, OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT,
                         NULL);

  if (h != INVALID_HANDLE_VALUE && !GetFileInformationByHandle(h, fi)) {
    CloseHandle(h);
    h = INVALID_HANDLE_VALUE;
  }
  return h;
}

/* The file at path is the one mapped, with one name; the open by path is
 * kept as the probe handle (os/win/life.c), a handle of its own whose byte
 * locks are not m->fd's. The file is known by its index on the volume of
 * its path: wine reports volume serial 0 for a handle of a file renamed
 * since it was opened (the created one), so the volume's serial is taken
 * from the open by path; both are kept, so that the file's identity needs
 * no call on m->fd, on which a thread may wait for the mutex's byte. */
int wl__os_file_probe(wl_manager_t *m, const char *path, char *err,
                      size_t errlen) {
  wchar_t wpath[WL__WPATH_MAX];
  BY_HANDLE_FILE_INFORMATION a, b;
  HANDLE h;

  if (wl__wide(path, wpath) != 0)
    return wl__say(err, errlen, WL_EINVAL, "cannot open %s: not UTF-8", path);
  h = wl__probe_open(wpath, &b);
  if (h == INVALID_HANDLE_VALUE || !GetFileInformationByHandle(m->fd, &a) ||
      a.nFileIndexHigh != b.nFileIndexHigh ||
      a.nFileIndexLow != b.nFileIndexLow) {
    if (h != INVALID_HANDLE_VALUE)
      CloseHandle(h);
    return wl__say(err, errlen, WL_ECORRUPT,
                   "%s was replaced while it was being opened", path);
  }
  if (a.nNumberOfLinks != 1) {
    CloseHandle(h);
    return wl__say(err, errlen, -EMLINK,
                   "%s has %lu names (hard links); a scope's file must "
                   "have one: remove the others",
                   path, (unsigned long)a.nNumberOfLinks);
  }
  m->local->probe = h;
  m->local->volume = b.dwVolumeSerialNumber;
  m->local->ino = ((uint64_t)b.nFileIndexHigh << 32) | b.nFileIndexLow;
  return 0;
}

/* A new open of the path, if it is still the file that wl__os_file_probe
 * found there: another file put at the path must never be probed. */
static HANDLE wl__probe_again(const wl_manager_t *m) {
  wchar_t wpath[WL__WPATH_MAX];
  BY_HANDLE_FILE_INFORMATION fi;
  HANDLE h;

  if (wl__wide(m->path, wpath) != 0 ||
      (h = wl__probe_open(wpath, &fi)) == INVALID_HANDLE_VALUE)
    return INVALID_HANDLE_VALUE;
  if (fi.dwVolumeSerialNumber == m->local->volume &&
      (((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow) ==
          m->local->ino)
    return h;
  CloseHandle(h);
  return INVALID_HANDLE_VALUE;
}

/* The failed handle is closed only once no thread asks through it. The
 * new one is opened before the lock is taken: an open by path may wait (an
 * oplock break, an SMB timeout), and so would every prober meanwhile. */
int wl__win_probe_reopen(wl_manager_t *m, HANDLE failed) {
  wl__os_local_t *l = m->local;
  HANDLE h = wl__probe_again(m), spare = h;
  int rc;

  AcquireSRWLockExclusive(&l->probe_mu);
  if (l->probe == failed && h != INVALID_HANDLE_VALUE) {
    spare = failed;
    l->probe = h;
  }
  rc = l->probe == failed ? -1 : 0;
  ReleaseSRWLockExclusive(&l->probe_mu);
  if (spare != INVALID_HANDLE_VALUE)
    CloseHandle(spare);
  return rc;
}

int wl__os_file_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino) {
  *dev = m->local->volume;
  *ino = m->local->ino;
  return 0;
}

/* Its volume's serial as an open by path gives it (wl__os_file_probe). */
int wl__os_path_identity(const char *path, uint64_t *dev, uint64_t *ino) {
  wchar_t wpath[WL__WPATH_MAX];
  BY_HANDLE_FILE_INFORMATION fi;
  HANDLE h;
  int ok;

  if (wl__wide(path, wpath) != 0)
    return -1;
  h = CreateFileW(wpath, 0,
                  FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                  OPEN_EXISTING, FILE_FLAG_OPEN_REPARSE_POINT, NULL);
  if (h == INVALID_HANDLE_VALUE)
    return -1;
  ok = GetFileInformationByHandle(h, &fi) &&
       (fi.dwFileAttributes &
        (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT)) == 0 &&
       fi.nNumberOfLinks == 1;
  CloseHandle(h);
  if (!ok)
    return -1;
  *dev = fi.dwVolumeSerialNumber;
  *ino = ((uint64_t)fi.nFileIndexHigh << 32) | fi.nFileIndexLow;
  return 0;
}

void wl__os_file_close(wl_manager_t *m) { wl__os_file_drop(m); }

/* Committed at once: Windows has no overcommit, and a repair must not ask
 * for memory it may not get. Its pages cost nothing until touched. */
int wl__os_work_map(wl_manager_t *m, uint64_t size) {
  void *work = size > SIZE_MAX
                   ? NULL
                   : VirtualAlloc(NULL, (SIZE_T)size, MEM_RESERVE | MEM_COMMIT,
                                  PAGE_READWRITE);

  if (work == NULL)
    return WL_ENOMEM;
  m->work = work;
  m->work_size = size;
  return 0;
}

void wl__os_work_unmap(wl_manager_t *m) {
  VirtualFree(m->work, 0, MEM_RELEASE);
}
