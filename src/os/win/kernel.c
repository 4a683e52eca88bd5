/* What the Windows family's files share of the system: its error codes as
 * errnos, the names of its named objects, their security and the file's,
 * and their owners (os/win/machine.h, point 6), random numbers, and byte
 * locks (a file of its own, so that those files call one way only). */
#define _CRT_RAND_S /* rand_s (msvcrt.dll) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "machine.h"

#include <aclapi.h>
#include <sddl.h>

int wl__win_errno(DWORD error) {
  switch (error) {
  case ERROR_FILE_NOT_FOUND:
  case ERROR_PATH_NOT_FOUND:
    return -ENOENT;
  case ERROR_FILE_EXISTS:
  case ERROR_ALREADY_EXISTS:
    return -EEXIST;
  case ERROR_ACCESS_DENIED:
  case ERROR_SHARING_VIOLATION:
    return -EACCES;
  case ERROR_DISK_FULL:
  case ERROR_HANDLE_DISK_FULL:
    return -ENOSPC;
  case ERROR_NOT_ENOUGH_MEMORY:
  case ERROR_OUTOFMEMORY:
  case ERROR_COMMITMENT_LIMIT:
    return -ENOMEM;
  case ERROR_INVALID_NAME:
  case ERROR_FILENAME_EXCED_RANGE:
    return -EINVAL;
  default:
    return -EIO;
  }
}

void wl__win_name(wchar_t *name, const char *kind, uint64_t number) {
  swprintf(name, WL__WIN_NAME_MAX, L"Global\\web-locks-%hs-%016llx", kind,
           (unsigned long long)number);
}

/* This process's user and what is made of it, once per process. */
typedef struct {
  union {
    TOKEN_USER token;
    char bytes[sizeof(TOKEN_USER) + SECURITY_MAX_SID_SIZE];
  } user;
  union {
    SID sid;
    char bytes[SECURITY_MAX_SID_SIZE];
  } system;
  union {
    ACL acl;
    char bytes[sizeof(ACL) +
               2 * (sizeof(ACCESS_ALLOWED_ACE) + SECURITY_MAX_SID_SIZE)];
  } dacl;
  SECURITY_DESCRIPTOR objects_sd, file_sd;
  SECURITY_ATTRIBUTES objects, file;
  DWORD error; /* why it could not be made, or 0 */
} wl__security_t;

static wl__security_t wl__security;
static wl__os_once_t wl__security_once = WL__OS_ONCE_INIT;

static BOOL wl__token_user(TOKEN_USER *user, DWORD size) {
  HANDLE token;
  BOOL ok;
  DWORD n, e;

  if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token))
    return FALSE;
  ok = GetTokenInformation(token, TokenUser, user, size, &n);
  e = GetLastError();
  CloseHandle(token);
  SetLastError(e);
  return ok;
}

/* The named objects: owned by this user, whatever the token's default
 * owner (an elevated process's is Administrators), and open, whatever its
 * default DACL (an elevated process's admits Administrators and SYSTEM,
 * which the user's other processes are not), to this user and SYSTEM
 * alone. The file: owned by this user too, so that every process of the
 * user finds it its user's (os/win/file.c), and open to this user and
 * SYSTEM alone too, not as its directory would have it (a handle opened
 * only to read can hold its byte locks). */
