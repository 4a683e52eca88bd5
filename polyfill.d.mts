// Types of import 'web-locks/polyfill' (lib/polyfill.mjs).
import * as polyfill from './polyfill.js'

export * from './polyfill.js'
export default polyfill
