// `reef coap get|put|observe`: CoAP requests to a dev kit through the gateway's HTTP bridge
// (docs/coap.md), with the login of `reef login` — no CoAP session or UDP port needed.
import type { CoapResponse, ReefClient } from '../sdk/index.ts';
import { UsageError, parseArgs, required } from './args.ts';
import { CliError, connect, flagInt, runClient, writeOut } from './client-config.ts';

const HELP = `Usage:
  reef coap get --device ID|MAC RESOURCE [--json]
  reef coap put --device ID|MAC RESOURCE [--payload TEXT] [--content-format N] [--json]
  reef coap observe --device ID|MAC RESOURCE [--count N] [--json]

RESOURCE is the kit's path and CoAP query, with or without its snsr/sensor prefix (seed §4.4):
  reef coap get --device $ID 'snsr/arduino/temp?sens'      read the temperature
  reef coap put --device $ID 'snsr/arduino/temp?cfg=C'     set the unit to Celsius (cfg=F: Fahrenheit)
  reef coap get --device $ID 'snsr/arduino/temp?cfg'       read the unit
  reef coap get --device $ID snsr/system/time              read the kit's clock
  reef coap observe --device $ID 'snsr/arduino/temp?sens'  one line per notification until Ctrl-C

--device takes the device id or the kit's 16-hex MAC. --json prints the bridge's JSON (observe: one
object per line). --count N stops observing after N notifications.

Common options:
  --solution NAME   solution of the kit (default: the one given to reef login, else sandbox)
  --endpoint URL    service to call (default: the one given to reef login; REEF_ENDPOINT)

Exit codes: 0 ok, 1 failure (the kit answered an error, timed out, is offline or unknown), 2 usage.
`;

const MAC = /^[0-9a-fA-F]{2}([:-]?[0-9a-fA-F]{2}){7}$/;

/** A device id, or the id of the kit with this MAC in the solution. */
async function resolveDevice(client: ReefClient, given: string): Promise<string> {
  if (!MAC.test(given)) return given;
  const mac = given.replace(/[:-]/g, '').toLowerCase();
  const hit = await client.findDeviceByMac(mac);
  if (!hit) throw new CliError(`no dev kit with MAC ${mac} in solution ${client.solution}`);
  return hit.id;
}

function describe(r: CoapResponse): string {
  let s = `${r.code} ${r.codeName}`.trim();
  if (r.payload !== null) s += r.payloadEncoding === 'base64' ? `  base64:${r.payload}` : `  ${r.payload}`;
  if (r.reading) s += `  (${r.reading.value} ${r.reading.unit} at ${new Date(r.reading.epoch * 1000).toISOString()})`;
  return s;
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['device', 'payload', 'content-format', 'count', 'solution', 'endpoint'], booleans: ['json'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!['get', 'put', 'observe'].includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  const device = required(args, 'device');
  if (args.positional.length !== 1) throw new UsageError(`${sub} needs one RESOURCE, e.g. 'snsr/arduino/temp?sens'`);
  const resource = args.positional[0]!;
  if (sub !== 'put' && (args.flags.payload !== undefined || args.flags['content-format'] !== undefined)) throw new UsageError('--payload and --content-format go with put');
  if (sub !== 'observe' && args.flags.count !== undefined) throw new UsageError('--count goes with observe');
  const contentFormat = flagInt(args, 'content-format', 0, 65535);
  const count = flagInt(args, 'count', 1, Number.MAX_SAFE_INTEGER);
  const json = args.flags.json === 'true';

  return runClient('coap', async () => {
    const { client } = connect(process.env, args);
    const id = await resolveDevice(client, device);
    if (sub === 'get' || sub === 'put') {
      const body = args.flags.payload !== undefined ? { payload: args.flags.payload, ...(contentFormat !== undefined ? { contentFormat } : {}) } : undefined;
      const r = sub === 'get' ? await client.coapGet(id, resource) : await client.coapPut(id, resource, body);
      await writeOut(json ? JSON.stringify(r, null, 2) + '\n' : describe(r) + '\n');
      return 0;
    }
    // observe: until Ctrl-C, --count, or the service ends the observation.
    const ac = new AbortController();
    const stop = () => ac.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    let seen = 0;
    let ended: string | null = null;
    try {
      for await (const n of client.coapObserve(id, resource, { signal: ac.signal, onEnd: (reason) => (ended = reason) })) {
        await writeOut(json ? JSON.stringify(n) + '\n' : `${new Date().toISOString()}  ${describe(n)}${n.observe !== undefined ? `  observe ${n.observe}` : ''}\n`);
        if (count !== undefined && ++seen >= count) break;
      }
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
    if (ended && !json) process.stderr.write(`observation ended: ${ended}\n`);
    return 0;
  });
}
