/* web-locks core: the W3C Web Locks lock manager in plain C.
 *
 * A manager's whole state lives in one region of memory addressed by
 * offsets (core/region.c), guarded by one mutex, so the same algorithms run on
 * the process's own memory (wl_process(), the process-wide manager) and on a
 * mapping shared by processes. An agent is a thread (any party that owns an
 * event loop); it owns requests. Every outcome that the spec delivers "on the
 * agent's event loop" (a grant, a null callback for an unavailable
 * ifAvailable request, a steal) is put in the agent's mailbox and the
 * agent's notify callback is called when its mailbox goes from empty to
 * non-empty. The agent drains its mailbox on its own thread.
 *
 * Records: agents and requests live in the region; the caller's wl_agent_t
 * and wl_request_t are handles to them. A machine-wide manager's record names its
 * handle by an index into a table of the process's own (its manager's
 * agents, its agent's requests), never by a pointer: another process may
 * have written anything in the region. (The process-wide manager's records,
 * in memory that only this code writes, hold the address.) A request's
 * record exists from
 * wl_request() until it is released (wl_release), aborted (wl_abort returned
 * 1), delivered as WL_EV_UNAVAILABLE, or its agent closed; a handle used after
 * that finds nothing (release and abort return 0). The caller's handles must
 * stay put while their records exist (the core maps mail back to them).
 *
 * Every operation is O(1) in the number of other requests, locks and names,
 * except a steal (O(holders of that name)), wl_agent_close (O(the agent's
 * requests)), wl_agent_waits (see there) and wl_snapshot (O(entries)). */
#ifndef WL_H
#define WL_H

#include <stddef.h>
#include <stdint.h>

#include "list.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { WL_EXCLUSIVE = 0, WL_SHARED = 1 } wl_mode_t;

/* wl_request() flags. */
enum { WL_IF_AVAILABLE = 1, WL_STEAL = 2 };

/* Mailbox events, or-ed together when one request has several undelivered.
 * They are delivered in this order: a grant (or unavailability) before the
 * steal that followed it. */
enum { WL_EV_GRANTED = 1, WL_EV_UNAVAILABLE = 2, WL_EV_STOLEN = 4 };

/* wl_request()'s result when the lock was granted without waiting. */
enum { WL_GRANTED_AT_ONCE = 1 };

/* Error codes, negative like libuv's. The core's own lie below -30000, out
 * of the range of every platform's errno and of libuv's codes (above
 * -4096), so that none is taken for another; a system call's failure is
 * returned as the OS layer translates it: -errno on Linux and macOS, as
 * libuv's codes are there. */
enum {
  WL_ENOMEM = -30001,  /* out of memory, or the manager's region is full */
  WL_EINVAL = -30002,  /* an argument the core refuses */
  WL_EACCES = -30003,  /* another user's manager file, not opened to us */
  WL_ELAYOUT = -30004, /* a manager file of another layout or architecture */
  WL_ECORRUPT = -30005, /* a corrupt or foreign manager file */
  /* A machine-wide manager whose mutex's holder died holding it: the next
   * process to open it repairs it (wl_scope_peek, which repairs nothing) */
  WL_EREPAIR = -30006
};

/* The layout of a manager's region and records, as written in a shared
 * manager's file: processes share a file only if they agree on it. */
#define WL_LAYOUT 6

/* Whether this build has managers shared by processes (wl_scope_open and
 * the wake descriptors): they need Linux, and the build leaves them out
 * elsewhere (binding.gyp sets this to 0). */
#ifndef WL_MACHINE_MANAGER
#define WL_MACHINE_MANAGER 1
#endif

#define WL_CLIENT_ID_MAX 64

#include "table.h"

typedef struct wl_manager_s wl_manager_t;
typedef struct wl_agent_s wl_agent_t;
typedef struct wl_request_s wl_request_t;

/* Called with the manager's mutex held, from any thread, when `agent`'s
 * mailbox goes from empty to non-empty. It must only wake the agent (for
 * example uv_async_send) and must not call back into the core. */
