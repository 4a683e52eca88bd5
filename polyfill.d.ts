// Installs navigator.locks where the platform has none (or null); never
// replaces one.

/** True when this package's `locks` was installed as `navigator.locks`. */
export declare const installed: boolean
