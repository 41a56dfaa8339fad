// Where webhooks may go (docs/security.md "Webhook targets"). A webhook URL is chosen by any account
// that may write rules, and Reef POSTs to it from inside the operator's network: without a check an
// account could make Reef reach loopback services, the LAN or a cloud metadata endpoint
// (169.254.169.254). So by default a target whose host is, or resolves to, a loopback, private
// (RFC 1918, RFC 6598 shared, IPv6 ULA, site-local), link-local, unspecified, multicast,
// documentation or reserved address, an IPv6 form that carries an IPv4 address (IPv4-mapped,
// IPv4-compatible, NAT64, 6to4), or one of the node's own interface addresses is refused: when the webhook is set (400 WEBHOOK_TARGET_FORBIDDEN) and again at every send, on the
// address the connection is then made to (the checked address itself, so a DNS answer that changes
// between check and connect, "DNS rebinding", cannot slip through). REEF_ALARM_WEBHOOK_ALLOW_CIDRS
// names the non-public subnets an operator's own receivers live in (e.g. 10.20.0.0/16), and
// REEF_ALARM_WEBHOOK_ALLOW_PRIVATE lets a lab (and the tests) use receivers on any such address.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, SocketAddress, type LookupFunction } from 'node:net';
import os from 'node:os';
import { ReefError } from '../core/errors.ts';

const FORBIDDEN = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // RFC 6598 shared (carrier-grade NAT)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation, TEST-NET-1 (RFC 5737)
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation, TEST-NET-2 (RFC 5737)
  ['203.0.113.0', 24], // documentation, TEST-NET-3 (RFC 5737)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  FORBIDDEN.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 96], // unspecified, loopback, IPv4-compatible (::a.b.c.d, RFC 4291 §2.5.5.1)
  ['64:ff9b::', 96], // NAT64 (RFC 6052): reaches any IPv4 address, private ones too
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215)
  ['2002::', 16], // 6to4 (RFC 3056): an IPv4 address inside
  ['2001:db8::', 32], // documentation (RFC 3849)
  ['fec0::', 10], // site-local, deprecated but still routed by some stacks (RFC 3879)
  ['fc00::', 7], // unique local (ULA)
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
  ['100::', 64], // discard-only
] as const)
  FORBIDDEN.addSubnet(net, bits, 'ipv6');

/** The IPv4 address inside an IPv4-mapped IPv6 address (::ffff:a.b.c.d, ::ffff:xxxx:xxxx), else null. */
function mappedIpv4(address: string): string | null {
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(.+)$/.exec(address.toLowerCase());
  if (!mapped) return null;
  const rest = mapped[1]!;
  if (isIP(rest) === 4) return rest;
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(rest);
  if (!hex) return null;
  const n = (Number.parseInt(hex[1]!, 16) << 16) | Number.parseInt(hex[2]!, 16);
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** Whether a list of subnets holds an IP address (an IPv4-mapped one by the IPv4 address inside). */
function listed(list: BlockList, address: string): boolean {
  const family = isIP(address);
  if (family === 4) return list.check(address, 'ipv4');
  if (family !== 6) return false;
  const v4 = mappedIpv4(address);
  return v4 !== null ? list.check(v4, 'ipv4') : list.check(address, 'ipv6');
}

/**
 * The node's own interface addresses: a public address of the node itself reaches its own services
 * (the admin API, a metrics port) as surely as loopback does. Read again at most every few seconds,
 * as interfaces come and go.
 */
let own: { at: number; addresses: Set<string> } = { at: -Infinity, addresses: new Set() };
const OWN_REFRESH_MS = 5000;

function canonical(address: string): string {
  const v4 = isIP(address) === 6 ? mappedIpv4(address) : null;
  if (v4 !== null) return v4;
  // The zone (fe80::1%eth0) is not part of the address; SocketAddress gives the canonical text form.
  const bare = address.split('%')[0]!.toLowerCase();
  if (isIP(bare) !== 6) return bare;
  const one = new SocketAddress({ address: bare, family: 'ipv6' });
  return one.address;
}

function ownAddresses(): Set<string> {
  const now = Date.now();
  if (now - own.at < OWN_REFRESH_MS) return own.addresses;
  const addresses = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) addresses.add(canonical(a.address));
  own = { at: now, addresses };
  return addresses;
}