typedef void (*wl_notify_cb)(wl_agent_t *agent);

/* What an agent's thread waits on to be woken by other processes: a
 * descriptor that becomes readable (Unix), or an event's HANDLE (Windows). */
#ifdef _WIN32
typedef void *wl_wait_t;
#define WL_WAIT_NONE ((void *)0)
#else
typedef int wl_wait_t;
#define WL_WAIT_NONE (-1)
#endif

struct wl_agent_s {
  void *data; /* the caller's */
  /* private */
  wl_manager_t *m;
  wl_notify_cb notify;
  wl_off_t off;   /* its record */
  uint32_t gen;   /* the record's generation when made */
  uint32_t local; /* its index in the manager's table of this process's agents */
  /* Its wake-up's read end (a FIFO's, os/unix/wake.c; an event, os/win/wake.c)
   * for a machine-wide manager; else WL_WAIT_NONE. */
  wl_wait_t wake_fd;
  uint64_t wake;  /* its wake-up's number, or 0 */
  wl__table_t requests; /* its requests' handles, by the index records carry */
};

struct wl_request_s {
  void *data; /* the caller's */
  /* The caller's, read by wl_request() and shown in snapshots: the serial
   * (wl_request_serial) of its agent's lock inside whose hold the request
   * was made, or 0. It is what tells one task waiting inside its own lock from
   * two independent tasks of one agent (lib/deadlock.js). */
  uint64_t parent;
  /* private */
  wl_agent_t *agent;
  wl_off_t off;   /* its record while it has one */
  uint32_t gen;   /* the record's generation when made */
  uint32_t local; /* its index in its agent's table while it has a record */
  uint64_t token; /* its fencing token, once its grant is taken */
  uint64_t serial; /* wl_request_serial()'s */
};

typedef struct {
  const uint16_t *name; /* UTF-16 code units, not terminated */
  size_t name_len;
  size_t name_index; /* the same for every entry of one name: 0..nnames-1 */
  wl_mode_t mode;
  const char *client_id; /* not terminated */
  size_t client_id_len;
  uint64_t serial; /* wl_request_serial()'s */
  uint64_t parent; /* wl_request_t.parent */
  /* A machine-wide manager's: when it was made (pending) or granted
   * (held), in microseconds of the monotonic clock that every process of
   * the machine reads alike, read at the resolution of the system's tick
   * (wl__os_now_coarse: a few ms early), and made greater than the last
   * one recorded (wl__stamp: so after a burst of more than one request a
   * microsecond it may run ahead of the clock, and an entry then shows no
   * duration); 0 in the process-wide manager. */
  uint64_t since;
  uint32_t pid; /* its agent's process's id (0: unknown) */
  /* wl_scope_peek's: 0 when that process has died and no sweep has ended
   * its agents yet; 1 while it lives, and in every other snapshot. */
  int alive;
  wl_off_t owner; /* private: its agent's owner record, or 0 */
} wl_info_t;

typedef struct {
  wl_info_t *held;
  size_t nheld;
  wl_info_t *pending; /* per name in queue order, names in first-use order */
  size_t npending;
  size_t nnames; /* distinct names among the entries */
  void *mem;     /* owns everything above */
} wl_snapshot_t;

/* The process-wide manager, made on first use; NULL if its memory cannot be
 * reserved. */
wl_manager_t *wl_process(void);

/* Opens the manager shared through the file at path, creating it (size
 * bytes, a multiple of 4096, with permission bits `mode`) if it does not
 * exist. Returns 0 with *m set, or an error code with a sentence naming the
 * file and what is wrong with it in err (errlen bytes). It starts two
 * threads, which use no CPU until a process that has the manager open dies
 * (on Linux 5.16 and later): then one of them ends that process's agents
 * (wl_sweep), so that the grants this makes reach this process's agents
 * through their notify callbacks, from that thread. The handle is this
 * process's: a child of fork() opens its own. */
int wl_scope_open(const char *path, uint64_t size, unsigned mode,
                    wl_manager_t **m, char *err, size_t errlen);
