// import 'web-locks/polyfill/force': the same module as
// require('web-locks/polyfill/force').
import polyfill from './polyfill-force.js'

export const { installed } = polyfill
export default polyfill
