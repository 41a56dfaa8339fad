// The gateway's forwarding fast path: the usual proxied request, relayed without JavaScript.
//
// Why it exists: with the generator, the gateway and the kit on the same two cores, every CPU cycle
// the gateway spends per proxied request is taken from the other two (docs/benchmarks.md, target 4).
// Its JavaScript path cost 51,596 user-space instructions per proxied request, this one 3,350 (the
// whole gateway process, callgrind; docs/benchmarks.md "Nineteenth session").
//
// What it takes, and nothing else: a NON GET from a client whose only option is Proxy-Uri and that
// carries no payload, when JavaScript has installed a *route* for exactly that client address and
// port and those Proxy-Uri bytes (src/gateway/fast-path.ts installs one after its own full path
// has checked the session, the account, the target and the tenant's kit, for at most as long as
// what it checked stays cached: about a second). Everything else (another method or option, a CON,
// a client with no route, an expired route, a full table or queue) goes to JavaScript as before.
//
// A taken request is sent to the kit as JavaScript's would be (RFC 7252 §5.7.2: NON, the Uri-Path
// and Uri-Query of the target, the route's encoded options), under a token of the gateway's own
// (8 bytes, its table index and random bits: §5.3.1), and the kit's answer, matched by that token
// and by the kit's address and port (§5.3.2), goes back to the client as a NON with the client's
// token and the kit's code, options and payload. An answer with an option this file does not
// relay as it is (anything but ETag, Location-*, Content-Format, Max-Age, Block2, Size1/2; an
// Observe) is handed to JavaScript to relay; a malformed one is ignored, as the endpoint would.
// No answer by the deadline: JavaScript answers 5.04 (fastTake()). A NON the client sent twice
// (same address, port, Message ID and token, RFC 7252 §4.5) is forwarded once, and so is the same
// request re-sent with a new Message ID while the first is on its way.
#include "udp-batch.h"
#include <sys/random.h>
#include <time.h>

#define ROUTES 4096
#define ROUTE_PROBES 8
#define URI_MAX 255
#define KOPTS_MAX 255
// In-flight forwards; the token's first two bytes are the index. The fast path declines when it
// is three quarters full (so a dead kit's requests cannot crowd out the rest for long).
#define PENDS 16384
#define SEEN 8192
// In-flight forwards by client and token (lossy: a newer one may take an older one's slot).
#define PIDX 16384
#define EVENTS_MAX 4096

#define NON 1
#define CON 0
#define ACK 2

// EV_TAP: a copy of an answer relayed here, for JavaScript to see too (its route's tap).
enum { EV_TIMEOUT = 1, EV_ANSWER = 2, EV_TAP = 3 };

// Indexes of Fwd.counters, the order of FORWARD_COUNTERS in src/coap/datagrams.ts.
enum { C_FORWARDED, C_RELAYED, C_KIT_ERRORS, C_TIMEOUTS, C_DUPLICATES, C_HANDED_OVER, C_IN_FLIGHT };

/** A peer as compared here: family (4 or 6), port, address (IPv4 in the first 4 bytes). */
typedef struct {
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
} Addr;

typedef struct {
  int used;
  double expires;
  Addr client;
  Addr kit;
  uint32_t hash;
  uint16_t urilen;
  uint16_t optlen;
  uint8_t uri[URI_MAX];
  uint8_t opts[KOPTS_MAX];
  // JavaScript's tap: its successful answers are handed over as EV_TAP as well (0: none).
  int32_t tap;
} Route;

typedef struct {
  int used;
  double due;
  uint8_t token[8];
  Addr kit;
  Addr client;
  uint8_t ctkl;
  uint8_t ctok[8];
  int32_t tap;
  // The route's hash (client and Proxy-Uri) and this entry's slot in Fwd.pidx.
  uint32_t rhash;
  uint32_t slot;
} Pend;

typedef struct {
  double until;
  Addr peer;
  uint16_t mid;
  uint8_t tkl;
  uint8_t tok[8];
} Seen;