static void wl__security_init(void) {
  wl__security_t *s = &wl__security;
  DWORD n = sizeof(s->system);
  PSID user;
  BOOL ok;

  ok = wl__token_user(&s->user.token, sizeof(s->user)) &&
       CreateWellKnownSid(WinLocalSystemSid, NULL, &s->system.sid, &n);
  user = s->user.token.User.Sid;
  ok = ok && InitializeAcl(&s->dacl.acl, sizeof(s->dacl), ACL_REVISION) &&
       AddAccessAllowedAce(&s->dacl.acl, ACL_REVISION, GENERIC_ALL, user) &&
       AddAccessAllowedAce(&s->dacl.acl, ACL_REVISION, GENERIC_ALL,
                           &s->system.sid) &&
       InitializeSecurityDescriptor(&s->objects_sd,
                                    SECURITY_DESCRIPTOR_REVISION) &&
       SetSecurityDescriptorOwner(&s->objects_sd, user, FALSE) &&
       SetSecurityDescriptorDacl(&s->objects_sd, TRUE, &s->dacl.acl, FALSE) &&
       InitializeSecurityDescriptor(&s->file_sd,
                                    SECURITY_DESCRIPTOR_REVISION) &&
       SetSecurityDescriptorOwner(&s->file_sd, user, FALSE) &&
       SetSecurityDescriptorDacl(&s->file_sd, TRUE, &s->dacl.acl, FALSE) &&
       SetSecurityDescriptorControl(&s->file_sd, SE_DACL_PROTECTED,
                                    SE_DACL_PROTECTED);
  s->error = ok ? 0 : GetLastError();
  s->objects.nLength = sizeof(s->objects);
  s->objects.lpSecurityDescriptor = &s->objects_sd;
  s->file.nLength = sizeof(s->file);
  s->file.lpSecurityDescriptor = &s->file_sd;
}

static wl__security_t *wl__security_get(void) {
  wl__os_once(&wl__security_once, wl__security_init);
  if (wl__security.error == 0)
    return &wl__security;
  SetLastError(wl__security.error);
  return NULL;
}

SECURITY_ATTRIBUTES *wl__win_objects(void) {
  wl__security_t *s = wl__security_get();

  return s == NULL ? NULL : &s->objects;
}

SECURITY_ATTRIBUTES *wl__win_file(void) {
  wl__security_t *s = wl__security_get();

  return s == NULL ? NULL : &s->file;
}

int wl__win_owned(HANDLE h, SE_OBJECT_TYPE type, char *owner, size_t len) {
  wl__security_t *s = wl__security_get();
  PSECURITY_DESCRIPTOR sd = NULL;
  PSID sid = NULL;
  char *text = NULL;
  DWORD e;
  int ours;

  if (s == NULL)
    return -1;
  e = GetSecurityInfo(h, type, OWNER_SECURITY_INFORMATION, &sid, NULL, NULL,
                      NULL, &sd);
  if (e != ERROR_SUCCESS) {
    SetLastError(e);
    return -1;
  }
  ours = sid != NULL && EqualSid(sid, s->user.token.User.Sid);
  if (!ours && len > 0) {
    /* A volume without access control (FAT, exFAT) gives every file the
     * owner Everyone. */
    if (sid == NULL || IsWellKnownSid(sid, WinWorldSid))
      snprintf(owner, len, "%s", "no one (a volume without owners: FAT, exFAT?)");
    else if (ConvertSidToStringSidA(sid, &text))
      snprintf(owner, len, "%s", text);
    else
      snprintf(owner, len, "%s", "an unreadable SID");
    LocalFree(text);
  }
  LocalFree(sd);
  return ours ? 0 : 1;
}

/* rand_s: the system's random numbers (RtlGenRandom), from the C runtime
 * every Windows has. */
int wl__os_draw(uint64_t *number) {
  unsigned int lo, hi;

  do {
    if (rand_s(&lo) != 0 || rand_s(&hi) != 0)
      return -EIO;
    *number = ((uint64_t)hi << 32) | lo;
  } while (*number == 0);
  return 0;
}

BOOL wl__win_lock(HANDLE h, DWORD flags, uint64_t at) {
  OVERLAPPED o;

  memset(&o, 0, sizeof(o));
  o.Offset = (DWORD)at;
  o.OffsetHigh = (DWORD)(at >> 32);
  if (flags == (DWORD)-1)
    return UnlockFileEx(h, 0, 1, 0, &o);
  return LockFileEx(h, flags, 0, 1, 0, &o);
}
