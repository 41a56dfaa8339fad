// The retention rule, one place for every backend and the HTTP route (docs/storage.md "Retention
// and upkeep"): a solution keeps its observations for a whole number of days, or forever (null);
// an observation is expired once it is older than that many days before now.
import { ReefError } from '../core/errors.ts';

const DAY_MS = 86_400_000;
export const RETENTION_MIN_DAYS = 1;
export const RETENTION_MAX_DAYS = 36_500;

/** VALIDATION_FAILED unless `days` is a whole number from RETENTION_MIN_DAYS to RETENTION_MAX_DAYS, or null. */
export function checkRetention(days: number | null): void {
  if (days !== null && (!Number.isInteger(days) || days < RETENTION_MIN_DAYS || days > RETENTION_MAX_DAYS)) {
    throw new ReefError('VALIDATION_FAILED', `retention must be a whole number of days from ${RETENTION_MIN_DAYS} to ${RETENTION_MAX_DAYS}, or null`, { field: 'retention' });
  }
}

/** The oldest timestamp a retention of `days` keeps as of `now`: anything before it has expired. */
export function retentionCutoff(now: number, days: number): number {
  return now - days * DAY_MS;
}
