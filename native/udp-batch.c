// Batched UDP datagram I/O for the CoAP gateway and the kit's network module (src/coap/datagrams.ts
// is its only user, behind the same interface as node:dgram).
//
// Why it exists: node:dgram makes one system call and one JavaScript callback per datagram, and
// allocates a receive buffer and an address object for each. The gateway receives and sends two
// datagrams per proxied request, so that per-datagram cost is most of what it spends
// (docs/performance.md). Here one readiness callback drains the socket with
// recvmmsg(2) (up to SLOTS messages per call), copies the datagrams into one Buffer and hands them
// to JavaScript in one call; datagrams queued during that call go out with sendmmsg(2) in one
// system call. Elsewhere than Linux the same interface loops over recvmsg(2)/sendmsg(2).
//
// On Linux the kernel is also asked to carry a run of datagrams as one packet through its stack
// (UDP segmentation offload, "GSO", and its receiving twin "GRO"; udp(7) UDP_SEGMENT, UDP_GRO):
// consecutive datagrams to the same peer, of one size (the last may be shorter), leave in one
// message with a UDP_SEGMENT control message, and a socket that set UDP_GRO takes such a run as one
// message with its segment size, split here into its datagrams. On loopback a datagram's walk
// through the sending and receiving stack, paid by the sender, was most of the gateway's CPU per
// request; as one run it is paid once (docs/performance.md). What the peer
// receives is the same datagrams: the kernel segments the run for a socket that did not ask for
// GRO, and a network card or the kernel does for the wire. A kernel or route that refuses GSO gets
// one datagram per message from then on.
//
// Rules kept from node:dgram: a datagram larger than the receive slot is cut to the slot (the
// caller sizes the slot one byte over its largest message, so a cut one is seen as too big);
// sends that meet a full socket buffer (EAGAIN) are not lost but wait for the socket to become
// writable; an IPv6 socket reaches IPv4 peers through v4-mapped addresses.
#include "udp-batch.h"


napi_value throw_errno(napi_env env, const char *syscall, int err, const char *host, int port) {
  const char *name = uv_err_name(uv_translate_sys_error(err));
  char msg[256];
  if (host)
    snprintf(msg, sizeof msg, "%s %s %s:%d", syscall, name, host, port);
  else
    snprintf(msg, sizeof msg, "%s %s", syscall, name);
  napi_value code, message, error, v;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "syscall", v);
  napi_create_int32(env, -err, &v);
  napi_set_named_property(env, error, "errno", v);
  if (host) {
    napi_create_string_utf8(env, host, NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, error, "address", v);
    napi_create_int32(env, port, &v);
    napi_set_named_property(env, error, "port", v);
  }
  napi_throw(env, error);
  return NULL;
}

/** Parses an IP literal into `to` for this socket's family; 0 when it is not one. */
int to_sockaddr(Sock *s, const char *address, int port, struct sockaddr_in6 *to, socklen_t *len) {
  memset(to, 0, sizeof *to);
  if (s->v6) {
    to->sin6_family = AF_INET6;
    to->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, address, &to->sin6_addr) != 1) {
      struct in_addr a4;
      if (inet_pton(AF_INET, address, &a4) != 1) return 0;
      // ::ffff:a.b.c.d reaches an IPv4 peer from a dual-stack socket.
      to->sin6_addr.s6_addr[10] = 0xff;
      to->sin6_addr.s6_addr[11] = 0xff;
      memcpy(&to->sin6_addr.s6_addr[12], &a4, 4);
    }
    *len = sizeof(struct sockaddr_in6);
  } else {
    struct sockaddr_in *t4 = (struct sockaddr_in *)to;
    t4->sin_family = AF_INET;
    t4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, address, &t4->sin_addr) != 1) return 0;
    *len = sizeof(struct sockaddr_in);
  }
  return 1;
}

/** call_js() with no arguments, in a handle scope of its own (from a libuv callback). */
void call_js_scoped(Sock *s, napi_ref fn_ref) {
  napi_env env = s->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  call_js(s, fn_ref, 0, NULL);
  napi_close_handle_scope(env, scope);
}

