{
  "targets": [
    {
      "target_name": "web_locks",
      "variables": {
        "wl_shared%": "<!(node -p \"process.platform === 'linux' && !process.env.WEB_LOCKS_NO_SHARED ? 1 : 0\")"
      },
      "sources": [
        "src/wl-api.c", "src/wl-local.c", "src/wl-region.c", "src/wl-table.c",
        "src/binding.c", "src/binding-query.c"
      ],
      "defines": ["NAPI_VERSION=8", "WL_SHARED_MANAGER=<(wl_shared)"],
      "conditions": [
        ["OS == 'win'", {
          "sources": ["src/wl-os-win.c"]
        }, {
          "sources": ["src/wl-os-unix.c"]
        }],
        ["wl_shared == 1", {
          "sources": [
            "src/wl-shared.c", "src/wl-recover.c", "src/wl-segment-linux.c",
            "src/wl-live-linux.c", "src/wl-wake-linux.c", "src/wl-watch-linux.c",
            "src/binding-scope-linux.c"
          ]
        }, {
          "sources": ["src/binding-scope-none.c"]
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
