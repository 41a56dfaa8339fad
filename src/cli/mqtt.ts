// `reef mqtt sub|pub`: the MQTT broker with the login of `reef login` (docs/mqtt.md), for users
// without mosquitto-clients. The broker's address and the caller's tenant id come from GET /api/mqtt;
// the access token is the password (user name `notused`, as the original's clients send).
import mqtt, { type MqttClient } from 'mqtt';
import fs from 'node:fs';
import type { ReefClient } from '../sdk/index.ts';
import { UsageError, parseArgs, required } from './args.ts';
import { CliError, connect, flagInt, runClient, writeOut } from './client-config.ts';

const HELP = `Usage:
  reef mqtt sub [--topic FILTER]... [--count N] [--qos 0|1] [--json]
  reef mqtt pub --device ID (--message JSON | --file PATH | -)

sub prints each message as "<topic> <payload>" until Ctrl-C (or --count N messages); the default
filter is every kit payload of your tenant, <tenantId>/alert/+/+. A payload that is not text (a CBOR
reading) is printed as hex:<bytes>. --json prints one object per line:
{"topic","payload","encoding":"text"|"hex","retained"}.

pub sends {"observations":[...]} (the HTTP upload body) to the device's ingest topic
<tenantId>/solutions/<solution>/devices/<ID>/observations; "-" reads it from stdin. It publishes at
QoS 1 and waits for the broker's acknowledgement, which follows the store's commit. A refused message
is reported on <tenantId>/errors/<clientId>: pub listens there and exits 1 with the reason.

Common options:
  --solution NAME   solution of the device (pub; default: the one given to reef login, else sandbox)
  --endpoint URL    service to ask for the broker's address (default: reef login's; REEF_ENDPOINT)
  --broker URL      the broker itself (default: what the service says, e.g. mqtt://127.0.0.1:1883)

Exit codes: 0 ok, 1 failure (refused login or message, unreachable broker), 2 usage.
`;

interface ConnectInfo {
  url: string;
  tenantId: string;
}

async function open(client: ReefClient, endpoint: string, broker: string | undefined): Promise<{ c: MqttClient; info: ConnectInfo; clientId: string }> {
  const token = await client.getToken();
  const r = await fetch(`${endpoint}/api/mqtt`, { headers: { authorization: token } });
  if (r.status === 404) throw new CliError('this service runs no MQTT broker (REEF_MQTT=false)');
  if (!r.ok) throw new CliError(`GET /api/mqtt answered ${r.status}`);
  const info = (await r.json()) as ConnectInfo;
  const clientId = `reef-cli-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const url = broker ?? info.url;
  try {
    const c = await mqtt.connectAsync(url, { username: 'notused', password: token, clientId, protocolVersion: 4, reconnectPeriod: 0, connectTimeout: 10_000 });
    return { c, info, clientId };
  } catch (e) {
    throw new CliError(`cannot connect to ${url}: ${(e as Error).message}`);
  }
}

function show(topic: string, payload: Buffer, retained: boolean, json: boolean): string {
  const text = payload.toString('utf8');
  // Printable UTF-8 (what text readings and JSON are) as text; anything else as hex.
  const isText = Buffer.from(text, 'utf8').equals(payload) && !/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text);
  if (json) return JSON.stringify({ topic, payload: isText ? text : payload.toString('hex'), encoding: isText ? 'text' : 'hex', retained }) + '\n';
  return `${topic} ${isText ? text : `hex:${payload.toString('hex')}`}\n`;
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  // --topic may repeat: collected here, the shared parser keeps one value per option.
  const topics: string[] = [];
  const others: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--topic' && i + 1 < rest.length) topics.push(rest[++i]!);
    else if (rest[i]!.startsWith('--topic=')) topics.push(rest[i]!.slice('--topic='.length));
    else others.push(rest[i]!);
  }
  const args = parseArgs(others, { values: ['count', 'qos', 'device', 'message', 'file', 'solution', 'endpoint', 'broker'], booleans: ['json'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (sub !== 'sub' && sub !== 'pub') throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  const broker = args.flags.broker || undefined;

  if (sub === 'sub') {
    if (args.flags.device !== undefined || args.flags.message !== undefined || args.flags.file !== undefined) throw new UsageError('--device, --message and --file go with pub');
    const count = flagInt(args, 'count', 1, Number.MAX_SAFE_INTEGER);
    const qos = (flagInt(args, 'qos', 0, 1) ?? 0) as 0 | 1;
    const json = args.flags.json === 'true';
    return runClient('mqtt', async () => {
      const { client, conn } = connect(process.env, args);
      const { c, info } = await open(client, conn.endpoint, broker);
      const filters = topics.length ? topics : [`${info.tenantId}/alert/+/+`];
      let seen = 0;
      const done = new Promise<number>((resolve) => {
        c.on('message', (topic, payload, packet) => {
          if (count !== undefined && seen >= count) return;
          seen++;
          void writeOut(show(topic, payload, packet.retain, json));
          if (count !== undefined && seen >= count) resolve(0);
        });
        c.on('close', () => resolve(1));
        process.once('SIGINT', () => resolve(0));
        process.once('SIGTERM', () => resolve(0));
      });
      let granted: number[];
      try {
        granted = (await c.subscribeAsync(filters, { qos })).map((g) => g.qos);
      } catch (e) {
        granted = (e as { packet?: { granted?: number[] } }).packet?.granted ?? [];
      }
      const refused = filters.filter((_, i) => granted[i] === 128);
      if (refused.length) {
        await c.endAsync(true);
        throw new CliError(`the broker refused ${refused.map((f) => JSON.stringify(f)).join(', ')}: subscribe under your tenant id ${info.tenantId}`);
      }
      const code = await done;
      await c.endAsync(true).catch(() => undefined);
      if (code !== 0 && seen === 0) throw new CliError('the broker closed the connection (token expired or account disabled?)');
      return 0;
    });
  }

  // pub
  const device = required(args, 'device');
  if (topics.length || args.flags.count !== undefined || args.flags.qos !== undefined) throw new UsageError('--topic, --count and --qos go with sub');
  const given = [args.flags.message !== undefined, args.flags.file !== undefined, args.positional[0] === '-'].filter(Boolean).length;
  if (given !== 1) throw new UsageError('give the observations as --message JSON, --file PATH or - (stdin)');
  const body = args.flags.message !== undefined ? args.flags.message : fs.readFileSync(args.flags.file !== undefined ? args.flags.file : 0, 'utf8');
  return runClient('mqtt', async () => {
    const { client, conn } = connect(process.env, args);
    const { c, info, clientId } = await open(client, conn.endpoint, broker);
    try {
      const errorsTopic = `${info.tenantId}/errors/${clientId}`;
      let refusal: string | null = null;
      c.on('message', (topic, payload) => {
        if (topic !== errorsTopic) return;
        const e = JSON.parse(payload.toString('utf8')) as { code: string; message: string; field?: string; requestId: string };
        refusal = `${e.message} (${e.code}${e.field ? `, ${e.field}` : ''}, request id ${e.requestId})`;
      });
      await c.subscribeAsync(errorsTopic, { qos: 1 });
      const topic = `${info.tenantId}/solutions/${conn.solution}/devices/${device}/observations`;
      await c.publishAsync(topic, body, { qos: 1 });
      // The broker sends a refusal's reason before the acknowledgement (docs/mqtt.md): it is here by now.
      if (refusal) throw new CliError(`refused: ${refusal}`);
      process.stderr.write(`stored (acknowledged by ${broker ?? info.url})\n`);
      return 0;
    } finally {
      await c.endAsync(true).catch(() => undefined);
    }
  });
}
