// Types of require('web-locks/polyfill/force'): those of web-locks/polyfill,
// whose globals (navigator.locks, LockManager, Lock) this entry installs even
// over a platform's own.
export * from '../polyfill.js'