void call_js(Sock *s, napi_ref fn_ref, size_t argc, napi_value *argv) {
  napi_env env = s->env;
  napi_value fn, recv, result;
  napi_get_reference_value(env, fn_ref, &fn);
  napi_get_global(env, &recv);  // napi_make_callback needs an object as `this`
  // napi_make_callback, like node's own I/O callbacks, runs process.nextTick callbacks and
  // promise reactions when the call returns, so the sends they queue leave in the same flush.
  if (napi_make_callback(env, s->actx, recv, fn, argc, argv, &result) == napi_pending_exception) {
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
}

/** Hands the first `k` ready datagrams (`total` bytes) to JavaScript in one Buffer and one call. */
static void deliver(Sock *s, int k, size_t total) {
  napi_env env = s->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value buf, count;
  void *data;
  napi_create_buffer(env, total > 0 ? total : 1, &data, &buf);
  size_t off = 0;
  for (int i = 0; i < k; i++) {
    Dgram *d = &s->ready[i];
    memcpy((char *)data + off, d->data, d->len);
    int32_t *m = s->meta + i * META;
    m[0] = (int32_t)off;
    m[1] = (int32_t)d->len;
    struct sockaddr_in6 *p = &s->peers[d->peer];
    if (p->sin6_family == AF_INET6) {
      m[2] = ntohs(p->sin6_port);
      m[3] = 6;
      memcpy(&m[4], &p->sin6_addr, 16);
    } else {
      struct sockaddr_in *p4 = (struct sockaddr_in *)p;
      m[2] = ntohs(p4->sin_port);
      m[3] = 4;
      m[4] = (int32_t)ntohl(p4->sin_addr.s_addr);  // a.b.c.d as the number (a << 24) | … | d
    }
    off += d->len;
  }
  napi_create_int32(env, k, &count);
  napi_value argv[2] = {buf, count};
  call_js(s, s->on_batch, 2, argv);
  napi_close_handle_scope(env, scope);
}

/** The segment size of a message received with GRO (its UDP_GRO control message), or 0. */
static int gro_size(struct msghdr *h) {
#ifdef __linux__
  for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int size;
      memcpy(&size, CMSG_DATA(c), sizeof size);
      return size;
    }
  }
#else
  (void)h;
#endif
  return 0;
}

static void read_batches(Sock *s) {
  // A bounded number of rounds per readiness event, so one busy socket cannot starve the loop.
  for (int round = 0; round < 8 && !s->closed; round++) {
    for (int i = 0; i < SLOTS; i++) {
      s->iov[i].iov_base = s->arena + (size_t)i * s->rslot;
      s->iov[i].iov_len = s->rslot;
      struct msghdr *h = &s->msgs[i].msg_hdr;
      h->msg_name = &s->peers[i];
      h->msg_namelen = sizeof s->peers[i];
      h->msg_iov = &s->iov[i];
      h->msg_iovlen = 1;
      h->msg_control = s->gro ? s->ctrl[i] : NULL;
      h->msg_controllen = s->gro ? sizeof s->ctrl[i] : 0;
      h->msg_flags = 0;
      s->msgs[i].msg_len = 0;
    }
#ifdef __linux__
    int n = recvmmsg(s->fd, s->msgs, SLOTS, MSG_DONTWAIT, NULL);
#else
    int n = 0;
    while (n < SLOTS) {
      ssize_t r = recvmsg(s->fd, &s->msgs[n].msg_hdr, MSG_DONTWAIT);
      if (r < 0) break;
      s->msgs[n++].msg_len = (unsigned int)r;
    }
    if (n == 0) n = -1;
#endif
    if (n <= 0) return;  // EAGAIN: drained. Other errors on an unconnected socket carry no datagram.
    int k = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
      size_t len = s->msgs[i].msg_len;
      const char *base = s->iov[i].iov_base;
      // A run received with GRO is its datagrams one after another, each `seg` bytes but the last.
      size_t seg = s->gro ? (size_t)gro_size(&s->msgs[i].msg_hdr) : 0;
      if (seg == 0 || seg > len) seg = len;
      size_t off = 0;
      do {
        if (k == BATCH) {
          deliver(s, k, total);
          if (s->closed) return;
          k = 0;
          total = 0;
        }
        size_t dl = len - off < seg ? len - off : seg;
        // Cut to the slot, as a shorter receive buffer would (the caller sees it as too big).
        s->ready[k].data = base + off;
        s->ready[k].len = (uint32_t)(dl > s->slot ? s->slot : dl);
        s->ready[k].peer = (uint32_t)i;
        total += s->ready[k].len;
        k++;
        off += dl;
      } while (off < len);
    }
    if (k > 0) deliver(s, k, total);
    if (n < SLOTS) return;
  }
}

