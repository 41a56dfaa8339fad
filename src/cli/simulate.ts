// `reef simulate`: starts (and lists, shows, stops) Studio simulations of a running service through
// the SDK (docs/simulation.md), with the connection every client command uses (`reef login`, or
// REEF_ENDPOINT / REEF_CLIENT_ID / REEF_CLIENT_SECRET / REEF_TOKEN). With --backfill it draws a
// progress bar until the history is written, then prints a summary; the simulation keeps running
// in the service.
import { formatDuration } from '../core/duration.ts';
import type { NewSimulation, ReefClient, Simulation, SimulationArea } from '../sdk/index.ts';
import { UsageError, parseArgs, printTable } from './args.ts';
import { connect, runClient, type Env } from './client-config.ts';
import { Progress, formatCount } from './progress.ts';

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

Connection: what reef login stored, or REEF_ENDPOINT with REEF_CLIENT_ID and
REEF_CLIENT_SECRET (or REEF_TOKEN), as for every client command.
  --endpoint URL       the service, e.g. http://127.0.0.1:8080
`;

const SPEC = { values: ['devices', 'interval', 'backfill', 'duration', 'area', 'seed', 'profile', 'name', 'endpoint'], booleans: ['wait', 'json'] } as const;
const SOLUTION = 'StudioSimulation';
const POLL_MS = 500;

export interface SimulateIo {
  out?: (s: string) => void;
  err?: (s: string) => void;
  env?: Env;
  /** Draw the progress bar in place (a terminal) rather than as occasional lines. */
  tty?: boolean;
  /** Poll period, ms (tests shorten it). */
  pollMs?: number;
}

export function parseAreaFlag(v: string): SimulationArea {
  const parts = v.split(',').map((p) => p.trim());
  const nums = parts.map(Number);
  if (parts.some((p) => p === '') || nums.some((n) => !Number.isFinite(n)) || (nums.length !== 3 && nums.length !== 4)) {
    throw new UsageError('--area must be LAT,LON,RADIUS_KM or SOUTH,WEST,NORTH,EAST (numbers)');
  }
  const [a, b, c, d] = nums as [number, number, number, number?];
  if (d === undefined) return { center: { latitude: a, longitude: b }, radiusKm: c };
  return { south: a, west: b, north: c, east: d };
}

function summary(sim: Simulation, extra: string[] = []): string {
  const p = sim.params;
  const lines = [
    `Simulation ${sim.id}${sim.name ? ` (${sim.name})` : ''}: ${sim.status}`,
    `  devices:      ${formatCount(sim.devices)} VirtualDevice in ${SOLUTION}, every ${formatDuration(p.intervalMs)}`,
    `  area:         ${p.area.kind === 'circle' ? `${p.area.center.latitude}, ${p.area.center.longitude} within ${p.area.radiusKm} km` : `${p.area.south},${p.area.west} to ${p.area.north},${p.area.east}`}`,
    `  seed:         ${p.seed} (${p.profile.kind})`,
    ...extra,
    `  readings:     ${formatCount(sim.observationsProduced)} so far`,
  ];
  if (sim.endsAt) lines.push(`  ends:         ${sim.endsAt}`);
  if (sim.error) lines.push(`  error:        ${sim.error}`);
  if (sim.status === 'running' || sim.status === 'backfilling') lines.push(`  stop it with: reef simulate stop ${sim.id}`);
  return lines.join('\n');
}

/** The start request from the flags; the service checks the values (a 400 names the field). */
function startRequest(flags: Record<string, string>): NewSimulation {
  const devices = flags.devices;
  if (devices === undefined) throw new UsageError('--devices is required');
  if (flags.interval === undefined) throw new UsageError('--interval is required (e.g. 10s)');
  // A non-number goes to the service as given, so its answer names the field.
  const body = { devices: /^\d+$/.test(devices) ? Number(devices) : devices, interval: flags.interval } as unknown as NewSimulation;
  for (const k of ['backfill', 'duration', 'seed', 'name'] as const) if (flags[k] !== undefined) body[k] = flags[k];
  if (flags.profile !== undefined) body.profile = flags.profile as NewSimulation['profile'] & string;
  if (flags.area !== undefined) body.area = parseAreaFlag(flags.area);
  return body;
}

async function start(client: ReefClient, flags: Record<string, string>, io: Required<Omit<SimulateIo, 'env'>>): Promise<number> {
  const json = flags.json === 'true';
  const sleep = () => new Promise((r) => setTimeout(r, io.pollMs));
  let sim = await client.createSimulation(startRequest(flags));
  if (!json) io.err(`Started simulation ${sim.id}: ${formatCount(sim.devices)} devices every ${formatDuration(sim.params.intervalMs)}\n`);
  const extra: string[] = [];
  const stream = { isTTY: io.tty, write: (s: string) => (io.err(s), true) };

  if (sim.backfill) {
    const total = sim.backfill.total;
    const bar = new Progress('', total, 'readings', stream, { lines: true });
    for (;;) {
      bar.update(sim.backfill?.done ?? total, true);
      if (sim.status !== 'backfilling') break;
      await sleep();
      sim = await client.getSimulation(sim.id);
    }
    bar.finish(true);
    const secs = bar.elapsed();
    extra.push(`  backfill:     ${formatCount(total)} readings in ${secs.toFixed(1)} s (${formatCount(total / Math.max(secs, 0.001))}/s)`);
  }

  if (flags.wait === 'true' && sim.endsAt) {
    while (sim.status === 'running' || sim.status === 'backfilling') {
      if (io.tty) io.err(`\r${sim.status}: ${formatCount(sim.observationsProduced)} readings, ends ${sim.endsAt}\x1b[K`);
      await sleep();
      sim = await client.getSimulation(sim.id);
    }
    if (io.tty) io.err('\n');
  }
  io.out((json ? JSON.stringify(sim, null, 2) : summary(sim, extra)) + '\n');
  return sim.status === 'failed' ? 1 : 0;
}

export async function run(argv: string[], io: SimulateIo = {}): Promise<number> {
  const out = io.out ?? ((s: string) => void process.stdout.write(s));
  const err = io.err ?? ((s: string) => void process.stderr.write(s));
  const env = io.env ?? process.env;
  const args = parseArgs(argv, SPEC);
  if (args.flags.help) {
    out(HELP);
    return 0;
  }
  const [cmd = 'start', id, ...rest] = args.positional;
  if (rest.length) throw new UsageError(`unexpected ${rest.join(' ')}`);
  if ((cmd === 'status' || cmd === 'stop') && !id) throw new UsageError(`reef simulate ${cmd} needs the simulation id`);
  if (!['list', 'status', 'stop', 'start', 'create'].includes(cmd)) throw new UsageError(`unknown action ${JSON.stringify(cmd)}: use list, status ID, stop ID, or start options`);
  if ((cmd === 'start' || cmd === 'create' || cmd === 'list') && id) throw new UsageError(`unexpected ${id}`);
  const json = args.flags.json === 'true';

  return runClient(
    'simulate',
    async () => {
      const { client } = connect(env, args);
      if (cmd === 'list') {
        const simulations = await client.listSimulations();
        if (json) out(JSON.stringify(simulations, null, 2) + '\n');
        else if (!simulations.length) out('No simulations.\n');
        else {
          const rows = simulations.map((s) => ({
            id: s.id,
            status: s.status,
            devices: s.devices,
            interval: formatDuration(s.params.intervalMs),
            readings: formatCount(s.observationsProduced),
            started: s.startedAt,
            name: s.name ?? '',
          }));
          printTable(rows, ['id', 'status', 'devices', 'interval', 'readings', 'started', 'name'], out);
        }
        return 0;
      }
      if (cmd === 'status' || cmd === 'stop') {
        const sim = cmd === 'stop' ? await client.stopSimulation(id!) : await client.getSimulation(id!);
        if (json) out(JSON.stringify({ ...sim, deviceIds: undefined }, null, 2) + '\n');
        else out(summary(sim, sim.backfill ? [`  backfill:     ${formatCount(sim.backfill.done)} of ${formatCount(sim.backfill.total)}`] : []) + '\n');
        return sim.status === 'failed' ? 1 : 0;
      }
      return start(client, args.flags, { out, err, tty: io.tty ?? Boolean(process.stderr.isTTY), pollMs: io.pollMs ?? POLL_MS });
    },
    err,
  );
}
