// `reef simulate`: starts (and lists, shows, stops) Studio simulations of a running service over
// HTTP (docs/simulation.md). With --backfill it draws a progress bar until the history is written,
// then prints a summary; the simulation keeps running in the service.
import { ReefClient, isApiError } from '../sdk/index.ts';
import { UsageError, parseArgs } from './args.ts';
import type { Simulation } from '../sdk/index.ts';

const HELP = `Usage:
  reef simulate --devices N --interval 10s [options]   start a simulation
  reef simulate list                                    the account's simulations
  reef simulate status ID                               one simulation
  reef simulate stop ID                                 stop one (its devices and readings stay)

Start options:
  --devices N          virtual devices (1..10000)
  --interval D         reporting interval: 500ms, 10s, 5m, 1h (at least 1s)
  --backfill D         write this much history first (e.g. 7d), with a progress bar
  --duration D         run live this long, then complete (default: until stopped)
  --area A             LAT,LON,RADIUS_KM (a circle) or SOUTH,WEST,NORTH,EAST (a box);
                       default Lisbon, 20 km
  --seed S             same seed, same devices and readings (default random)
  --profile P          outdoor (default) or indoor
  --name NAME          a label
  --wait               also wait until a --duration is over
  --json               print the simulation as JSON (progress still goes to stderr)

Connection (or REEF_ENDPOINT, REEF_CLIENT_ID, REEF_CLIENT_SECRET):
  --endpoint URL       the service, e.g. http://127.0.0.1:8080
  --client-id ID       account credentials (reef serve prints the demo account's)
  --client-secret S
`;

const FLAGS = ['devices', 'interval', 'backfill', 'duration', 'area', 'seed', 'profile', 'name', 'wait', 'json', 'endpoint', 'client-id', 'client-secret'];
const SOLUTION = 'StudioSimulation';
const POLL_MS = 500;

export interface SimulateIo {
  out?: (s: string) => void;
  err?: (s: string) => void;
  env?: Record<string, string | undefined>;
  /** Draw the progress bar in place (a terminal) rather than as occasional lines. */
  tty?: boolean;
  /** Poll period, ms (tests shorten it). */
  pollMs?: number;
}

export function parseAreaFlag(v: string): Record<string, unknown> {
  const parts = v.split(',').map((p) => p.trim());
  const nums = parts.map(Number);
  if (parts.some((p) => p === '') || nums.some((n) => !Number.isFinite(n)) || (nums.length !== 3 && nums.length !== 4)) {
    throw new UsageError('--area must be LAT,LON,RADIUS_KM or SOUTH,WEST,NORTH,EAST (numbers)');
  }
  if (nums.length === 3) return { center: { latitude: nums[0], longitude: nums[1] }, radiusKm: nums[2] };
  return { south: nums[0], west: nums[1], north: nums[2], east: nums[3] };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function duration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number.isInteger(s) ? s : s.toFixed(1)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${Math.round(s % 60)}s` : ''}`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${s % 3600 ? ` ${Math.round((s % 3600) / 60)}m` : ''}`;
  return `${Math.floor(s / 86400)}d${s % 86400 ? ` ${Math.round((s % 86400) / 3600)}h` : ''}`;
}

export function progressBar(done: number, total: number, width = 30): string {
  const f = total > 0 ? Math.min(1, done / total) : 1;
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(1).padStart(5)}%`;
}

