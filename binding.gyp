{
  "targets": [
    {
      "target_name": "udp_batch",
      "sources": ["native/udp-batch.c", "native/coap-forward.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
