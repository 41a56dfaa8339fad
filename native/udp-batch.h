// The batched socket of native/udp-batch.c: its constants, its state and the helpers it shares
// between its receiving and sending halves.
#ifndef REEF_UDP_BATCH_H
#define REEF_UDP_BATCH_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define SLOTS 64
// Datagrams handed to JavaScript in one call at most (a message received with GRO holds many; the
// rest of the messages then go in further calls), and taken per sendmmsg(2) call at most. Kept
// small: every socket holds a meta array of BATCH * META words (a fleet of 1,000 kits in one
// process holds 1,000, docs/device.md).
#define BATCH 128
#define SEND_DGRAMS 256
// GSO runs: at most this many datagrams (the kernel's UDP_MAX_SEGMENTS is 64 or more), this many
// bytes in all (under IPv4's 65,507), and datagrams of at most GSO_SEG bytes (a CoAP datagram, RFC
// 7252 §4.6, fits the IPv6 minimum MTU of 1,280 with its headers, so no route refuses the size).
#define GSO_MAX_SEGS 64
#define GSO_MAX_BYTES 60000
#define GSO_SEG 1200
// The receive buffer of one message when GRO is on: the largest run the kernel may deliver.
#define GRO_SLOT 65536
// int32 words per received datagram in the shared meta array: offset, length, port, family,
// then the address (IPv4: one word, the address as a number; IPv6: its 16 bytes).
#define META 8
// status[0] after send() besides 0 and an errno: the address is a name to resolve, or the socket
// buffer is full (the rest waits for the writable callback).
#define NOT_LITERAL (-1)
#define BLOCKED (-2)

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

/** A received datagram on its way to JavaScript: where it is in the arena, and whose it is. */
typedef struct {
  const char *data;
  uint32_t len;
  uint32_t peer;
} Dgram;

/** One datagram for send_items(): its bytes and its peer. */
typedef struct {
  const void *data;
  size_t len;
  const struct sockaddr_in6 *to;
  socklen_t tolen;
} SendItem;

typedef struct Sock {
  napi_env env;
  int fd;
  int v6;
  // The longest datagram JavaScript sees (longer ones are cut to it); the receive buffer of one
  // message (slot, or GRO_SLOT with GRO).
  size_t slot;
  size_t rslot;
  // UDP_GRO was accepted on this socket; runs are still sent with UDP_SEGMENT.
  int gro;
  int gso;
  char *arena;
  struct mmsghdr msgs[SLOTS];
  struct iovec iov[SLOTS];
  struct sockaddr_in6 peers[SLOTS];
  char ctrl[SLOTS][CMSG_SPACE(sizeof(int))];
  Dgram ready[BATCH];
  uv_poll_t poll;
  int events;
  int closed;
  napi_ref self;
  napi_ref on_batch;
  napi_ref on_writable;
  napi_ref meta_ref;
  int32_t *meta;
  napi_ref status_ref;
  int32_t *status;
  napi_async_context actx;
  // The async context's resource: a plain object, as async hooks may add properties to it (an
  // AsyncLocalStorage's store does); the external above is not extensible.
  napi_ref resource;
  napi_ref on_closed;
} Sock;

#define CHECK(call)                                                   \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, "udp-batch: N-API call failed");    \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

int to_sockaddr(Sock *s, const char *address, int port, struct sockaddr_in6 *to, socklen_t *len);
void call_js(Sock *s, napi_ref fn_ref, size_t argc, napi_value *argv);
void call_js_scoped(Sock *s, napi_ref fn_ref);
void export_int(napi_env env, napi_value exports, const char *name, int32_t v);
napi_value throw_errno(napi_env env, const char *syscall, int err, const char *host, int port);
Sock *unwrap(napi_env env, napi_value v);
int send_items(Sock *s, const SendItem *items, uint32_t n, uint32_t *sent);
void on_poll(uv_poll_t *h, int status, int events);

#endif