class Api {
  constructor(
    private readonly client: ReefClient,
    private readonly endpoint: string,
  ) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const token = await this.client.getToken();
    let r: Response;
    try {
      r = await fetch(`${this.endpoint}/api/solutions/${SOLUTION}/simulations${path}`, {
        method,
        headers: { authorization: token, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (e) {
      throw new CliError(`cannot reach ${this.endpoint}: ${(e as Error).message}`);
    }
    const text = await r.text();
    const data = text ? JSON.parse(text) : undefined;
    if (!r.ok) {
      const field = data?.field ? ` (field ${data.field})` : '';
      throw new CliError(`${data?.message ?? `HTTP ${r.status}`}${field} [${data?.code ?? r.status}]`);
    }
    return data as T;
  }
}

class CliError extends Error {}

function connection(flags: Record<string, string>, env: Record<string, string | undefined>): { endpoint: string; clientId: string; clientSecret: string } {
  const endpoint = (flags.endpoint ?? env.REEF_ENDPOINT ?? '').replace(/\/+$/, '');
  const clientId = flags['client-id'] ?? env.REEF_CLIENT_ID ?? '';
  const clientSecret = flags['client-secret'] ?? env.REEF_CLIENT_SECRET ?? '';
  if (!/^https?:\/\//.test(endpoint)) throw new UsageError('--endpoint (or REEF_ENDPOINT) must be the service URL, e.g. http://127.0.0.1:8080');
  if (!clientId || clientId === 'true') throw new UsageError('--client-id (or REEF_CLIENT_ID) is required');
  if (!clientSecret || clientSecret === 'true') throw new UsageError('--client-secret (or REEF_CLIENT_SECRET) is required');
  return { endpoint, clientId, clientSecret };
}

function summary(sim: Simulation, extra: string[] = []): string {
  const p = sim.params;
  const lines = [
    `Simulation ${sim.id}${sim.name ? ` (${sim.name})` : ''}: ${sim.status}`,
    `  devices:      ${fmt(sim.devices)} VirtualDevice in ${SOLUTION}, every ${duration(p.intervalMs)}`,
    `  area:         ${p.area.kind === 'circle' ? `${p.area.center.latitude}, ${p.area.center.longitude} within ${p.area.radiusKm} km` : `${p.area.south},${p.area.west} to ${p.area.north},${p.area.east}`}`,
    `  seed:         ${p.seed} (${p.profile.kind})`,
    ...extra,
    `  readings:     ${fmt(sim.observationsProduced)} so far`,
  ];
  if (sim.endsAt) lines.push(`  ends:         ${sim.endsAt}`);
  if (sim.error) lines.push(`  error:        ${sim.error}`);
  if (sim.status === 'running' || sim.status === 'backfilling') lines.push(`  stop it with: reef simulate stop ${sim.id}`);
  return lines.join('\n');
}

export async function run(argv: string[], io: SimulateIo = {}): Promise<number> {
  const out = io.out ?? ((s: string) => process.stdout.write(s));
  const err = io.err ?? ((s: string) => process.stderr.write(s));
  const env = io.env ?? process.env;
  const tty = io.tty ?? Boolean(process.stderr.isTTY);
  const pollMs = io.pollMs ?? POLL_MS;
  const args = parseArgs(argv, FLAGS);
  if (args.flags.help) {
    out(HELP);
    return 0;
  }
  const [cmd = 'start', id, ...rest] = args.positional;
  if (rest.length) throw new UsageError(`unexpected ${rest.join(' ')}`);
  const conn = connection(args.flags, env);
  const api = new Api(new ReefClient({ endpoint: conn.endpoint, credentials: { clientId: conn.clientId, clientSecret: conn.clientSecret } }), conn.endpoint);
  const json = args.flags.json === 'true';

  try {
    if (cmd === 'list') {
      const { simulations } = await api.call<{ simulations: Simulation[] }>('GET', '');
      if (json) out(JSON.stringify(simulations, null, 2) + '\n');
      else if (!simulations.length) out('No simulations.\n');
      else {
        const rows = simulations.map((s) => [s.id, s.status, String(s.devices), duration(s.params.intervalMs), fmt(s.observationsProduced), s.startedAt, s.name ?? '']);
        const head = ['ID', 'STATUS', 'DEVICES', 'INTERVAL', 'READINGS', 'STARTED', 'NAME'];
        const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
        for (const r of [head, ...rows]) out(r.map((c, i) => c.padEnd(w[i]!)).join('  ').trimEnd() + '\n');
      }
      return 0;
    }
    if (cmd === 'status' || cmd === 'stop') {
      if (!id) throw new UsageError(`reef simulate ${cmd} needs the simulation id`);
      const sim = cmd === 'stop' ? await api.call<Simulation>('DELETE', `/${encodeURIComponent(id)}`) : await api.call<Simulation>('GET', `/${encodeURIComponent(id)}`);
      if (json) out(JSON.stringify({ ...sim, deviceIds: undefined }, null, 2) + '\n');
      else out(summary(sim, sim.backfill ? [`  backfill:     ${fmt(sim.backfill.done)} of ${fmt(sim.backfill.total)}`] : []) + '\n');
      return sim.status === 'failed' ? 1 : 0;
    }
    if (cmd !== 'start' && cmd !== 'create') throw new UsageError(`unknown action ${JSON.stringify(cmd)}: use list, status ID, stop ID, or start options`);
    if (id) throw new UsageError(`unexpected ${id}`);

    const body: Record<string, unknown> = {};
    const devices = args.flags.devices;
    if (devices === undefined || devices === 'true') throw new UsageError('--devices is required');
    body.devices = /^\d+$/.test(devices) ? Number(devices) : devices;
    if (args.flags.interval === undefined || args.flags.interval === 'true') throw new UsageError('--interval is required (e.g. 10s)');
    body.interval = args.flags.interval;
    for (const k of ['backfill', 'duration', 'seed', 'profile', 'name'] as const) {
      const v = args.flags[k];
      if (v === 'true') throw new UsageError(`--${k} needs a value`);
      if (v !== undefined) body[k] = v;
    }
    if (args.flags.area !== undefined) body.area = parseAreaFlag(args.flags.area);

    const t0 = Date.now();
    let sim = await api.call<Simulation>('POST', '', body);
    if (!json) err(`Started simulation ${sim.id}: ${fmt(sim.devices)} devices every ${duration(sim.params.intervalMs)}\n`);
    const extra: string[] = [];

    if (sim.backfill) {
      const total = sim.backfill.total;
      let lastLine = -1;
      for (;;) {
        const done = sim.backfill?.done ?? total;
        const secs = (Date.now() - t0) / 1000;
        const rate = secs > 0 ? done / secs : 0;
        const eta = rate > 0 ? ` ETA ${duration(Math.round(((total - done) / rate) * 1000))}` : '';
        const line = `${progressBar(done, total)} ${fmt(done)}/${fmt(total)} readings ${fmt(rate)}/s${done < total ? eta : ''}`;
        if (tty) err(`\r${line}\x1b[K`);
        else if (Math.floor((done / Math.max(1, total)) * 10) !== lastLine) {
          lastLine = Math.floor((done / Math.max(1, total)) * 10);
          err(line + '\n');
        }
        if (sim.status !== 'backfilling') break;
        await new Promise((r) => setTimeout(r, pollMs));
        sim = await api.call<Simulation>('GET', `/${sim.id}`);
      }
      if (tty) err('\n');
      const secs = (Date.now() - t0) / 1000;
      extra.push(`  backfill:     ${fmt(total)} readings in ${secs.toFixed(1)} s (${fmt(total / Math.max(secs, 0.001))}/s)`);
    }

    if (args.flags.wait === 'true' && sim.endsAt) {
      while (sim.status === 'running' || sim.status === 'backfilling') {
        if (tty) err(`\r${sim.status}: ${fmt(sim.observationsProduced)} readings, ends ${sim.endsAt}\x1b[K`);
        await new Promise((r) => setTimeout(r, pollMs));
        sim = await api.call<Simulation>('GET', `/${sim.id}`);
      }
      if (tty) err('\n');
    }
    if (json) out(JSON.stringify(sim, null, 2) + '\n');
    else out(summary(sim, extra) + '\n');
    return sim.status === 'failed' ? 1 : 0;
  } catch (e) {
    if (e instanceof CliError || isApiError(e)) {
      err(`reef simulate: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}