void on_poll(uv_poll_t *h, int status, int events) {
  Sock *s = h->data;
  if (s->closed || status < 0) return;
  if (events & UV_WRITABLE) {
    s->events &= ~UV_WRITABLE;
    uv_poll_start(&s->poll, s->events, on_poll);
    call_js_scoped(s, s->on_writable);
  }
  if (!s->closed && (events & UV_READABLE)) read_batches(s);
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  Sock *s = data;
  free(s->arena);
  free(s);
}

Sock *unwrap(napi_env env, napi_value v) {
  Sock *s = NULL;
  if (napi_get_value_external(env, v, (void **)&s) != napi_ok || s == NULL) {
    napi_throw_type_error(env, NULL, "udp-batch: not a socket");
    return NULL;
  }
  return s;
}

/** An Int32Array argument of at least `min` elements: its data, or NULL with an exception thrown. */
static int32_t *int32_array(napi_env env, napi_value v, size_t min, const char *what) {
  napi_typedarray_type tt;
  size_t len, off;
  void *data;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &tt, &len, &data, &ab, &off) != napi_ok) {
    napi_throw_error(env, NULL, "udp-batch: N-API call failed");
    return NULL;
  }
  if (tt != napi_int32_array || len < min) {
    napi_throw_range_error(env, NULL, what);
    return NULL;
  }
  return data;
}

/** The arguments of a call whose first one is a socket: the socket, or NULL with a JS exception. */
static Sock *socket_args(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv) {
  if (napi_get_cb_info(env, info, argc, argv, NULL, NULL) != napi_ok || *argc < 1) {
    napi_throw_type_error(env, NULL, "udp-batch: a socket is the first argument");
    return NULL;
  }
  return unwrap(env, argv[0]);
}

// open(v6, host, port, slot, meta: Int32Array, status: Int32Array, onBatch, onWritable) → external
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  bool v6;
  char host[64];
  size_t hostLen;
  uint32_t port, slot;
  CHECK(napi_get_value_bool(env, argv[0], &v6));
  CHECK(napi_get_value_string_latin1(env, argv[1], host, sizeof host, &hostLen));
  CHECK(napi_get_value_uint32(env, argv[2], &port));
  CHECK(napi_get_value_uint32(env, argv[3], &slot));
  int32_t *metaData = int32_array(env, argv[4], BATCH * META, "udp-batch: meta must be an Int32Array of BATCH * META");
  if (!metaData) return NULL;
  int32_t *statusData = int32_array(env, argv[5], 1, "udp-batch: status must be an Int32Array of 1");
  if (!statusData) return NULL;
  Sock *s = calloc(1, sizeof *s);
  if (!s) return throw_errno(env, "malloc", ENOMEM, NULL, 0);
  s->env = env;
  s->v6 = v6;
  s->slot = slot < 64 ? 64 : slot;
  s->fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->fd < 0) {
    int e = errno;
    free(s);
    return throw_errno(env, "socket", e, NULL, 0);
  }
