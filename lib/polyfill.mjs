// import 'web-locks/polyfill': the same module as require('web-locks/polyfill').
import polyfill from './polyfill.js'

export const { installed } = polyfill
export default polyfill
