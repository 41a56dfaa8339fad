// Usage errors of the client commands, each command's run() called as src/cli/index.ts calls it:
// each refuses its arguments with a UsageError naming what is wrong, before it reads a file or
// calls the service. How the binary prints one (`reef CMD: reason` on stderr, exit 2) is shown
// once per command in test/e2e/cli/ with the real `reef` process.
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';
import { after, before, it } from 'node:test';
import { UsageError } from '../../../src/cli/args.ts';
import { COMMANDS } from '../../../src/cli/index.ts';

const CLIENT_VARS = ['REEF_CONFIG_DIR', 'REEF_ENDPOINT', 'REEF_CLIENT_ID', 'REEF_CLIENT_SECRET', 'REEF_TOKEN', 'REEF_SOLUTION'];
const saved = new Map(CLIENT_VARS.map((k) => [k, process.env[k]]));

// No stored login and no client variables: a command that got as far as its configuration would
// fail otherwise, not with a usage error. The directory is never created.
before(() => {
  for (const k of CLIENT_VARS) delete process.env[k];
  process.env.REEF_CONFIG_DIR = path.join(os.tmpdir(), 'reef-usage-test-no-such-dir');
});
after(() => {
  for (const [k, v] of saved) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const CASES: [string, string[], RegExp][] = [
  ['devices', ['frob'], /unknown subcommand "frob"/],
  ['devices', ['list', '--bogus'], /unknown option --bogus/],
  ['devices', ['get'], /get needs one device id/],
  ['devices', ['create'], /--type is required/],
  ['devices', ['create', '--type', 'T', '--lat', '91', '--lon', '0'], /--lat must be a number from -90 to 90/],
  ['devices', ['create', '--type', 'T', '--lat', '10'], /give --lat and --lon together/],
  ['observations', ['get'], /--device is required/],
  ['observations', ['get', '--device', 'x', '--format', 'xml'], /--format must be table, csv, json or ndjson/],
  ['observations', ['get', '--device', 'x', '--from', 'yesterday'], /--from must be an ISO-8601/],
  ['observations', ['get', '--device', 'x', '--limit', 'many'], /--limit must be a whole number/],
  ['observations', ['upload', '--device', 'x'], /upload needs one FILE/],
  ['observations', ['upload', 'x.txt', '--device', 'x'], /cannot tell the format of .*x\.txt/],
  ['observations', ['upload', 'x.csv', '--device', 'x', '--batch-size', '0'], /--batch-size must be a whole number from 1/],
  ['login', ['--endpoint', 'ftp://x', '--client-id', 'y'], /--endpoint must be an http/],
  ['login', ['--client-id', 'y'], /--endpoint is required/],
  ['coap', ['poke', '--device', 'd', 'x'], /unknown subcommand "poke"/],
  ['coap', ['get', 'x'], /--device is required/],
  ['coap', ['get', '--device', 'd'], /get needs one RESOURCE/],
  ['coap', ['get', '--device', 'd', 'x', '--count', '2'], /--count goes with observe/],
  ['coap', ['get', '--device', 'd', 'x', '--payload', 'C'], /--payload and --content-format go with put/],
  ['coap', ['observe', '--device', 'd', 'x', '--count', '0'], /--count must be a whole number from 1/],
  ['alarms', ['add', '--condition', 'above', '--threshold', 'warm'], /--threshold must be a number/],
  ['alarms', ['add', '--threshold', '2'], /--condition is required/],
  ['alarms', ['ack'], /ack needs one id/],
  ['alarms', ['webhook', 'https://a.example', '--remove'], /webhook takes one URL, or --remove/],
];

for (const [command, argv, reason] of CASES) {
  it(`reef ${command} ${argv.join(' ')}: ${reason.source}`, async () => {
    const run = await COMMANDS[command]!.load();
    await assert.rejects(run(argv), (e: unknown) => {
      assert.ok(e instanceof UsageError, `a UsageError, not ${String(e)}`);
      assert.match(e.message, reason);
      return true;
    });
  });
}
