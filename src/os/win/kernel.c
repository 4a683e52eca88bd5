/* What the Windows family's files share of the system: its error codes as
 * errnos, the names of its named objects, and random numbers (a file of
 * its own, so that those files call one way only). */
#define _CRT_RAND_S /* rand_s (msvcrt.dll) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "machine.h"

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
