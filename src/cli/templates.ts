// `reef templates list|get|create|update|delete|system`: the device templates of a solution
// (docs/api.md "Device templates"), through the SDK against a running service.
import { UsageError, parseArgs, printJson, printTable } from './args.ts';
import { connect, runClient } from './client-config.ts';
import type { DeviceTemplate, TemplateSensor } from '../sdk/index.ts';

const HELP = `Usage:
  reef templates list [--json]                              templates of the solution
  reef templates system [--json]                            the static templates every tenant sees
  reef templates get ID [--json]                            one template
  reef templates create --name NAME --sensors A,B[,...] [--json]
  reef templates update ID --name NAME --sensors A,B[,...] [--json]
  reef templates delete ID                                  delete a template

--sensors takes sensor names separated by commas (e.g. temperature,humidity); --sensors-json takes
the sensors as a JSON array instead (e.g. '[{"name":"temperature","unit":"C"}]').

Common options:
  --solution NAME   solution to address (default: the one given to reef login, else sandbox)
  --endpoint URL    service to call (default: the one given to reef login; REEF_ENDPOINT)
  --json            machine-readable output

Exit codes: 0 ok, 1 failure (the service refused, or could not be reached), 2 usage.
`;

function sensorName(s: TemplateSensor): string {
  return typeof s === 'string' ? s : s.name;
}

function row(t: DeviceTemplate) {
  return { id: t.id ?? '', name: t.name, sensors: t.sensors.map(sensorName).join(',') };
}

function sensors(flags: Record<string, string>): TemplateSensor[] {
  if (flags['sensors-json'] !== undefined) {
    let v: unknown;
    try {
      v = JSON.parse(flags['sensors-json']);
    } catch {
      throw new UsageError('--sensors-json must be a JSON array');
    }
    if (!Array.isArray(v)) throw new UsageError('--sensors-json must be a JSON array');
    return v as TemplateSensor[];
  }
  const list = flags.sensors;
  if (list === undefined || list === 'true') throw new UsageError('--sensors (or --sensors-json) is required');
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['name', 'sensors', 'sensors-json', 'solution', 'endpoint'], booleans: ['json'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!['list', 'system', 'get', 'create', 'update', 'delete'].includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  const json = args.flags.json === 'true';
  const needsId = sub === 'get' || sub === 'update' || sub === 'delete';
  if (needsId && args.positional.length !== 1) throw new UsageError(`${sub} needs one template id`);
  if (!needsId && args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
  const writes = sub === 'create' || sub === 'update';
  if (writes && (!args.flags.name || args.flags.name === 'true')) throw new UsageError('--name is required');
  const body = writes ? { name: args.flags.name!, sensors: sensors(args.flags) } : undefined;

  return runClient('templates', async () => {
    const { client, conn } = connect(process.env, args);
    const id = args.positional[0]!;
    let out: DeviceTemplate | DeviceTemplate[];
    switch (sub) {
      case 'list':
        out = await client.listDeviceTemplates();
        break;
      case 'system':
        out = await client.systemDeviceTemplates();
        break;
      case 'get':
        out = await client.getDeviceTemplate(id);
        break;
      case 'create':
        out = await client.createDeviceTemplate(body!);
        break;
      case 'update':
        out = await client.updateDeviceTemplate(id, body!);
        break;
      default: {
        const gone = await client.deleteDeviceTemplate(id);
        if (json) printJson(gone);
        else process.stdout.write(`deleted ${gone.id}\n`);
        return 0;
      }
    }
    if (json) printJson(out);
    else if (Array.isArray(out) && !out.length) process.stdout.write(sub === 'system' ? 'no static templates\n' : `no device templates in solution ${conn.solution}\n`);
    else if (sub === 'create' && !Array.isArray(out)) process.stdout.write(`${out.id}\n`);
    else printTable((Array.isArray(out) ? out : [out]).map(row), ['id', 'name', 'sensors']);
    return 0;
  });
}
