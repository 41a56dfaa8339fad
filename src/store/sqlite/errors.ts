// Driver errors → the catalogue (src/core/errors.ts), so callers never see a better-sqlite3 error.
import { ReefError } from '../../core/errors.ts';

export function translate(e: unknown): never {
  const code = (e as { code?: string })?.code ?? '';
  const msg = (e as Error)?.message ?? '';
  if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    if (msg.includes('devices.mac')) throw new ReefError('MAC_ALREADY_PROVISIONED', undefined, { field: 'ssniMacAddress', cause: e });
    throw new ReefError('CONFLICT', 'an entry with the same key exists', { cause: e });
  }
  if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_IOERR' || code === 'SQLITE_FULL') {
    throw new ReefError('STORE_UNAVAILABLE', 'the database is busy or unavailable; retry shortly', { retryAfter: 1, cause: e });
  }
  if (e instanceof TypeError && /database connection is not open/.test(msg)) {
    throw new ReefError('STORE_UNAVAILABLE', 'the database is closed (the service is shutting down)', { retryAfter: 1, cause: e });
  }
  throw e;
}

/** The catalogue error a driver error stands for. */
export function translated(e: unknown): unknown {
  try {
    translate(e);
  } catch (t) {
    return t;
  }
}
