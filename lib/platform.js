'use strict'

// Where the package can run: prebuilt for some platforms, built from source
// on install (node-gyp, a C11 compiler) on the other Unix systems. Windows
// builds only for x64, and only the prebuilt binary: the C sources need GCC
// or Clang, not MSVC, which is what node-gyp uses there.

const PREBUILT = 'Linux x64 and arm64 (glibc 2.28 or later, and musl), macOS x64 and arm64, and Windows x64'

// Why web-locks cannot run on a platform and CPU, or null where it can.
function unsupported (platform, arch) {
  if (platform === 'win32' && arch !== 'x64') {
    return `web-locks does not support Windows on ${arch}. It is prebuilt for ${PREBUILT}, ` +
      'and compiled on install on other Unix systems with a C11 compiler.'
  }
  return null
}

// The variables of `env` that make the install build from source: ours,
// set to anything (binding.gyp reads them so), and npm's, which
// node-gyp-build honours only when it is exactly 'true'.
function buildAskedBy (env) {
  const asked = ['WEB_LOCKS_NO_MACHINE', 'WEB_LOCKS_OS'].filter((k) => env[k])
  if (env.npm_config_build_from_source === 'true') asked.push('npm_config_build_from_source')
  return asked
}

// Why the install cannot do what `env` asks for on a platform, or null: on
// Windows, anything but the prebuilt binary would start MSVC on sources it
// cannot compile.
function unbuildable (platform, env) {
  const asked = buildAskedBy(env)
  if (platform !== 'win32' || asked.length === 0) return null
  return `web-locks cannot be compiled on Windows (its C sources need GCC or Clang, not the MSVC that node-gyp uses there), ` +
    `so it installs only its prebuilt binary, which has every lock manager; ${asked.join(' and ')} asked for a build from source: ` +
    'unset it and install again.'
}

module.exports = { unsupported, unbuildable, buildAskedBy }
