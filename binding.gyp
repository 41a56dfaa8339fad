{
  "targets": [
    {
      "target_name": "udp_batch",
      "sources": ["native/udp-batch.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
