// Types of import 'web-locks/polyfill/force' (lib/polyfill-force.mjs).
import * as polyfill from './force.js'

export * from './force.js'
export default polyfill