/** Whether an IP address (v4, v6, or IPv4 mapped into v6) is one webhooks may not reach by default. */
export function forbiddenAddress(address: string): boolean {
  return isIP(address) === 0 || listed(FORBIDDEN, address) || ownAddresses().has(canonical(address));
}

export interface EgressPolicy {
  /** Allow loopback, private and link-local targets (REEF_ALARM_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** Non-public subnets webhooks may reach all the same (REEF_ALARM_WEBHOOK_ALLOW_CIDRS). */
  allowed?: BlockList;
}

/** The subnets of REEF_ALARM_WEBHOOK_ALLOW_CIDRS (checked by the configuration) as one list. */
export function allowList(subnets: readonly { address: string; prefix: number; family: 4 | 6 }[]): BlockList {
  const list = new BlockList();
  for (const n of subnets) list.addSubnet(n.address, n.prefix, n.family === 4 ? 'ipv4' : 'ipv6');
  return list;
}

/** Whether the policy keeps webhooks from an address: non-public and neither allowed wholesale nor listed. */
export function blockedAddress(address: string, policy: EgressPolicy): boolean {
  if (policy.allowPrivate || !forbiddenAddress(address)) return false;
  return !(policy.allowed && isIP(address) !== 0 && listed(policy.allowed, address));
}

const hostOf = (u: URL) => (u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname);

function refused(host: string, address: string): ReefError {
  return new ReefError(
    'WEBHOOK_TARGET_FORBIDDEN',
    `webhook host ${host} ${host === address ? 'is' : `resolves to ${address}, which is`} a loopback, private, link-local or otherwise non-public address; an operator may allow such subnets with REEF_ALARM_WEBHOOK_ALLOW_CIDRS, or all of them with REEF_ALARM_WEBHOOK_ALLOW_PRIVATE`,
    { field: 'webhook.url' },
  );
}

/**
 * Checks a webhook URL when it is set: every address its host resolves to must be public. A host
 * that does not resolve is refused too (400 VALIDATION_FAILED): a typo is better told now.
 */
export async function checkWebhookTarget(url: string, policy: EgressPolicy, field = 'webhook.url'): Promise<void> {
  if (policy.allowPrivate) return;
  const host = hostOf(new URL(url));
  if (isIP(host)) {
    if (blockedAddress(host, policy)) throw withField(refused(host, host), field);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    throw new ReefError('VALIDATION_FAILED', `webhook host ${host} does not resolve`, { field });
  }
  const bad = addresses.find((a) => blockedAddress(a.address, policy));
  if (bad) throw withField(refused(host, bad.address), field);
}

function withField(e: ReefError, field: string): ReefError {
  return field === e.field ? e : new ReefError('WEBHOOK_TARGET_FORBIDDEN', e.message, { field });
}

/**
 * The DNS lookup used for a webhook's connection: resolves, refuses (unless allowed) when any answer
 * is non-public, and hands the connection exactly the address it checked.
 */
function guardedLookup(policy: EgressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { all: true, verbatim: true, ...(options.family ? { family: options.family } : {}) }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      const bad = list.find((a) => blockedAddress(a.address, policy));
      if (bad) return callback(Object.assign(refused(hostname, bad.address), { code: 'WEBHOOK_TARGET_FORBIDDEN' }) as unknown as NodeJS.ErrnoException, '', 0);
      if (!list.length) return callback(Object.assign(new Error(`${hostname} did not resolve`), { code: 'ENOTFOUND' }), '', 0);
      // Both callback forms: net asks for all addresses when it tries several families at once
      // (every one of them was checked above).
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      else callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

export interface WebhookPost {
  status: number;
}

/**
 * POSTs a webhook body; resolves with the status, rejects on a network error, a refused target or
 * the timeout. No redirect is followed (a 3xx is a failed attempt).
 */
export function postWebhook(url: string, headers: Record<string, string>, body: string, timeoutMs: number, policy: EgressPolicy): Promise<WebhookPost> {
  const u = new URL(url);
  const host = hostOf(u);
  if (isIP(host) && blockedAddress(host, policy)) return Promise.reject(refused(host, host));
  const mod = u.protocol === 'https:' ? https : http;
  const signal = AbortSignal.timeout(timeoutMs);
  return new Promise<WebhookPost>((resolve, reject) => {
    const req = mod.request(
      u,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: guardedLookup(policy),
        agent: false,
        signal,
      },
      (res) => {
        // The body is not needed; reading it to the end frees the socket.
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  }).catch((err: unknown) => {
    throw signal.aborted ? Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' }) : err;
  });
}
