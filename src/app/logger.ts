// The one place the service's logger is made (docs/operations.md "Metrics and logs"): JSON lines for
// log collectors, or lines for people (pino-pretty) when standard output is a terminal; an operator
// forces either with REEF_LOG_FORMAT. Secrets are never logged.
import pino, { type Logger } from 'pino';
import type { Config } from '../config/config.ts';

const REDACT = { paths: ['*.clientSecret', '*.accessToken', 'req.headers.authorization', 'req.headers["x-reef-admin-key"]'], censor: '[redacted]' };

/** The format the logger writes: the setting, or for `auto` pretty exactly when the output is a terminal. */
export function logFormat(setting: Config['logFormat'], isTTY: boolean): 'json' | 'pretty' {
  return setting === 'auto' ? (isTTY ? 'pretty' : 'json') : setting;
}

/**
 * The service's logger on `out` (standard output). pino-pretty is loaded only for the pretty format,
 * and writes synchronously: a line logged just before the process exits is not lost.
 */
export async function createLogger(config: Pick<Config, 'logLevel' | 'logFormat'>, out: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout): Promise<Logger> {
  const opts = { level: config.logLevel, redact: REDACT };
  if (logFormat(config.logFormat, out.isTTY === true) === 'json') return out === process.stdout ? pino(opts) : pino(opts, out);
  const { default: pretty } = await import('pino-pretty');
  return pino(opts, pretty({ destination: out, sync: true, colorize: out.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
}
