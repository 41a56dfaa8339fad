// Driver errors → the catalogue (src/core/errors.ts), so callers never see a pg error.
import { ReefError } from '../../core/errors.ts';

/** Node socket errors that mean "the server cannot be reached right now". */
const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

/** Messages pg raises without a SQLSTATE when a connection breaks or the pool cannot connect. */
const PG_CONNECTION = /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|Connection ended|terminating connection/i;

/** Seconds a client should wait before retrying after STORE_UNAVAILABLE. */
export const RETRY_AFTER_SECONDS = 1;

export function isUnavailable(e: unknown): boolean {
  const code = String((e as { code?: unknown })?.code ?? '');
  const msg = String((e as Error)?.message ?? '');
  if (NETWORK.has(code)) return true;
  // PostgreSQL SQLSTATEs (appendix A): class 08 connection exception; 57P01 admin shutdown,
  // 57P02 crash shutdown, 57P03 cannot connect now (starting up or shutting down); class 53
  // insufficient resources (too many connections, disk full); 57014 query cancelled (timeout);
  // 40001/40P01 serialization failure and deadlock, 55P03 lock not available: worth a retry.
  // 25006 read_only_sql_transaction: the host is a standby now (a failover); the next connection
  // goes to the new primary (hosts.ts), and 08001 is hosts.ts's "no host is writable now".
  if (/^08/.test(code) || /^57P0/.test(code) || /^53/.test(code) || code === '57014' || code === '40001' || code === '40P01' || code === '55P03' || code === '25006') return true;
  if (!code && PG_CONNECTION.test(msg)) return true;
  return false;
}

export function translate(e: unknown): never {
  if (e instanceof ReefError) throw e;
  const err = e as { code?: string; constraint?: string; message?: string };
  const code = err?.code ?? '';
  if (code === '23505') {
    if (err.constraint === 'devices_mac_key') throw new ReefError('MAC_ALREADY_PROVISIONED', undefined, { field: 'ssniMacAddress', cause: e });
    throw new ReefError('CONFLICT', 'an entry with the same key exists', { cause: e });
  }
  // PostgreSQL text and jsonb cannot hold U+0000 (22P05 in jsonb escapes, 22021 in text).
  if (code === '22P05' || code === '22021') throw new ReefError('VALIDATION_FAILED', 'text must not contain the NUL character (U+0000)', { cause: e });
  if (isUnavailable(e)) {
    throw new ReefError('STORE_UNAVAILABLE', 'the database is unreachable or restarting; retry shortly', { retryAfter: RETRY_AFTER_SECONDS, cause: e });
  }
  throw e;
}
