// REEF_DATABASE_URL with several hosts, in libpq's own form (PostgreSQL docs, "Connection URIs" and
// "Parameter Key Words": host, port, target_session_attrs): `postgres://u@h1:5432,h2:5433/db`.
// node-postgres reads one host only, so the list is read here: once by the configuration (a malformed
// list stops the start) and by the store, which connects to whichever host is writable
// (src/store/postgres/hosts.ts). Pure: no I/O.

export interface DatabaseHost {
  /** A name, an IP address (IPv6 without brackets), or a Unix socket directory (starts with /). */
  host: string;
  port: number;
}

export interface DatabaseHosts {
  hosts: DatabaseHost[];
  /** libpq's target_session_attrs: for writes always a writable host's (read-write, the default, or primary). */
  targetSessionAttrs: string;
  /** The same URL naming one host only, for the driver; settings other than host, port and target_session_attrs kept. */
  urlFor(h: DatabaseHost): string;
}

export class DatabaseUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseUrlError';
  }
}

const DEFAULT_PORT = 5432;
/** libpq's target_session_attrs values; for writes Reef takes only the two that mean a writable host. */
const SESSION_ATTRS = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'];

function port(s: string, what: string): number {
  const n = Number(s);
  if (!/^\d{1,5}$/.test(s) || n < 1 || n > 65535) throw new DatabaseUrlError(`has a bad port ${JSON.stringify(s)} for ${what}: a port is a number from 1 to 65535`);
  return n;
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new DatabaseUrlError(`has a bad %-escape in host ${JSON.stringify(s)}`);
  }
}

/** One entry of the URL's host list: `name`, `name:port`, `[v6]`, `[v6]:port`. */
function hostEntry(entry: string, index: number): { host: string; port: string | null } {
  const v6 = /^\[([0-9A-Fa-f:.%]+)\](?::(.*))?$/.exec(entry);
  if (v6) return { host: v6[1]!, port: v6[2] ?? null };
  const plain = /^([^:[\]]*)(?::(.*))?$/.exec(entry);
  if (!plain) throw new DatabaseUrlError(`has a malformed host ${JSON.stringify(entry)} (host ${index + 1} of the list; an IPv6 address goes in brackets: [::1]:5432)`);
  return { host: decode(plain[1]!), port: plain[2] ?? null };
}

/** `host:port` as an operator writes it, IPv6 in brackets: how errors and logs name a host. */
export function hostLabel(h: DatabaseHost): string {
  return `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;
}

/**
 * Reads a postgres:// URL's hosts: the comma-separated list in its authority (each with its own port
 * or 5432), or libpq's `host=`/`port=` parameters, which win as they do in libpq (one port for every
 * host, or one per host). Throws DatabaseUrlError, whose message never repeats the URL (it may hold a
 * password). `read`: a URL for reads only (REEF_DATABASE_READ_URL), which may ask libpq for any
 * target_session_attrs.
 */
export function parseDatabaseUrl(url: string, use: 'write' | 'read' = 'write'): DatabaseHosts {
  const m = /^(postgres(?:ql)?):\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?(#.*)?$/.exec(url);
  if (!m) throw new DatabaseUrlError('must start with postgres:// or postgresql://');
  const [, scheme, authority, path, query] = m as unknown as [string, string, string, string, string | undefined];
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const list = at >= 0 ? authority.slice(at + 1) : authority;
  const params = new URLSearchParams(query ?? '');

  let entries: { host: string; port: string | null }[];
  const hostParam = params.get('host');
  if (hostParam !== null) entries = hostParam.split(',').map((h) => ({ host: h.trim(), port: null }));
  else entries = list === '' ? [{ host: '', port: null }] : list.split(',').map(hostEntry);
  if (entries.length > 1 && entries.some((e) => e.host === '')) throw new DatabaseUrlError('has an empty host in its host list (h1:5432,h2:5432: no empty entry, no trailing comma)');

  const portParam = params.get('port');
  const ports = portParam === null ? null : portParam.split(',').map((p) => p.trim());
  if (ports && ports.length !== 1 && ports.length !== entries.length) {
    throw new DatabaseUrlError(`names ${entries.length} hosts and ${ports.length} ports: give one port for all or one per host`);
  }
  const hosts = entries.map((e, i): DatabaseHost => {
    const p = ports ? ports[ports.length === 1 ? 0 : i]! : e.port;
    const label = e.host || 'localhost';
    return { host: label, port: p === null || p === '' ? DEFAULT_PORT : port(p, label) };
  });

  const attrs = params.get('target_session_attrs') ?? 'read-write';
  if (!SESSION_ATTRS.includes(attrs)) throw new DatabaseUrlError(`has target_session_attrs=${attrs}, which libpq does not know`);
  if (use === 'write' && attrs !== 'read-write' && attrs !== 'primary') {
    throw new DatabaseUrlError(`has target_session_attrs=${attrs}: Reef writes, so it connects to a writable host only (read-write, the default, or primary)`);
  }

  // Settings the driver reads (sslmode, application_name...) go to every host's URL; the host list
  // and the choice of host are Reef's.
  params.delete('host');
  params.delete('port');
  params.delete('target_session_attrs');
  const rest = params.toString();
  return {
    hosts,
    targetSessionAttrs: attrs,
    urlFor(h) {
      if (h.host.startsWith('/')) {
        // A socket directory cannot stand in the authority: node-postgres takes it from `host=`,
        // which wins over the authority's name.
        const q = new URLSearchParams(rest);
        q.set('host', h.host);
        q.set('port', String(h.port));
        return `${scheme}://${userinfo}localhost${path}?${q.toString()}`;
      }
      const host = h.host.includes(':') ? `[${h.host}]` : encodeURIComponent(h.host);
      return `${scheme}://${userinfo}${host}:${h.port}${path}${rest ? `?${rest}` : ''}`;
    },
  };
}

/** Why a host was not used, in words (a driver or network error met while connecting to it). */
export function describeHostError(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown };
  const code = typeof err?.code === 'string' ? err.code : '';
  const msg = typeof err?.message === 'string' ? err.message : String(e);
  switch (code) {
    case 'ECONNREFUSED':
      return 'refused connection';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host name not found';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'unreachable';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'closed the connection';
    case '28P01':
    case '28000':
      return `refused the login (${msg})`;
    case '3D000':
      return msg;
    case '57P03':
      return 'not accepting connections yet (starting up, shutting down or in recovery)';
    case '53300':
      return 'has too many connections';
  }
  if (code === 'ETIMEDOUT' || /timeout/i.test(msg)) return 'did not answer in time';
  if (/terminated|ended/i.test(msg)) return 'closed the connection';
  return code ? `${msg} (${code})` : msg;
}

/** The start-up error when no host of the list is writable: each host and what it is. */
export function noWritableHostMessage(states: readonly { host: DatabaseHost; state: string }[]): string {
  return `no writable PostgreSQL host: ${states.map((s) => `${hostLabel(s.host)} ${s.state}`).join('; ')}`;
}