#ifdef __linux__
  int on = 1;
  s->gro = setsockopt(s->fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
  s->gso = 1;
#endif
  s->rslot = s->gro && s->slot < GRO_SLOT ? GRO_SLOT : s->slot;
  // Address space only: the kernel writes a page of a message's buffer only as far as its data goes.
  s->arena = malloc(s->rslot * SLOTS);
  if (!s->arena) {
    close(s->fd);
    free(s);
    return throw_errno(env, "malloc", ENOMEM, NULL, 0);
  }
  struct sockaddr_in6 addr;
  socklen_t addrLen;
  if (v6) {
    int off = 0;  // dual-stack, as node:dgram's udp6 sockets are unless ipv6Only
    setsockopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  if (!to_sockaddr(s, host, (int)port, &addr, &addrLen)) {
    close(s->fd);
    finalize(env, s, NULL);
    return throw_errno(env, "bind", EINVAL, host, (int)port);
  }
  if (bind(s->fd, (struct sockaddr *)&addr, addrLen) < 0) {
    int e = errno;
    close(s->fd);
    finalize(env, s, NULL);
    return throw_errno(env, "bind", e, host, (int)port);
  }
  uv_loop_t *loop;
  CHECK(napi_get_uv_event_loop(env, &loop));
  napi_value ext, name;
  CHECK(napi_create_external(env, s, finalize, NULL, &ext));
  CHECK(napi_create_reference(env, ext, 1, &s->self));
  CHECK(napi_create_reference(env, argv[4], 1, &s->meta_ref));
  s->meta = metaData;
  CHECK(napi_create_reference(env, argv[5], 1, &s->status_ref));
  s->status = statusData;
  CHECK(napi_create_reference(env, argv[6], 1, &s->on_batch));
  CHECK(napi_create_reference(env, argv[7], 1, &s->on_writable));
  CHECK(napi_create_string_utf8(env, "UDPBATCH", NAPI_AUTO_LENGTH, &name));
  napi_value resource;
  CHECK(napi_create_object(env, &resource));
  CHECK(napi_create_reference(env, resource, 1, &s->resource));
  CHECK(napi_async_init(env, resource, name, &s->actx));
  uv_poll_init(loop, &s->poll, s->fd);
  s->poll.data = s;
  s->events = UV_READABLE;
  uv_poll_start(&s->poll, s->events, on_poll);
  return ext;
}

/** A message being built by js_send: a run of datagrams to one peer (one datagram without GSO). */
typedef struct {
  uint32_t dgrams;
  uint32_t bytes;
  uint32_t seg;
  // A datagram shorter than `seg` ends a run (only the last segment may be short).
  int full;
} Run;

// Sends `n` datagrams, runs of them to one peer as one message where the kernel takes them (GSO,
// see the top). Returns 0 with *sent = n; BLOCKED when the socket buffer is full (the writable
// callback is then armed; *sent datagrams went); or the errno that refused datagram *sent.
int send_items(Sock *s, const SendItem *items, uint32_t n, uint32_t *sent_out) {
  struct mmsghdr msgs[SLOTS];
  struct iovec iov[SEND_DGRAMS];
  Run runs[SLOTS];
  char ctrl[SLOTS][CMSG_SPACE(sizeof(uint16_t))];
  uint32_t i = 0;
  // After a run the kernel refused: its first datagram alone, which tells whether the run or the
  // datagram was refused.
  int probe = 0;
  while (i < n && !s->closed) {
    int m = 0;  // messages
    uint32_t d = 0;  // datagrams in them
    while (i + d < n && d < (probe ? 1u : SEND_DGRAMS)) {
      const SendItem *it = &items[i + d];
      iov[d].iov_base = (void *)it->data;
      iov[d].iov_len = it->len;
      // Joins the run before it when it goes to the same peer and fits (GSO, see the top).
      if (m > 0 && s->gso) {
        Run *r = &runs[m - 1];
        struct msghdr *h = &msgs[m - 1].msg_hdr;
        if (!r->full && it->len > 0 && it->len <= r->seg && r->dgrams < GSO_MAX_SEGS && r->bytes + it->len <= GSO_MAX_BYTES && h->msg_namelen == it->tolen &&
            memcmp(h->msg_name, it->to, it->tolen) == 0) {
          h->msg_iovlen++;
          r->dgrams++;
          r->bytes += (uint32_t)it->len;
          if (it->len < r->seg) r->full = 1;
          d++;
          continue;
        }
      }
      if (m == SLOTS) break;
      memset(&msgs[m], 0, sizeof msgs[m]);
      msgs[m].msg_hdr.msg_name = (void *)it->to;
      msgs[m].msg_hdr.msg_namelen = it->tolen;
      msgs[m].msg_hdr.msg_iov = &iov[d];
      msgs[m].msg_hdr.msg_iovlen = 1;
      runs[m].dgrams = 1;
      runs[m].bytes = (uint32_t)it->len;
      runs[m].seg = (uint32_t)it->len;
      runs[m].full = it->len == 0 || it->len > GSO_SEG;
      m++;
      d++;
    }
    for (int k = 0; k < m; k++) {
      if (runs[k].dgrams < 2) continue;
      struct msghdr *h = &msgs[k].msg_hdr;
      memset(ctrl[k], 0, sizeof ctrl[k]);
      h->msg_control = ctrl[k];
      h->msg_controllen = sizeof ctrl[k];
      struct cmsghdr *c = CMSG_FIRSTHDR(h);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t seg = (uint16_t)runs[k].seg;
      memcpy(CMSG_DATA(c), &seg, sizeof seg);
    }
    int sent = 0;  // messages
    uint32_t done = 0;  // their datagrams
    int retry = 0;
    while (sent < m) {
#ifdef __linux__
      int r = sendmmsg(s->fd, msgs + sent, (unsigned int)(m - sent), MSG_DONTWAIT);
#else
      int r = sendmsg(s->fd, &msgs[sent].msg_hdr, MSG_DONTWAIT) < 0 ? -1 : 1;
#endif
      if (r < 0) {
        int e = errno;
        if (e == EINTR) continue;
        if (e != EAGAIN && e != EWOULDBLOCK && e != ENOBUFS && runs[sent].dgrams > 1) {
          // A run refused: its first datagram goes again alone (the probe), and the rest after it.
          probe = 1;
          retry = 1;
          break;
        }
        *sent_out = i + done;
        if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) {
          if (!(s->events & UV_WRITABLE)) {
            s->events |= UV_WRITABLE;
            uv_poll_start(&s->poll, s->events, on_poll);
          }
          return BLOCKED;
        }
        return e;
      }
      for (int k = sent; k < sent + r; k++) done += runs[k].dgrams;
      sent += r;
    }
    if (retry) {
      i += done;
      continue;
    }
    if (probe && m > 0) {
      // The datagram went out alone where its run did not: this kernel or route takes no runs (no
      // UDP GSO there), so this socket sends one datagram per message from now on. (Had it been
      // refused too, the error above would have been the datagram's, reported as such.)
      s->gso = 0;
      probe = 0;
    }
    i += d;
  }
  *sent_out = i;
  return 0;
}