/* Ends this process's agents of a machine-wide manager, stops its threads and
 * unmaps it. */
void wl_scope_close(wl_manager_t *m);
/* Whether this process, which has the manager open, may open it again with
 * the permission bits `mode`: the test wl_scope_open makes of a file it did
 * not create, made of the open file (a private open must not trust another
 * user's file because a shared open of it came first). Returns 0, or an
 * error code with a sentence in err. */
int wl_scope_admit(wl_manager_t *m, unsigned mode, char *err, size_t errlen);
/* The identity of a machine-wide manager's file (its device and inode), to tell
 * whether a path still names it. Returns 0 or -errno. */
int wl_scope_identity(wl_manager_t *m, uint64_t *dev, uint64_t *ino);
/* The identity that wl_scope_identity would give the file at path, to find
 * a manager this process has open: 0, or -1 where path names no regular
 * file with one name (not through a symbolic link, which wl_scope_open
 * refuses, as it refuses a hard link). */
int wl_scope_path_identity(const char *path, uint64_t *dev, uint64_t *ino);

/* A look at the machine-wide manager in the file at path that changes
 * nothing: a snapshot (as wl_snapshot's, with each entry's `alive`) of an
 * existing file, tested as wl_scope_open tests it (its layout, and its
 * owner and permission bits for `mode`), copied under its mutex, without
 * becoming one of its processes: no sweep, no repair, no thread left
 * behind, the file as found (on Linux, taking the mutex writes its words
 * and giving it back restores them: glibc's all of them, musl's but the
 * links of its robust list, which name its last taker's thread and mean
 * nothing while it is not held). Returns 0, or an error code with a
 * sentence naming the file in err: -ENOENT when there is none; WL_EREPAIR
 * when its mutex's last holder died holding it (the mutex is left as
 * found); -ETIMEDOUT when the mutex stayed held for wait_ms milliseconds
 * (a stopped process?); the codes of wl_scope_open.
 * On Linux the mutex is taken from a thread of its own, which ends holding
 * it if its holder died in the meantime: the system then marks it so for
 * the next process to take it, as it was found; elsewhere its byte is
 * taken and its words only read. In the POSIX family a
 * process that has the scope open keeps each look's descriptor of the file
 * until it closes the scope (os/posix/posix.h, point 3). */
int wl_scope_peek(const char *path, unsigned mode, unsigned wait_ms,
                  wl_snapshot_t *snap, char *err, size_t errlen);

/* Ends every agent of every process that has died with the manager open
 * (spec 2.6), so that the requests waiting behind them are granted. Opening
 * a manager, repairing one after a crash, and (on Linux 5.16 and later) the
 * death of a process that has it open sweep too. Returns 0 or an error
 * code. */
int wl_sweep(wl_manager_t *m);

/* Registers an agent with manager m. client_id is copied; at most
 * WL_CLIENT_ID_MAX bytes. Returns 0, WL_EINVAL or WL_ENOMEM. */
int wl_agent_init(wl_manager_t *m, wl_agent_t *agent, const char *client_id,
                  size_t client_id_len, wl_notify_cb notify);

/* For an agent of a machine-wide manager: what its thread waits on (a
 * descriptor polled for readability; on Windows an event waited for), which
 * other processes signal when its mailbox gets mail; WL_WAIT_NONE for the
 * process-wide manager, whose agents are woken by their notify callback.
 * When it is signalled, call wl_agent_woken() before draining the mailbox
 * with wl_agent_next(). */
wl_wait_t wl_agent_wake_fd(const wl_agent_t *agent);
void wl_agent_woken(const wl_agent_t *agent);

/* Terminates the agent's remaining locks and requests (spec 2.6): aborts its
 * queued requests in request order, then releases its held locks in grant
 * order, processing each affected queue as it goes; undelivered mail is
 * dropped. When it returns, no other thread can reach the agent or its
 * requests. */
void wl_agent_close(wl_agent_t *agent);

