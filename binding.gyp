{
  "targets": [
    {
      "target_name": "web_locks",
      "variables": {
        "wl_machine%": "<!(node -p \"process.platform === 'linux' && !process.env.WEB_LOCKS_NO_MACHINE ? 1 : 0\")"
      },
      "sources": [
        "src/core/api.c", "src/core/process.c", "src/core/region.c", "src/core/table.c",
        "src/binding/module.c", "src/binding/napi.c", "src/binding/query.c",
        "src/binding/thread.c"
      ],
      "defines": ["NAPI_VERSION=8", "WL_MACHINE_MANAGER=<(wl_machine)"],
      "conditions": [
        ["OS == 'win'", {
          "sources": ["src/os/win/os.c"]
        }, {
          "sources": ["src/os/unix/os.c"]
        }],
        ["wl_machine == 1", {
          "sources": [
            "src/core/machine.c", "src/core/recover.c", "src/core/scope.c", "src/core/owners.c",
            "src/os/linux/file.c",
            "src/os/linux/life.c", "src/os/linux/wake.c", "src/os/linux/watch.c",
            "src/binding/machine-linux.c", "src/binding/waker.c"
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