// send(sock, queue: [buf, port, address, ...], from, to) → index of the first datagram not sent.
// status[0] is then 0 (all sent), BLOCKED (the socket buffer is full: the rest waits for the
// writable callback), NOT_LITERAL (that datagram's address is a name to resolve) or the errno
// that refused that datagram.
static napi_value js_send(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  Sock *s = socket_args(env, info, &argc, argv);
  if (!s) return NULL;
  uint32_t from, to;
  CHECK(napi_get_value_uint32(env, argv[2], &from));
  CHECK(napi_get_value_uint32(env, argv[3], &to));
  SendItem items[SEND_DGRAMS];
  struct sockaddr_in6 addrs[SEND_DGRAMS];
  uint32_t i = from;
  s->status[0] = 0;
  while (i < to && !s->closed) {
    uint32_t d = 0;
    int stop = 0;
    while (i + d < to && d < SEND_DGRAMS) {
      napi_value v;
      uint32_t k = (i + d) * 3;
      void *data;
      size_t len;
      uint32_t port;
      char address[64];
      size_t alen;
      CHECK(napi_get_element(env, argv[1], k, &v));
      CHECK(napi_get_buffer_info(env, v, &data, &len));
      CHECK(napi_get_element(env, argv[1], k + 1, &v));
      CHECK(napi_get_value_uint32(env, v, &port));
      CHECK(napi_get_element(env, argv[1], k + 2, &v));
      CHECK(napi_get_value_string_latin1(env, v, address, sizeof address, &alen));
      socklen_t slen;
      if (!to_sockaddr(s, address, (int)port, &addrs[d], &slen)) {
        stop = NOT_LITERAL;
        break;
      }
      items[d].data = data;
      items[d].len = len;
      items[d].to = &addrs[d];
      items[d].tolen = slen;
      d++;
    }
    uint32_t sent = 0;
    int st = d > 0 ? send_items(s, items, d, &sent) : 0;
    i += sent;
    if (st != 0) {
      s->status[0] = st;
      break;
    }
    if (stop) {
      s->status[0] = stop;
      break;
    }
  }
  napi_value out;
  napi_create_uint32(env, i, &out);
  return out;
}

// offload(sock) → [segmentation, coalescing]: whether runs still leave as one message (UDP GSO)
// and whether the socket takes them as one (UDP GRO).
static napi_value js_offload(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Sock *s = socket_args(env, info, &argc, argv);
  if (!s) return NULL;
  napi_value out, v;
  CHECK(napi_create_array_with_length(env, 2, &out));
  CHECK(napi_get_boolean(env, s->gso != 0, &v));
  CHECK(napi_set_element(env, out, 0, v));
  CHECK(napi_get_boolean(env, s->gro != 0, &v));
  CHECK(napi_set_element(env, out, 1, v));
  return out;
}

