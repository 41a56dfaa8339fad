// `reef devices list|get|create|update|delete`: the devices of a solution, through the SDK against a
// running service (the endpoint and credentials `reef login` stored).
import { UsageError, parseArgs, printJson, printTable } from './args.ts';
import { CliError, connect, runClient } from './client-config.ts';
import { deviceMac, normalizeMac, type Device } from '../sdk/index.ts';

const HELP = `Usage:
  reef devices list [--type TYPE] [--json]            devices of the solution (optionally one type)
  reef devices get ID|MAC [--json]                    one device, by id or by MAC (any spelling)
  reef devices create --type TYPE [--lat N --lon N] [--mac MAC] [--json]
                                                      --mac sets domainInfo.nic_macID (16 lower-case hex)
  reef devices update ID [--type TYPE] [--lat N --lon N] [--template ID|none] [--domain-info JSON] [--json]
                                                      change a device: --domain-info is a JSON merge
                                                      patch of domainInfo (null removes a member)
  reef devices delete ID                              a device and its observations

Common options:
  --solution NAME   solution to address (default: the one given to reef login, else sandbox)
  --endpoint URL    service to call (default: the one given to reef login; REEF_ENDPOINT)
  --json            machine-readable output

Exit codes: 0 ok, 1 failure (the service refused, or could not be reached), 2 usage.
`;

function row(d: Device) {
  const loc = d.domainInfo?.location;
  return {
    id: d.id,
    type: d.deviceType,
    mac: deviceMac(d) ?? '',
    status: d.provisioningInfo?.status ?? '',
    location: loc ? `${loc.latitude},${loc.longitude}` : '',
  };
}

function coordinate(v: string | undefined, name: string, limit: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || Math.abs(n) > limit) throw new UsageError(`--${name} must be a number from -${limit} to ${limit}`);
  return n;
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['type', 'lat', 'lon', 'mac', 'template', 'domain-info', 'solution', 'endpoint'], booleans: ['json'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!['list', 'get', 'create', 'update', 'delete'].includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  const json = args.flags.json === 'true';
  const needsId = sub === 'get' || sub === 'delete' || sub === 'update';
  if (needsId && args.positional.length !== 1) throw new UsageError(`${sub} needs one device id`);
  if (!needsId && args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
  const lat = coordinate(args.flags.lat, 'lat', 90);
  const lon = coordinate(args.flags.lon, 'lon', 180);
  if ((lat === undefined) !== (lon === undefined)) throw new UsageError('give --lat and --lon together');
  if (sub === 'create' && !args.flags.type) throw new UsageError('--type is required');
  let patch: Record<string, unknown> = {};
  if (args.flags['domain-info'] !== undefined) {
    try {
      patch = JSON.parse(args.flags['domain-info']) as Record<string, unknown>;
    } catch {
      throw new UsageError('--domain-info must be a JSON object');
    }
    if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) throw new UsageError('--domain-info must be a JSON object');
  }
  if (sub === 'update') {
    if (lat !== undefined) patch.location = { latitude: lat, longitude: lon };
    if (args.flags.template !== undefined) patch.templateId = args.flags.template === 'none' || args.flags.template === '' ? null : args.flags.template;
    if (args.flags.type === undefined && !Object.keys(patch).length) throw new UsageError('update needs --type, --lat/--lon, --template or --domain-info');
  }
  const mac = args.flags.mac === undefined ? undefined : normalizeMac(args.flags.mac);
  if (mac === null) throw new UsageError('--mac must be 16 hexadecimal digits (":" or "-" separators allowed)');

  return runClient('devices', async () => {
    const { client, conn } = connect(process.env, args);
    switch (sub) {
      case 'list': {
        const list = await client.listDevices(args.flags.type ? { deviceType: args.flags.type } : {});
        if (json) printJson(list);
        else if (!list.length) process.stdout.write(`no devices in solution ${conn.solution}\n`);
        else printTable(list.map(row), ['id', 'type', 'mac', 'status', 'location']);
        return 0;
      }
      case 'get': {
        const given = args.positional[0]!;
        const byMac = normalizeMac(given);
        const d = byMac ? await client.findDeviceByMac(byMac) : await client.getDevice(given);
        if (!d) throw new CliError(`no device with MAC ${byMac} in solution ${conn.solution}`);
        if (json) printJson(d);
        else printTable([row(d)], ['id', 'type', 'mac', 'status', 'location']);
        return 0;
      }
      case 'create': {
        const domainInfo = { ...(lat !== undefined ? { location: { latitude: lat, longitude: lon! } } : {}), ...(mac ? { nic_macID: mac } : {}) };
        const d = await client.createDevice({ deviceType: args.flags.type!, ...(Object.keys(domainInfo).length ? { domainInfo } : {}) });
        if (json) printJson(d);
        else process.stdout.write(`${d.id}\n`);
        return 0;
      }
      case 'update': {
        const d = await client.updateDevice(args.positional[0]!, { ...(args.flags.type ? { deviceType: args.flags.type } : {}), ...(Object.keys(patch).length ? { domainInfo: patch } : {}) });
        if (json) printJson(d);
        else printTable([row(d)], ['id', 'type', 'mac', 'status', 'location']);
        return 0;
      }
      default: {
        await client.deleteDevice(args.positional[0]!);
        if (json) printJson({ deleted: args.positional[0]!.toLowerCase() });
        else process.stdout.write(`deleted ${args.positional[0]!.toLowerCase()}\n`);
        return 0;
      }
    }
  });
}
