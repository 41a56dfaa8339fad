// `reef simulate` against a running service: start with backfill (progress, summary), list,
// status, stop; usage errors and the service's 400s.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { UsageError } from '../../../src/cli/args.ts';
import fs from 'node:fs';
import { writeConfig, writeSecret } from '../../../src/cli/client-config.ts';
import { progressBar } from '../../../src/cli/progress.ts';
import { parseAreaFlag, run } from '../../../src/cli/simulate.ts';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import type { Simulation } from '../../../src/sim/simulations.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';

let s: TestServer;
let env: Record<string, string>;
let creds: { clientId: string; clientSecret: string };
/** A client config directory of its own, so nothing stored by a real `reef login` leaks in. */
const configDir = tempDir('reef-cli-config-');

before(async () => {
  s = await startTestServer({}, [createSimulationComponent({ demo: null })]);
  const c = await s.account('cli');
  creds = c;
  env = { REEF_CONFIG_DIR: configDir, REEF_ENDPOINT: s.url, REEF_CLIENT_ID: c.clientId, REEF_CLIENT_SECRET: c.clientSecret };
});
after(async () => {
  await s.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});

async function cli(argv: string[], extra: { env?: Record<string, string>; tty?: boolean } = {}) {
  let out = '';
  let err = '';
  const code = await run(argv, { out: (x) => (out += x), err: (x) => (err += x), env: extra.env ?? env, tty: extra.tty ?? false, pollMs: 20 });
  return { code, out, err };
}

test('start with backfill: a progress bar to 100 %, then a summary; list, status and stop', async () => {
  const r = await cli(['--devices', '3', '--interval', '1s', '--backfill', '2h', '--area', '51.5,-0.12,10', '--seed', 'cli', '--name', 'London']);
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /Started simulation [0-9a-f-]{36}: 3 devices every 1s/);
  assert.match(r.err, /\[#{30}\] 100% 21,600\/21,600 readings/);
  assert.match(r.out, /\(London\): running/);
  assert.match(r.out, /backfill: +21,600 readings in [\d.]+ s/);
  assert.match(r.out, /51\.5, -0\.12 within 10 km/);
  const id = /Simulation ([0-9a-f-]{36})/.exec(r.out)![1]!;

  const list = await cli(['list']);
  assert.equal(list.code, 0);
  assert.match(list.out, /^ID +STATUS +DEVICES/);
  assert.ok(list.out.includes(id));

  const status = await cli(['status', id, '--json']);
  const sim = JSON.parse(status.out) as Simulation;
  assert.equal(sim.id, id);
  assert.equal(sim.backfill?.done, 21_600);
  assert.equal(sim.params.seed, 'cli');

  const stop = await cli(['stop', id]);
  assert.equal(stop.code, 0);
  assert.match(stop.out, /: stopped/);
});

test('--json prints the simulation; a terminal gets the bar drawn in place', async () => {
  const r = await cli(['--devices', '2', '--interval', '10s', '--backfill', '1d', '--json', '--area', '45,5,47,8'], { tty: true });
  assert.equal(r.code, 0, r.err);
  const sim = JSON.parse(r.out) as Simulation;
  assert.equal(sim.status, 'running');
  assert.deepEqual(sim.params.area, { kind: 'bbox', south: 45, west: 5, north: 47, east: 8 });
  assert.ok(r.err.includes('\r['));
  assert.equal((await cli(['stop', sim.id])).code, 0);
});

test('usage errors and refused parameters', async () => {
  await assert.rejects(cli(['--interval', '10s']), UsageError);
  await assert.rejects(cli(['--devices', '2']), UsageError);
  await assert.rejects(cli(['--devices', '2', '--interval', '1s', '--area', '1,2']), UsageError);
  await assert.rejects(cli(['--devices', '2', '--interval', '1s', '--colour', 'red']), UsageError);
  // No endpoint, credentials or stored login: one line, exit 1, as for every client command.
  const nowhere = await cli(['list'], { env: { REEF_CONFIG_DIR: tempDir('reef-cli-none-') } });
  assert.equal(nowhere.code, 1);
  assert.match(nowhere.err, /^reef simulate: not logged in/);
  await assert.rejects(cli(['stop']), UsageError);
  const bad = await cli(['--devices', '2', '--interval', '1s', '--area', '95,0,10']);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /field area\.center\.latitude/);
  const gone = await cli(['status', '00000000-0000-4000-8000-000000000000']);
  assert.equal(gone.code, 1);
  assert.match(gone.err, /NOT_FOUND/);
  const wrong = await cli(['list'], { env: { ...env, REEF_CLIENT_SECRET: 'nope' } });
  assert.equal(wrong.code, 1);
  assert.deepEqual(parseAreaFlag('1,2,3'), { center: { latitude: 1, longitude: 2 }, radiusKm: 3 });
  assert.equal(progressBar(5, 10, 10), '[#####-----]  50%');
});

test('what reef login stored applies: endpoint, client id and the 0600 secret file', async () => {
  const dir = tempDir('reef-cli-login-');
  try {
    const login = { REEF_CONFIG_DIR: dir };
    writeConfig(login, { endpoint: s.url, clientId: creds.clientId, solution: 'sandbox' });
    writeSecret(login, creds.clientId, creds.clientSecret);
    const r = await cli(['--devices', '1', '--interval', '10s', '--json'], { env: login });
    assert.equal(r.code, 0, r.err);
    const sim = JSON.parse(r.out) as Simulation;
    const list = await cli(['list', '--json'], { env: login });
    assert.ok((JSON.parse(list.out) as Simulation[]).some((x) => x.id === sim.id));
    assert.equal((await cli(['stop', sim.id], { env: login })).code, 0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
