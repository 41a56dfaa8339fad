// The `reef` command: one file per subcommand, loaded on demand so `reef device` never loads the
// HTTP server and `reef serve` never loads client code. Exit codes: 0 ok, 1 failure, 2 usage.
import { ReefError } from '../core/errors.ts';
import { ConfigError } from '../config/config.ts';
import { UsageError } from './args.ts';

type Run = (argv: string[]) => Promise<number>;

export const COMMANDS: Record<string, { summary: string; load: () => Promise<Run> }> = {
  serve: { summary: 'Run the platform service (HTTP API, CoAP gateway, simulations)', load: async () => (await import('./serve.ts')).run },
  account: { summary: 'Manage accounts: create, list, rotate-secret, disable, enable', load: async () => (await import('./account.ts')).run },
  provision: { summary: "Provision a dev kit to an account's sandbox", load: async () => (await import('./provision.ts')).run },
  device: { summary: 'Run simulated dev kits (CoAP server behind an HDLC network module)', load: async () => (await import('./device.ts')).run },
  simulate: { summary: 'Start, list and stop Studio simulations of a running service (virtual devices)', load: async () => (await import('./simulate.ts')).run },
  login: { summary: 'Remember a running service, client id and (in a 0600 file) secret for the client commands', load: async () => (await import('./login.ts')).run },
  logout: { summary: 'Forget what reef login stored', load: async () => (await import('./login.ts')).runLogout },
  devices: { summary: 'List, show, create, change and delete devices of a running service', load: async () => (await import('./devices.ts')).run },
  templates: { summary: 'List, show, create, update and delete device templates of a running service', load: async () => (await import('./templates.ts')).run },
  observations: { summary: "Get a device's observations (table, CSV, JSON, NDJSON) or upload a CSV/NDJSON file", load: async () => (await import('./observations.ts')).run },
  alarms: { summary: 'Alarm rules, alarms (list, acknowledge, clear) and webhook dead letters of a running service', load: async () => (await import('./alarms.ts')).run },
  coap: { summary: 'CoAP get, put and observe on a dev kit through the gateway (HTTP bridge)', load: async () => (await import('./coap.ts')).run },
  mqtt: { summary: "Subscribe to your kits' payloads, or publish observations, on the MQTT broker", load: async () => (await import('./mqtt.ts')).run },
};

function help(): string {
  const w = Math.max(...Object.keys(COMMANDS).map((k) => k.length));
  return [
    'Usage: reef <command> [options]',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([k, c]) => `  ${k.padEnd(w)}  ${c.summary}`),
    '',
    "Run 'reef <command> --help' for a command's options.",
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(help() + '\n');
    return cmd ? 0 : 2;
  }
  const entry = COMMANDS[cmd];
  if (!entry) {
    process.stderr.write(`reef: unknown command ${JSON.stringify(cmd)}\n\n${help()}\n`);
    return 2;
  }
  try {
    return await (await entry.load())(rest);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`reef ${cmd}: ${e.message}\n`);
      return 2;
    }
    if (e instanceof ConfigError) {
      process.stderr.write(`reef ${cmd}: ${e.message}\n`);
      return 2;
    }
    if (e instanceof ReefError) {
      process.stderr.write(`reef ${cmd}: ${e.message} (${e.code})\n`);
      return 1;
    }
    process.stderr.write(`reef ${cmd}: ${(e as Error)?.stack ?? String(e)}\n`);
    return 1;
  }
}