/* Pops the next request with mail and its events, or returns NULL. Only the
 * agent's own thread calls this. Once it has returned NULL, the next event
 * notifies again; a caller that stops before NULL must wake itself. */
wl_request_t *wl_agent_next(wl_agent_t *agent, unsigned *events);

/* 0, or WL_ECORRUPT once the agent's manager has been found corrupt (by any
 * thread, or any process of a machine-wide manager): then every operation fails,
 * nothing more is delivered, and the caller ends whatever requests it still
 * has. Every agent of the process is notified when that is found. */
int wl_agent_status(const wl_agent_t *agent);

/* What an agent's waiting requests wait for, so that its thread knows
 * whether waiting is worth keeping its event loop alive for (binding/thread.c):
 * WL_WAITS_NOTHING (none is queued, no event is undelivered),
 * WL_WAITS_ON_SELF (every queued request has in its way a lock the agent
 * holds in a conflicting mode, or a request of the agent ahead of it: none
 * can be granted until the agent releases, or another agent's steal, which
 * it is told of, takes its lock), WL_WAITS_ON_OTHERS (some request has only
 * other agents' locks and requests in its way, which they may release,
 * abort, or lose by ending: it is then granted, and the agent told; or an
 * event is undelivered), or an error code. Only what the agent does or is
 * told changes the answer. O(the agent's queued requests times its held
 * locks, plus the length of the queues they are in) at most. */
enum { WL_WAITS_NOTHING = 0, WL_WAITS_ON_SELF = 1, WL_WAITS_ON_OTHERS = 2 };
int wl_agent_waits(wl_agent_t *agent);

/* Requests a lock on `name` (UTF-16 code units, copied when new) for `agent`.
 * The outcome arrives in the agent's mailbox: WL_EV_GRANTED, or for an
 * ifAvailable request that is not grantable WL_EV_UNAVAILABLE. Returns
 * WL_GRANTED_AT_ONCE if the lock was free (the grant is still delivered by
 * mail), 0 if the request waits or missed, WL_EINVAL for a flag combination
 * the spec rejects, or WL_ENOMEM. */
int wl_request(wl_agent_t *agent, wl_request_t *req, const uint16_t *name,
               size_t name_len, wl_mode_t mode, unsigned flags);

/* The fencing token of a granted request: the manager counts its grants,
 * from 1, and gives each grant the next number, so a token is greater than
 * every token given before it by the same manager (for one name: in grant
 * order), whatever the names, agents and processes, and across a shared
 * manager's file being closed and opened again or repaired after a crash (a
 * crash may skip numbers, never repeat one). A thief's token is greater
 * than its victims'. Valid once wl_agent_next() has returned the request's
 * WL_EV_GRANTED, until the handle is used for another request; 0 before. */
uint64_t wl_request_token(const wl_request_t *req);

/* Now, on the clock of wl_info_t.since: microseconds of the monotonic
 * clock that every process of the machine reads alike. */
uint64_t wl_clock(void);

/* The request's serial number, once wl_request() has returned 0 or
 * WL_GRANTED_AT_ONCE, until the handle is used for another request: no
 * other request of the manager has had or will have it (a crash may skip
 * numbers, never repeat one), and it is below 2^53 (a JS number). */
uint64_t wl_request_serial(const wl_request_t *req);

/* Ends a request in whatever state it is: a held lock is released, a queued
 * request leaves its queue, undelivered mail is dropped. Returns 1 if it
 * held its lock, 0 otherwise (for a granted request: the lock was stolen). */
int wl_release(wl_request_t *req);

/* Aborts a queued request. Returns 1 if it was removed from its queue (the
 * core no longer references it), 0 if it is not queued (already granted). */
int wl_abort(wl_request_t *req);

/* Copies the manager's state. Returns 0 or WL_ENOMEM; free with
 * wl_snapshot_free(). */
int wl_snapshot(wl_manager_t *m, wl_snapshot_t *snap);
void wl_snapshot_free(wl_snapshot_t *snap);

#ifdef __cplusplus
}
#endif

#endif
