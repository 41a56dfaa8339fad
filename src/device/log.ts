// Kit log levels 0..7 as the firmware has them (wire §2): EMRG, ALRT, CRIT, ERR, WARN, NOTE, INFO,
// DEBG. LOG_LEVEL is the most verbose severity printed; 0 mutes everything. Output goes to the
// "serial monitor" (a sink) only once one is attached (seed §4.4: within 15 s of reset).

export const LEVEL_NAMES = ['EMRG', 'ALRT', 'CRIT', 'ERR', 'WARN', 'NOTE', 'INFO', 'DEBG'] as const;
export const EMRG = 0;
export const ALRT = 1;
export const CRIT = 2;
export const ERR = 3;
export const WARN = 4;
export const NOTE = 5;
export const INFO = 6;
export const DEBG = 7;

export type LogSink = (line: string) => void;

export class DeviceLog {
  sink: LogSink | undefined;
  constructor(
    public level: number,
    public readonly prefix = '',
    sink?: LogSink,
  ) {
    this.sink = sink;
  }

  /** True when a message of this severity would be printed: callers skip building costly traces. */
  on(severity: number): boolean {
    return this.sink !== undefined && this.level > 0 && severity <= this.level;
  }

  log(severity: number, msg: string): void {
    if (!this.on(severity)) return;
    this.sink!(`${new Date().toISOString()} ${LEVEL_NAMES[severity]} ${this.prefix}${msg}`);
  }

  err(msg: string): void {
    this.log(ERR, msg);
  }
  warn(msg: string): void {
    this.log(WARN, msg);
  }
  note(msg: string): void {
    this.log(NOTE, msg);
  }
  info(msg: string): void {
    this.log(INFO, msg);
  }
  debug(msg: string): void {
    this.log(DEBG, msg);
  }
}