typedef struct {
  int kind;
  Addr client;
  uint8_t ctkl;
  uint8_t ctok[8];
  int32_t tap;
  uint32_t len;
  uint8_t *data;
} Event;

typedef struct Fwd {
  Sock *front;
  Sock *back;
  Route *routes;
  Pend *pends;
  uint32_t *pidx;
  Seen *seen;
  Event *events;
  uint32_t nevents;
  uint32_t notified;
  uint32_t npend;
  uint32_t hint;
  uint64_t rng[2];
  size_t max_request;
  double deadline_ms;
  double non_lifetime_ms;
  double now;
  napi_ref on_events;
  // JavaScript's Float64Array: forwarded, relayed, kit errors (of relayed), timeouts, duplicates,
  // handed to JavaScript, in flight (read there without a call into this file).
  napi_ref counters_ref;
  double *counters;
} Fwd;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

static uint64_t next_random(Fwd *f) {
  // xorshift128+, seeded from getrandom(2): unguessable to an off-path sender, cheap per token.
  uint64_t a = f->rng[0];
  const uint64_t b = f->rng[1];
  f->rng[0] = b;
  a ^= a << 23;
  f->rng[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
  return f->rng[1] + b;
}

static void addr_of(const struct sockaddr_in6 *sa, Addr *a) {
  memset(a, 0, sizeof *a);
  if (sa->sin6_family == AF_INET6) {
    a->family = 6;
    a->port = ntohs(sa->sin6_port);
    memcpy(a->addr, &sa->sin6_addr, 16);
  } else {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    a->family = 4;
    a->port = ntohs(s4->sin_port);
    memcpy(a->addr, &s4->sin_addr, 4);
  }
}

static socklen_t sockaddr_of(const Sock *s, const Addr *a, struct sockaddr_in6 *sa) {
  memset(sa, 0, sizeof *sa);
  if (s->v6) {
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(a->port);
    if (a->family == 6) {
      memcpy(&sa->sin6_addr, a->addr, 16);
    } else {
      sa->sin6_addr.s6_addr[10] = 0xff;
      sa->sin6_addr.s6_addr[11] = 0xff;
      memcpy(&sa->sin6_addr.s6_addr[12], a->addr, 4);
    }
    return sizeof(struct sockaddr_in6);
  }
  struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
  s4->sin_family = AF_INET;
  s4->sin_port = htons(a->port);
  memcpy(&s4->sin_addr, a->addr, 4);
  return sizeof(struct sockaddr_in);
}

static int addr_eq(const Addr *a, const Addr *b) {
  return memcmp(a, b, sizeof *a) == 0;
}

static uint32_t fnv(uint32_t h, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

/** A peer and some bytes of its (a Proxy-Uri, a token), hashed: the key of every table here. */
static uint32_t peer_hash(const Addr *peer, const uint8_t *bytes, size_t n) {
  return fnv(fnv(2166136261u, (const uint8_t *)peer, sizeof *peer), bytes, n);
}

static void put_be16(uint8_t *w, uint32_t v) {
  w[0] = (uint8_t)(v >> 8);
  w[1] = (uint8_t)v;
}

static void put_be32(uint8_t *w, uint32_t v) {
  put_be16(w, v >> 16);
  put_be16(w + 2, v);
}

static Route *route_find(Fwd *f, const Addr *client, const uint8_t *uri, size_t urilen, uint32_t h) {
  for (uint32_t k = 0; k < ROUTE_PROBES; k++) {
    Route *r = &f->routes[(h + k) & (ROUTES - 1)];
    if (r->used && r->hash == h && r->urilen == urilen && addr_eq(&r->client, client) && memcmp(r->uri, uri, urilen) == 0) return r;
  }
  return NULL;
}

static uint32_t seen_slot(const Addr *peer, uint16_t mid, const uint8_t *tok, uint8_t tkl) {
  uint8_t m[2];
  put_be16(m, mid);
  return fnv(peer_hash(peer, tok, tkl), m, 2) & (SEEN - 1);
}

/** Whether this NON was forwarded here already (RFC 7252 §4.5). Lossy: a newer message may have taken an older one's slot. */
static int seen_before(Fwd *f, const Addr *peer, uint16_t mid, const uint8_t *tok, uint8_t tkl) {
  Seen *e = &f->seen[seen_slot(peer, mid, tok, tkl)];
  return e->until > f->now && e->mid == mid && e->tkl == tkl && addr_eq(&e->peer, peer) && memcmp(e->tok, tok, tkl) == 0;
}

static void remember(Fwd *f, const Addr *peer, uint16_t mid, const uint8_t *tok, uint8_t tkl) {
  Seen *e = &f->seen[seen_slot(peer, mid, tok, tkl)];
  e->until = f->now + f->non_lifetime_ms;
  e->peer = *peer;
  e->mid = mid;
  e->tkl = tkl;
  memcpy(e->tok, tok, tkl);
}

/**
 * Reads one option header at d[*p]: its delta and length, RFC 7252 §3.1 (13: one more byte, +13;
 * 14: two more, +269; 15: reserved, a format error). 0 on a format error or the end of the buffer.
 */
static int option_header(const uint8_t *d, size_t len, size_t *p, uint32_t *delta, uint32_t *olen) {
  if (*p >= len) return 0;
  uint8_t b = d[(*p)++];
  uint32_t v[2] = {(uint32_t)(b >> 4), (uint32_t)(b & 15)};
  for (int k = 0; k < 2; k++) {
    if (v[k] == 13) {
      if (*p + 1 > len) return 0;
      v[k] = 13u + d[(*p)++];
    } else if (v[k] == 14) {
      if (*p + 2 > len) return 0;
      v[k] = 269u + ((uint32_t)d[*p] << 8 | d[*p + 1]);
      *p += 2;
    } else if (v[k] == 15) {
      return 0;
    }
  }
  *delta = v[0];
  *olen = v[1];
  return *p + *olen <= len;
}

/** The next free place in the socket's out queue; a full queue is sent first (NULL: still full). */
static OutDgram *out_slot(Sock *s) {
  if (s->out_n == OUT_MAX) flush_out(s);
  return s->out_n < OUT_MAX ? &s->out[s->out_n] : NULL;
}

static Event *add_event(Fwd *f, int kind, const Pend *p) {
  if (f->nevents >= EVENTS_MAX) return NULL;
  Event *e = &f->events[f->nevents++];
  memset(e, 0, sizeof *e);
  e->kind = kind;
  e->client = p->client;
  e->ctkl = p->ctkl;
  memcpy(e->ctok, p->ctok, p->ctkl);
  e->tap = p->tap;
  return e;
}

/** An event with a copy of the datagram; NULL when the list is full or memory short. */
static Event *add_data_event(Fwd *f, int kind, const Pend *p, const uint8_t *d, size_t len) {
  Event *e = add_event(f, kind, p);
  if (!e) return NULL;
  e->data = malloc(len);
  if (!e->data) {
    f->nevents--;
    return NULL;
  }
  memcpy(e->data, d, len);
  e->len = (uint32_t)len;
  return e;
}

static void free_pend(Fwd *f, Pend *p) {
  if (f->pidx[p->slot] == (uint32_t)(p - f->pends) + 1) f->pidx[p->slot] = 0;
  p->used = 0;
  f->npend--;
  f->counters[C_IN_FLIGHT] = f->npend;
}

/** A client's request on the front socket: 1 when forwarded (or dropped as a duplicate). */
static int take_request(Fwd *f, const uint8_t *d, size_t len, const Addr *from) {
  // NON (type 1), version 1, GET (0.01), a token of at most 8 bytes.
  if (len < 5 || len > f->max_request || (d[0] & 0xf0) != 0x50 || d[1] != 0x01) return 0;
  uint8_t tkl = d[0] & 15;
  if (tkl > 8) return 0;
  size_t p = 4 + tkl;
  uint32_t delta, olen;
  // Exactly one option, Proxy-Uri (35, 1–1034 bytes, §5.10), ending the datagram: no payload.
  if (!option_header(d, len, &p, &delta, &olen) || delta != 35 || olen < 1 || olen > URI_MAX || p + olen != len) return 0;
  const uint8_t *uri = d + p;
  uint16_t mid = (uint16_t)(d[2] << 8 | d[3]);
  // A duplicate of one forwarded here is dropped whether or not its route is still there.
  if (seen_before(f, from, mid, d + 4, tkl)) {
    f->counters[C_DUPLICATES]++;
    return 1;
  }
  uint32_t h = peer_hash(from, uri, olen);
  Route *r = route_find(f, from, uri, olen, h);
  if (!r || r->expires <= f->now) return 0;
  // The same request again with a new Message ID (a client's retry) while the first is on its
  // way: that answer serves it (the full path merges it the same way).
  uint32_t slot = peer_hash(from, d + 4, tkl) & (PIDX - 1);
  uint32_t prior = f->pidx[slot];
  if (prior) {
    Pend *q = &f->pends[prior - 1];
    if (q->used && q->rhash == h && q->ctkl == tkl && addr_eq(&q->client, from) && memcmp(q->ctok, d + 4, tkl) == 0) {
      f->counters[C_DUPLICATES]++;
      return 1;
    }
  }
  Sock *back = f->back;
  OutDgram *o = out_slot(back);
  if (!o || f->npend >= PENDS / 4 * 3) return 0;
  remember(f, from, mid, d + 4, tkl);
  // A free entry, from where the last one was found.
  uint32_t idx = f->hint;
  while (f->pends[idx].used) idx = (idx + 1) & (PENDS - 1);
  f->hint = (idx + 1) & (PENDS - 1);
  Pend *pe = &f->pends[idx];
  pe->used = 1;
  f->npend++;
  f->counters[C_IN_FLIGHT] = f->npend;
  pe->due = f->now + f->deadline_ms;
  uint64_t rnd = next_random(f);
  pe->token[0] = (uint8_t)(idx >> 8);
  pe->token[1] = (uint8_t)idx;
  for (int k = 2; k < 8; k++) pe->token[k] = (uint8_t)(rnd >> (8 * (k - 2)));
  pe->kit = r->kit;
  pe->client = *from;
  pe->ctkl = tkl;
  memcpy(pe->ctok, d + 4, tkl);
  pe->tap = r->tap;
  pe->rhash = h;
  pe->slot = slot;
  f->pidx[slot] = idx + 1;
  // The upstream request: NON GET, the back socket's next Message ID, our token, the route's options.
  int32_t m = (back->status[1] + 1) & 0xffff;
  back->status[1] = m;
  uint8_t *w = (uint8_t *)o->data;
  w[0] = 0x50 | 8;
  w[1] = 0x01;
  put_be16(w + 2, (uint32_t)m);
  memcpy(w + 4, pe->token, 8);
  memcpy(w + 12, r->opts, r->optlen);
  o->len = 12u + r->optlen;
  o->tolen = sockaddr_of(back, &r->kit, &o->to);
  back->out_n++;
  f->counters[C_FORWARDED]++;
  return 1;
}

/** Which options a relayed answer may carry as they are, and their lengths (RFC 7252 §5.10). */
static int relayable(uint32_t number, uint32_t olen) {
  switch (number) {
    case 4:  // ETag
      return olen >= 1 && olen <= 8;
    case 8:   // Location-Path
    case 20:  // Location-Query
      return olen <= 255;
    case 12:  // Content-Format
      return olen <= 2;
    case 14:  // Max-Age
    case 28:  // Size2
    case 60:  // Size1
      return olen <= 4;
    case 23:  // Block2 (RFC 7959 §2.1)
      return olen <= 3;
    default:
      return 0;
  }
}

/** A CON answer is acknowledged (§5.2.2) here, since the endpoint never sees it. */
static void ack_answer(Fwd *f, int type, uint16_t mid, const Addr *kit) {
  OutDgram *a = type == CON ? out_slot(f->back) : NULL;
  if (!a) return;  // a NON; or a full queue: the kit sends it again, and it is then JavaScript's
  uint8_t *w = (uint8_t *)a->data;
  w[0] = 0x60;
  w[1] = 0;
  put_be16(w + 2, mid);
  a->len = 4;
  a->tolen = sockaddr_of(f->back, kit, &a->to);
  f->back->out_n++;
}

/** A kit's answer on the back socket: 1 when it was one of ours (relayed, or handed to JavaScript). */
static int take_answer(Fwd *f, const uint8_t *d, size_t len, const Addr *from) {
  // Version 1, NON or CON, our 8-byte token, a response code (2.xx, 4.xx, 5.xx).
  if (len < 12 || (d[0] >> 6) != 1 || (d[0] & 15) != 8) return 0;
  int type = (d[0] >> 4) & 3;
  int cls = d[1] >> 5;
  if ((type != NON && type != CON) || (cls != 2 && cls != 4 && cls != 5)) return 0;
  uint32_t idx = ((uint32_t)d[4] << 8 | d[5]) & (PENDS - 1);
  Pend *pe = &f->pends[idx];
  if (!pe->used || memcmp(pe->token, d + 4, 8) != 0 || !addr_eq(&pe->kit, from)) return 0;
  // Its options: each relayable as it is, else JavaScript relays the answer; a format error: the
  // endpoint's rule (§4.2, §4.3: ignored, the request then times out).
  size_t p = 12;
  uint32_t number = 0;
  int plain = 1;
  while (p < len) {
    if (d[p] == 0xff) {
      if (p + 1 == len) return 0;  // a payload marker with no payload (§3)
      break;
    }
    uint32_t delta, olen;
    if (!option_header(d, len, &p, &delta, &olen)) return 0;
    number += delta;
    if (!relayable(number, olen)) plain = 0;
    p += olen;
  }
  uint16_t mid = (uint16_t)(d[2] << 8 | d[3]);
  Sock *front = f->front;
  OutDgram *o = out_slot(front);
  size_t outlen = 4u + pe->ctkl + (len - 12);
  if (!plain || !o || outlen > GSO_SEG) {
    if (!add_data_event(f, EV_ANSWER, pe, d, len)) return 0;
    f->counters[C_HANDED_OVER]++;
    free_pend(f, pe);
    ack_answer(f, type, mid, from);
    return 1;
  }
  // A tapped route's successful answer is JavaScript's to see as well, after the client has it.
  if (pe->tap && cls == 2 && !add_data_event(f, EV_TAP, pe, d, len)) return 0;
  int32_t m = (front->status[1] + 1) & 0xffff;
  front->status[1] = m;
  uint8_t *w = (uint8_t *)o->data;
  w[0] = 0x50 | pe->ctkl;
  w[1] = d[1];
  put_be16(w + 2, (uint32_t)m);
  memcpy(w + 4, pe->ctok, pe->ctkl);
  memcpy(w + 4 + pe->ctkl, d + 12, len - 12);
  o->len = (uint32_t)outlen;
  o->tolen = sockaddr_of(front, &pe->client, &o->to);
  front->out_n++;
  f->counters[C_RELAYED]++;
  if (cls != 2) f->counters[C_KIT_ERRORS]++;
  free_pend(f, pe);
  ack_answer(f, type, mid, from);
  return 1;
}

int fwd_take(Sock *s, const uint8_t *d, size_t len, const struct sockaddr_in6 *from) {
  Fwd *f = s->fwd;
  if (!f->now) f->now = now_ms();
  Addr a;
  addr_of(from, &a);
  return s == f->front ? take_request(f, d, len, &a) : take_answer(f, d, len, &a);
}

void fwd_round(Sock *s) {
  Fwd *f = s->fwd;
  f->now = 0;  // read again at the next datagram
  flush_out(f->back);
  flush_out(f->front);
  if (f->nevents > f->notified && !f->front->closed) {
    f->notified = f->nevents;
    // JavaScript may close a socket in the call, which frees f: nothing of f is read after it.
    call_js_scoped(f->front, f->on_events);
  }
}

static void fwd_free(Fwd *f) {
  for (uint32_t k = 0; k < f->nevents; k++) free(f->events[k].data);
  free(f->routes);
  free(f->pends);
  free(f->pidx);
  free(f->seen);
  free(f->events);
  free(f);
}

void fwd_unlink(Sock *s) {
  Fwd *f = s->fwd;
  if (!f) return;
  napi_delete_reference(s->env, f->on_events);
  napi_delete_reference(s->env, f->counters_ref);
  f->front->fwd = NULL;
  f->back->fwd = NULL;
  fwd_free(f);
}

// ---- JavaScript's side (src/coap/datagrams.ts, linkForwarding) ----------------------------------

static Fwd *front_fwd(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv) {
  if (napi_get_cb_info(env, info, argc, argv, NULL, NULL) != napi_ok || *argc < 1) return NULL;
  Sock *s = unwrap(env, argv[0]);
  return s && s->fwd && s->fwd->front == s ? s->fwd : NULL;
}

// fastLink(front, back, maxRequest, deadlineMs, nonLifetimeMs, onEvents, counters: Float64Array(7))
static napi_value js_link(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value argv[7];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  Sock *front = unwrap(env, argv[0]);
  if (!front) return NULL;
  Sock *back = unwrap(env, argv[1]);
  if (!back) return NULL;
  if (front == back || front->fwd || back->fwd || front->closed || back->closed) {
    napi_throw_error(env, NULL, "udp-batch: these sockets cannot be linked");
    return NULL;
  }
  napi_typedarray_type tt;
  size_t clen, coff;
  void *cdata;
  napi_value cab;
  if (argc < 7 || napi_get_typedarray_info(env, argv[6], &tt, &clen, &cdata, &cab, &coff) != napi_ok || tt != napi_float64_array || clen < 7) {
    napi_throw_type_error(env, NULL, "udp-batch: counters must be a Float64Array of 7");
    return NULL;
  }
  uint32_t maxRequest;
  double deadline, nonLifetime;
  CHECK(napi_get_value_uint32(env, argv[2], &maxRequest));
  CHECK(napi_get_value_double(env, argv[3], &deadline));
  CHECK(napi_get_value_double(env, argv[4], &nonLifetime));
  Fwd *f = calloc(1, sizeof *f);
  if (!f) return throw_errno(env, "malloc", ENOMEM, NULL, 0);
  f->routes = calloc(ROUTES, sizeof *f->routes);
  f->pends = calloc(PENDS, sizeof *f->pends);
  f->pidx = calloc(PIDX, sizeof *f->pidx);
  f->seen = calloc(SEEN, sizeof *f->seen);
  f->events = calloc(EVENTS_MAX, sizeof *f->events);
  if (!front->out) front->out = malloc(OUT_MAX * sizeof *front->out);
  if (!back->out) back->out = malloc(OUT_MAX * sizeof *back->out);
  if (!f->routes || !f->pends || !f->pidx || !f->seen || !f->events || !front->out || !back->out) {
    fwd_free(f);
    return throw_errno(env, "malloc", ENOMEM, NULL, 0);
  }
  if (getrandom(f->rng, sizeof f->rng, 0) != (ssize_t)sizeof f->rng) {
    int e = errno;
    fwd_free(f);
    return throw_errno(env, "getrandom", e, NULL, 0);
  }
  f->rng[0] |= 1;
  f->front = front;
  f->back = back;
  f->max_request = maxRequest;
  f->deadline_ms = deadline;
  f->non_lifetime_ms = nonLifetime;
  CHECK(napi_create_reference(env, argv[5], 1, &f->on_events));
  CHECK(napi_create_reference(env, argv[6], 1, &f->counters_ref));
  f->counters = cdata;
  front->fwd = f;
  back->fwd = f;
  return NULL;
}

// fastInstall(front, clientAddress, clientPort, proxyUri, kitAddress, kitPort, kitOptions, ttlMs,
// mid, token, tap) → whether the route is in. mid and token: the request JavaScript forwarded
// itself (its duplicate must not be forwarded again, §4.5); tap: 0, or the id its EV_TAP carry.
static napi_value js_install(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value argv[11];
  Fwd *f = front_fwd(env, info, &argc, argv);
  napi_value out;
  if (!f || argc < 11) {
    napi_get_boolean(env, false, &out);
    return out;
  }
  char caddr[64], kaddr[64];
  size_t alen;
  uint32_t cport, kport, mid;
  double ttl;
  void *uri, *opts, *tok;
  size_t urilen, optlen, toklen;
  CHECK(napi_get_value_string_latin1(env, argv[1], caddr, sizeof caddr, &alen));
  CHECK(napi_get_value_uint32(env, argv[2], &cport));
  CHECK(napi_get_buffer_info(env, argv[3], &uri, &urilen));
  CHECK(napi_get_value_string_latin1(env, argv[4], kaddr, sizeof kaddr, &alen));
  CHECK(napi_get_value_uint32(env, argv[5], &kport));
  CHECK(napi_get_buffer_info(env, argv[6], &opts, &optlen));
  CHECK(napi_get_value_double(env, argv[7], &ttl));
  CHECK(napi_get_value_uint32(env, argv[8], &mid));
  CHECK(napi_get_buffer_info(env, argv[9], &tok, &toklen));
  int32_t tap;
  CHECK(napi_get_value_int32(env, argv[10], &tap));
  struct sockaddr_in6 sa;
  socklen_t slen;
  Addr client, kit;
  int ok = urilen >= 1 && urilen <= URI_MAX && optlen <= KOPTS_MAX && toklen <= 8 && ttl > 0 && cport <= 0xffff && kport <= 0xffff;
  if (ok && to_sockaddr(f->front, caddr, (int)cport, &sa, &slen)) addr_of(&sa, &client);
  else ok = 0;
  if (ok && to_sockaddr(f->back, kaddr, (int)kport, &sa, &slen)) addr_of(&sa, &kit);
  else ok = 0;
  if (ok) {
    f->now = now_ms();
    uint32_t h = peer_hash(&client, uri, urilen);
    Route *r = route_find(f, &client, uri, urilen, h);
    for (uint32_t k = 0; !r && k < ROUTE_PROBES; k++) {
      Route *c = &f->routes[(h + k) & (ROUTES - 1)];
      if (!c->used || c->expires <= f->now) r = c;
    }
    // Every slot of its probe sequence live: the first gives way (routes are a cache).
    if (!r) r = &f->routes[h & (ROUTES - 1)];
    r->used = 1;
    r->hash = h;
    r->expires = f->now + ttl;
    r->client = client;
    r->kit = kit;
    r->urilen = (uint16_t)urilen;
    memcpy(r->uri, uri, urilen);
    r->optlen = (uint16_t)optlen;
    memcpy(r->opts, opts, optlen);
    r->tap = tap;
    remember(f, &client, (uint16_t)mid, tok, (uint8_t)toklen);
    f->now = 0;
  }
  napi_get_boolean(env, ok, &out);
  return out;
}

// fastForget(front, clientAddress, clientPort): the client's routes go (its session ended, it observes).
static napi_value js_forget(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  Fwd *f = front_fwd(env, info, &argc, argv);
  if (!f || argc < 3) return NULL;
  char caddr[64];
  size_t alen;
  uint32_t cport;
  CHECK(napi_get_value_string_latin1(env, argv[1], caddr, sizeof caddr, &alen));
  CHECK(napi_get_value_uint32(env, argv[2], &cport));
  struct sockaddr_in6 sa;
  socklen_t slen;
  if (!to_sockaddr(f->front, caddr, (int)cport, &sa, &slen)) return NULL;
  Addr client;
  addr_of(&sa, &client);
  for (uint32_t k = 0; k < ROUTES; k++)
    if (f->routes[k].used && addr_eq(&f->routes[k].client, &client)) f->routes[k].used = 0;
  return NULL;
}

// fastClear(front): every route goes (a kit moved or restarted).
static napi_value js_clear(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  Fwd *f = front_fwd(env, info, &argc, argv);
  if (f)
    for (uint32_t k = 0; k < ROUTES; k++) f->routes[k].used = 0;
  return NULL;
}

// fastTake(front, sweep) → a Buffer of events, or null: forwards past their deadline (EV_TIMEOUT,
// looked for only when `sweep`: a walk of the whole table, JavaScript's timer asks for it, not every
// wake-up), answers for JavaScript to relay (EV_ANSWER) and copies of answers relayed here on a
// tapped route (EV_TAP).
// Each event is a header of EV_HEADER bytes (kind, token length, address length, port (BE),
// tap (BE), datagram length (BE), token, the client's address as text), then its datagram. One
// buffer for all: no JavaScript object made here per event.
#define EV_HEADER 72
static napi_value js_take(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  Fwd *f = front_fwd(env, info, &argc, argv);
  napi_value out;
  napi_get_null(env, &out);
  if (!f) return out;
  bool sweep = false;
  if (argc >= 2) CHECK(napi_get_value_bool(env, argv[1], &sweep));
  if (sweep && f->npend > 0) {
    double now = now_ms();
    for (uint32_t k = 0; k < PENDS && f->npend > 0; k++) {
      Pend *p = &f->pends[k];
      if (!p->used || p->due > now) continue;
      if (!add_event(f, EV_TIMEOUT, p)) break;
      f->counters[C_TIMEOUTS]++;
      free_pend(f, p);
    }
  }
  if (f->nevents == 0) return out;
  size_t total = 0;
  for (uint32_t k = 0; k < f->nevents; k++) total += EV_HEADER + f->events[k].len;
  uint8_t *w;
  CHECK(napi_create_buffer(env, total, (void **)&w, &out));
  for (uint32_t k = 0; k < f->nevents; k++) {
    Event *e = &f->events[k];
    memset(w, 0, EV_HEADER);
    w[0] = (uint8_t)e->kind;
    w[1] = e->ctkl;
    char text[INET6_ADDRSTRLEN];
    inet_ntop(e->client.family == 6 ? AF_INET6 : AF_INET, e->client.addr, text, sizeof text);
    size_t alen = strlen(text);
    w[2] = (uint8_t)alen;
    put_be16(w + 4, e->client.port);
    put_be32(w + 8, (uint32_t)e->tap);
    put_be32(w + 12, e->len);
    memcpy(w + 16, e->ctok, e->ctkl);
    memcpy(w + 24, text, alen);
    if (e->data) memcpy(w + EV_HEADER, e->data, e->len);
    free(e->data);
    e->data = NULL;
    w += EV_HEADER + e->len;
  }
  f->nevents = 0;
  f->notified = 0;
  return out;
}

napi_value fwd_exports(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"fastLink", NULL, js_link, NULL, NULL, NULL, napi_default, NULL},
      {"fastInstall", NULL, js_install, NULL, NULL, NULL, napi_default, NULL},
      {"fastForget", NULL, js_forget, NULL, NULL, NULL, napi_default, NULL},
      {"fastClear", NULL, js_clear, NULL, NULL, NULL, napi_default, NULL},
      {"fastTake", NULL, js_take, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  export_int(env, exports, "EV_TIMEOUT", EV_TIMEOUT);
  export_int(env, exports, "EV_ANSWER", EV_ANSWER);
  export_int(env, exports, "EV_TAP", EV_TAP);
  export_int(env, exports, "EV_HEADER", EV_HEADER);
  return exports;
}
