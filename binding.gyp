{
  "targets": [
    {
      "target_name": "web_locks",
      "variables": {
        "wl_machine%": "<!(node -p \"['linux', 'darwin', 'win32'].includes(process.platform) && !process.env.WEB_LOCKS_NO_MACHINE ? 1 : 0\")",
        "wl_posix%": "<!(node -p \"process.platform === 'darwin' || process.env.WEB_LOCKS_OS === 'posix' ? 1 : 0\")"
      },
      "sources": [
        "src/core/api.c", "src/core/process.c", "src/core/region.c", "src/core/table.c",
        "src/binding/module.c", "src/binding/napi.c", "src/binding/query.c",
        "src/binding/thread.c"
      ],
      "defines": ["NAPI_VERSION=8", "WL_MACHINE_MANAGER=<(wl_machine)", "WL_OS_POSIX=<(wl_posix)"],
      "conditions": [
        ["OS == 'win'", {
          "sources": ["src/os/win/os.c"]
        }, {
          "sources": ["src/os/unix/os.c"]
        }],
        ["wl_machine == 1", {
          "sources": [
            "src/core/machine.c", "src/core/recover.c", "src/core/scope.c", "src/core/owners.c",
            "src/binding/machine.c"
          ],
          "conditions": [
            ["OS == 'win'", {
              "sources": [
                "src/os/win/file.c", "src/os/win/kernel.c", "src/os/win/life.c", "src/os/win/mutex.c",
                "src/os/win/wake.c", "src/os/win/watch.c", "src/binding/machine-win.c"
              ]
            }, {
              "sources": [
                "src/os/unix/file.c", "src/os/unix/sweep.c", "src/os/unix/wake.c",
                "src/binding/machine-unix.c"
              ],
              "conditions": [
                ["OS == 'linux'", {
                  "sources": ["src/binding/waker-linux.c"]
                }, {
                  "sources": ["src/binding/waker-none.c"]
                }],
                ["wl_posix == 1", {
                  "sources": [
                    "src/os/posix/local.c", "src/os/posix/life.c", "src/os/posix/mutex.c",
                    "src/os/posix/watch.c"
                  ]
                }, {
                  "sources": [
                    "src/os/linux/life.c", "src/os/linux/mutex.c", "src/os/linux/watch.c"
                  ]
                }]
              ]
            }]
          ]
        }, {
          "sources": ["src/binding/machine-none.c"]
        }]
      ],
      "cflags_c": ["-std=c11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "xcode_settings": {
        "GCC_C_LANGUAGE_STANDARD": "c11",
        "GCC_SYMBOLS_PRIVATE_EXTERN": "YES",
        "OTHER_CFLAGS": ["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"]
      }
    }
  ]
}
