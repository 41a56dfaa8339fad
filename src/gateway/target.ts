// The target of a forward-proxy request (RFC 7252 §5.7.2, §6.4, §5.10.2): either a Proxy-Uri, or
// Proxy-Scheme with Uri-Host, Uri-Port, Uri-Path and Uri-Query. The only targets this gateway
// serves are dev kits named `SSN<16-hex MAC>.<mesh domain>` on the kit CoAP port 4849 (wire §3);
// anything else is refused, so the gateway never relays to an arbitrary host.
import { Option, getOption, getOptions, getUintOption, type CoapMessage } from '../coap/index.ts';

export const KIT_PORT = 4849;

export interface ProxyTarget {
  scheme: string;
  host: string;
  port: number | undefined;
  path: string[];
  query: string[];
}

export class TargetError extends Error {
  constructor(
    readonly kind: 'malformed' | 'unsupported',
    message: string,
  ) {
    super(message);
    this.name = 'TargetError';
  }
}

export function isProxyRequest(m: CoapMessage): boolean {
  return m.options.some((o) => o.number === Option.PROXY_URI || o.number === Option.PROXY_SCHEME);
}

function pct(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new TargetError('malformed', 'bad percent-encoding in Proxy-Uri');
  }
}

const URI = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(\[[0-9A-Fa-f:.]+\]|[^/?#:[\]]*)(?::(\d{0,5}))?(\/[^?#]*)?(?:\?([^#]*))?$/;

/** Decomposes a Proxy-Uri (RFC 7252 §6.4); throws TargetError('malformed') when it is not an absolute URI. */
export function parseProxyUri(uri: string): ProxyTarget {
  const m = URI.exec(uri);
  if (!m) throw new TargetError('malformed', 'Proxy-Uri is not an absolute URI without fragment');
  const port = m[3] === undefined || m[3] === '' ? undefined : Number(m[3]);
  if (port !== undefined && (port < 1 || port > 65535)) throw new TargetError('malformed', 'Proxy-Uri port out of range');
  const path = (m[4] ?? '').split('/').slice(1);
  // "/" alone and a trailing slash name no extra empty segment for our purposes (§6.4 step 8).
  if (path.length === 1 && path[0] === '') path.length = 0;
  return {
    scheme: (m[1] ?? '').toLowerCase(),
    host: pct(m[2] ?? ''),
    port,
    path: path.map(pct),
    query: m[5] === undefined || m[5] === '' ? [] : m[5].split('&').map(pct),
  };
}

/** The target of a proxied request, from Proxy-Uri or from Proxy-Scheme and the Uri-* options. */
export function requestTarget(m: CoapMessage): ProxyTarget {
  const pu = getOption(m, Option.PROXY_URI);
  if (pu !== undefined) {
    // §5.10.2: Proxy-Uri excludes the Uri-* options; a request with both is malformed.
    if (m.options.some((o) => o.number === Option.URI_HOST || o.number === Option.URI_PORT || o.number === Option.URI_PATH || o.number === Option.URI_QUERY)) {
      throw new TargetError('malformed', 'Proxy-Uri must not come with Uri-Host, Uri-Port, Uri-Path or Uri-Query');
    }
    return parseProxyUri(pu.toString('utf8'));
  }
  const scheme = getOption(m, Option.PROXY_SCHEME)!.toString('utf8').toLowerCase();
  const host = getOption(m, Option.URI_HOST)?.toString('utf8');
  if (!host) throw new TargetError('malformed', 'Proxy-Scheme needs Uri-Host naming the kit');
  return {
    scheme,
    host,
    port: getUintOption(m, Option.URI_PORT),
    path: getOptions(m, Option.URI_PATH).map((v) => v.toString('utf8')),
    query: getOptions(m, Option.URI_QUERY).map((v) => v.toString('utf8')),
  };
}

/**
 * The mesh domain every original CoAP sample writes, in upper or lower case. Accepted
 * beside the configured REEF_MESH_DOMAIN so those samples work unchanged.
 */
export const ORIGINAL_MESH_DOMAIN = 'SG.YEL01.SSN.SSNSGS.NET';

/**
 * The kit MAC a target names, or TargetError('unsupported') (answered 5.05: the proxy will not go
 * there). The MAC is what names a kit: the host is never resolved, and the caller's group must own
 * the kit, so accepting the original's domain beside the configured one opens nothing new. Host
 * names compare case-insensitively (RFC 3986 §3.2.2).
 */
export function kitMac(t: ProxyTarget, meshDomain: string): string {
  if (t.scheme !== 'coap') throw new TargetError('unsupported', `only coap:// targets are proxied, not ${t.scheme.slice(0, 16)}://`);
  const m = /^ssn([0-9a-f]{16})\.(.+?)\.?$/i.exec(t.host);
  const [, mac, domain] = m ?? [];
  const known = domain !== undefined && (domain.toLowerCase() === meshDomain.toLowerCase() || domain.toLowerCase() === ORIGINAL_MESH_DOMAIN.toLowerCase());
  if (!mac || !known || (t.port !== undefined && t.port !== KIT_PORT)) {
    // The diagnostic names the domains expected, so a client configured for another one sees why
    // (kept short: gateway diagnostics are capped at 96 bytes, the configured domain first).
    const wanted = meshDomain.toLowerCase() === ORIGINAL_MESH_DOMAIN.toLowerCase() ? `SSN<mac>.${meshDomain}` : `SSN<mac>.${meshDomain} or SSN<mac>.${ORIGINAL_MESH_DOMAIN}`;
    throw new TargetError('unsupported', `only ${wanted}:${KIT_PORT} are reachable`);
  }
  return mac.toLowerCase();
}

/** The host name of a kit as clients write it. */
export function kitHost(mac: string, meshDomain: string): string {
  return `SSN${mac.toUpperCase()}.${meshDomain}`;
}
