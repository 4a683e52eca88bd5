'use strict';
// The stress test's shared memory: one Int32Array over a SharedArrayBuffer,
// shared by every participating thread.
const NAMES_MAX = 8;
const MAX_SLOTS = 64;
const STATE_BITS = 20;

const L = {
  NAMES_MAX,
  MAX_SLOTS,
  TICKET: 0, // the ticket counter
  LOCK: 1, // the spinlock: 0 or owner tid + 1
  WAITERS: 2,
  ENDING: 3, // thread ends in progress: no steals meanwhile
  NEXT_R: 4, // logical request ids
  EXCL: 8, // + name: counted exclusive holders
  SHARED_: 16, // + name: counted shared holders
  DYING: 32, // + slot: the thread is being ended, its callbacks do not count
  POSTED: 32 + MAX_SLOTS, // + slot: records the thread has sent
  TABLE: 32 + 2 * MAX_SLOTS, // + slot * 6: [tid + 1, clientId as 4 words, -]
  CUR: 32 + 8 * MAX_SLOTS, // + slot * NAMES_MAX + name: the thread's request on that name
  STATE_MASK: (1 << STATE_BITS) - 1,
  // per logical request (mod 2^20): counting state, and name + 1
  COUNTED_EXCL: 1,
  COUNTED_SHARED: 2,
  ROBBED: 3,
};
L.STATE = L.CUR + MAX_SLOTS * NAMES_MAX;
L.STATE_NAME = L.STATE + (1 << STATE_BITS);
L.SIZE = L.STATE_NAME + (1 << STATE_BITS);

L.lifeName = (tid) => `stress-life:${tid}`;

L.slotOfTid = (S, tid) => {
  for (let s = 0; s < MAX_SLOTS; s++) if (S[L.TABLE + s * 6] === tid + 1) return s;
  return -1;
};

module.exports = L;