// address(sock) → [address, port]
static napi_value js_address(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Sock *s = socket_args(env, info, &argc, argv);
  if (!s) return NULL;
  struct sockaddr_in6 a;
  socklen_t len = sizeof a;
  if (getsockname(s->fd, (struct sockaddr *)&a, &len) < 0) return throw_errno(env, "getsockname", errno, NULL, 0);
  char text[INET6_ADDRSTRLEN];
  int port;
  if (a.sin6_family == AF_INET6) {
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
    inet_ntop(AF_INET, &a4->sin_addr, text, sizeof text);
    port = ntohs(a4->sin_port);
  }
  napi_value out, v;
  CHECK(napi_create_array_with_length(env, 2, &out));
  CHECK(napi_create_string_latin1(env, text, NAPI_AUTO_LENGTH, &v));
  CHECK(napi_set_element(env, out, 0, v));
  CHECK(napi_create_int32(env, port, &v));
  CHECK(napi_set_element(env, out, 1, v));
  return out;
}

// setRecvBufferSize(sock, bytes)
static napi_value js_set_rcvbuf(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  Sock *s = socket_args(env, info, &argc, argv);
  if (!s) return NULL;
  int32_t bytes;
  CHECK(napi_get_value_int32(env, argv[1], &bytes));
  if (setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) < 0) return throw_errno(env, "setsockopt", errno, NULL, 0);
  return NULL;
}

// ntop6(meta: Int32Array, k) → the IPv6 address in meta[k..k+4) as text (inet_ntop's form, as
// node:dgram reports addresses). IPv4 addresses are formatted, and cached, in JavaScript.
static napi_value js_ntop6(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint32_t k;
  CHECK(napi_get_value_uint32(env, argv[1], &k));
  int32_t *data = int32_array(env, argv[0], (size_t)k + 4, "udp-batch: ntop6 outside meta");
  if (!data) return NULL;
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, data + k, text, sizeof text);
  napi_value out;
  CHECK(napi_create_string_latin1(env, text, NAPI_AUTO_LENGTH, &out));
  return out;
}

// errname(errno) → its name ('EINVAL', …), for errors reported from JavaScript.
static napi_value js_errname(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  int32_t e;
  CHECK(napi_get_value_int32(env, argv[0], &e));
  napi_value out;
  CHECK(napi_create_string_utf8(env, uv_err_name(uv_translate_sys_error(e)), NAPI_AUTO_LENGTH, &out));
  return out;
}

static void on_closed(uv_handle_t *h) {
  Sock *s = h->data;
  napi_env env = s->env;
  close(s->fd);
  s->fd = -1;
  if (s->on_closed) {
    // The port is free now: a caller that awaits close() may bind it again at once.
    call_js_scoped(s, s->on_closed);
    napi_delete_reference(env, s->on_closed);
  }
  napi_delete_reference(env, s->on_batch);
  napi_delete_reference(env, s->on_writable);
  napi_delete_reference(env, s->meta_ref);
  napi_delete_reference(env, s->status_ref);
  napi_async_destroy(env, s->actx);
  napi_delete_reference(env, s->resource);
  // Last: the external may now be collected, and its finalizer frees s.
  napi_delete_reference(env, s->self);
}

// close(sock, done): stops reading at once; the descriptor is closed when libuv has let go of
// it, and then done() is called.
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  Sock *s = socket_args(env, info, &argc, argv);
  if (!s) return NULL;
  if (s->closed) return NULL;
  s->closed = 1;
  if (argc >= 2) CHECK(napi_create_reference(env, argv[1], 1, &s->on_closed));
  uv_poll_stop(&s->poll);
  uv_close((uv_handle_t *)&s->poll, on_closed);
  return NULL;
}

void export_int(napi_env env, napi_value exports, const char *name, int32_t v) {
  napi_value x;
  napi_create_int32(env, v, &x);
  napi_set_named_property(env, exports, name, x);
}

NAPI_MODULE_INIT() {
  napi_property_descriptor props[] = {
      {"open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL},
      {"send", NULL, js_send, NULL, NULL, NULL, napi_default, NULL},
      {"address", NULL, js_address, NULL, NULL, NULL, napi_default, NULL},
      {"offload", NULL, js_offload, NULL, NULL, NULL, napi_default, NULL},
      {"setRecvBufferSize", NULL, js_set_rcvbuf, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"ntop6", NULL, js_ntop6, NULL, NULL, NULL, napi_default, NULL},
      {"errname", NULL, js_errname, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  // The constants the JavaScript side reads (src/coap/datagrams.ts), defined here only.
  export_int(env, exports, "META", META);
  export_int(env, exports, "BATCH", BATCH);
  export_int(env, exports, "NOT_LITERAL", NOT_LITERAL);
  export_int(env, exports, "BLOCKED", BLOCKED);
  export_int(env, exports, "EINVAL", EINVAL);
  return exports;
}
