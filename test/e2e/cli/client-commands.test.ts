// The client commands as users run them: the real `reef` binary in a child process against a real
// running service, with its own configuration directory — login/logout, devices, observations
// get/latest/upload, usage errors (exit 2), failures (exit 1, one line on stderr), --json output.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BIN, reef, type ReefResult as Result } from '../../helpers/reef.ts';
import { startTestServer, tempDir, type TestServer } from '../../helpers/server.ts';
import { Progress } from '../../../src/cli/progress.ts';
import { ReefClient } from '../../../src/sdk/index.ts';

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

function dir(): string {
  const d = tempDir('reef-cli-client-');
  dirs.push(d);
  return d;
}

/** One line on stderr, nothing else. */
function oneLine(r: Result): string {
  const lines = r.stderr.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, `one line on stderr, got:\n${r.stderr}`);
  return lines[0]!;
}

function csv(n: number, start = Date.UTC(2026, 0, 1)): string {
  const rows = ['timestamp,temperature,humidity'];
  for (let i = 0; i < n; i++) rows.push(`${new Date(start + i * 1000).toISOString()},${(20 + (i % 100) / 10).toFixed(1)},${40 + (i % 7)}`);
  return rows.join('\n') + '\n';
}

describe('reef login / logout', () => {
  let s: TestServer;
  before(async () => (s = await startTestServer()));
  after(() => s.close());

  it('stores endpoint and client id, and the secret only in a file readable by the user alone', async () => {
    const cfg = dir();
    const c = await s.account();
    const r = await reef(['login', '--endpoint', s.url, '--client-id', c.clientId, '--json'], { env: { REEF_CONFIG_DIR: cfg }, input: c.clientSecret + '\n' });
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.endpoint, s.url);
    assert.equal(out.clientId, c.clientId);
    assert.equal(out.solution, 'sandbox');
    const config = JSON.parse(fs.readFileSync(path.join(cfg, 'config.json'), 'utf8'));
    assert.deepEqual(config, { endpoint: s.url, clientId: c.clientId, solution: 'sandbox' });
    assert.ok(!fs.readFileSync(path.join(cfg, 'config.json'), 'utf8').includes(c.clientSecret), 'config.json holds no secret');
    const secretPath = path.join(cfg, 'credentials.json');
    assert.equal(out.secretFile, secretPath);
    assert.equal(fs.statSync(secretPath).mode & 0o777, 0o600);
    assert.equal(JSON.parse(fs.readFileSync(secretPath, 'utf8')).clientSecret, c.clientSecret);

    const show = await reef(['login', '--show', '--json'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(show.code, 0, show.stderr);
    assert.deepEqual(JSON.parse(show.stdout), { endpoint: s.url, clientId: c.clientId, solution: 'sandbox', secretStored: true, configDir: cfg });
    assert.ok(!show.stdout.includes(c.clientSecret));

    const list = await reef(['devices', 'list', '--json'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout), []);

    const out2 = await reef(['logout'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(out2.code, 0);
    assert.ok(!fs.existsSync(secretPath) && !fs.existsSync(path.join(cfg, 'config.json')));
    const after = await reef(['devices', 'list'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(after.code, 1);
    assert.match(oneLine(after), /^reef devices: not logged in/);
  });

  it('a wrong secret stores nothing and fails with one line (exit 1)', async () => {
    const cfg = dir();
    const c = await s.account();
    const r = await reef(['login', '--endpoint', s.url, '--client-id', c.clientId], { env: { REEF_CONFIG_DIR: cfg }, input: 'wrong\n' });
    assert.equal(r.code, 1);
    assert.match(oneLine(r), /^reef login: client id or client secret is wrong \(INVALID_CREDENTIALS, HTTP 401, request id [0-9a-f]+\)$/);
    assert.deepEqual(fs.readdirSync(cfg), []);
  });

  it('--no-store-secret keeps the secret nowhere; REEF_CLIENT_SECRET then supplies it', async () => {
    const cfg = dir();
    const c = await s.account();
    const r = await reef(['login', '--endpoint', s.url, '--client-id', c.clientId, '--no-store-secret', '--solution', 'StudioSimulation'], {
      env: { REEF_CONFIG_DIR: cfg, REEF_CLIENT_SECRET: c.clientSecret },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /secret not stored/);
    assert.deepEqual(fs.readdirSync(cfg), ['config.json']);
    const without = await reef(['devices', 'list'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(without.code, 1);
    assert.match(oneLine(without), /no client secret stored .*REEF_CLIENT_SECRET/);
    const withEnv = await reef(['devices', 'create', '--type', 'VirtualDevice', '--json'], { env: { REEF_CONFIG_DIR: cfg, REEF_CLIENT_SECRET: c.clientSecret } });
    assert.equal(withEnv.code, 0, withEnv.stderr);
    const d = JSON.parse(withEnv.stdout);
    const sim = await s.request('GET', '/api/solutions/StudioSimulation/devices', { token: await s.token(c) });
    assert.deepEqual(
      ((await sim.json()) as { devices: { id: string }[] }).devices.map((x) => x.id),
      [d.id],
      'the stored solution is used',
    );
  });

  it('a secret file others can read is refused', async () => {
    const cfg = dir();
    const c = await s.account();
    assert.equal((await reef(['login', '--endpoint', s.url, '--client-id', c.clientId], { env: { REEF_CONFIG_DIR: cfg }, input: c.clientSecret })).code, 0);
    fs.chmodSync(path.join(cfg, 'credentials.json'), 0o644);
    const r = await reef(['devices', 'list'], { env: { REEF_CONFIG_DIR: cfg } });
    assert.equal(r.code, 1);
    assert.match(oneLine(r), /readable by others \(mode 644\): run chmod 600/);
  });

  it('environment variables alone are enough (no login)', async () => {
    const c = await s.account();
    const r = await reef(['devices', 'list', '--json'], { env: { REEF_CONFIG_DIR: dir(), REEF_ENDPOINT: s.url, REEF_CLIENT_ID: c.clientId, REEF_CLIENT_SECRET: c.clientSecret } });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), []);
  });
});

describe('reef devices and observations', () => {
  let s: TestServer;
  let env: Record<string, string>;
  let creds: { clientId: string; clientSecret: string };
  before(async () => {
    s = await startTestServer();
    creds = await s.account();
    env = { REEF_CONFIG_DIR: dir() };
    const r = await reef(['login', '--endpoint', s.url, '--client-id', creds.clientId], { env, input: creds.clientSecret });
    assert.equal(r.code, 0, r.stderr);
  });
  after(() => s.close());

  async function newDevice(type = 'Thermo'): Promise<string> {
    const r = await reef(['devices', 'create', '--type', type], { env });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.trim();
  }

  async function stored(id: string): Promise<number> {
    const r = await reef(['observations', 'get', '--device', id, '--format', 'ndjson'], { env });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.split('\n').filter(Boolean).length;
  }

  it('templates create, list, update, get, system and delete', async () => {
    const c = await reef(['templates', 'create', '--name', 'Greenhouse', '--sensors', 'temperature,humidity', '--solution', 'tpl'], { env });
    assert.equal(c.code, 0, c.stderr);
    const id = c.stdout.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    const list = await reef(['templates', 'list', '--json', '--solution', 'tpl'], { env });
    assert.deepEqual(JSON.parse(list.stdout), [{ id, name: 'Greenhouse', sensors: ['temperature', 'humidity'] }]);
    const table = await reef(['templates', 'list', '--solution', 'tpl'], { env });
    assert.match(table.stdout, /Greenhouse\s+temperature,humidity/);
    const up = await reef(['templates', 'update', id, '--name', 'Greenhouse 2', '--sensors-json', '[{"name":"light","unit":"lx"}]', '--json', '--solution', 'tpl'], { env });
    assert.equal(up.code, 0, up.stderr);
    assert.deepEqual(JSON.parse(up.stdout).sensors, [{ name: 'light', unit: 'lx' }]);
    const sys = await reef(['templates', 'system', '--json'], { env });
    assert.ok(JSON.parse(sys.stdout).some((t: { name: string; id?: string }) => t.name === 'NICDevKit' && t.id === undefined));
    const bad = await reef(['templates', 'create', '--name', 'x', '--sensors', 'a,a', '--solution', 'tpl'], { env });
    assert.equal(bad.code, 1);
    assert.match(oneLine(bad), /listed twice/);
    assert.equal((await reef(['templates', 'create', '--name', 'x'], { env })).code, 2, 'usage: no sensors');
    const del = await reef(['templates', 'delete', id, '--solution', 'tpl'], { env });
    assert.equal(del.code, 0, del.stderr);
    assert.equal((await reef(['templates', 'get', id, '--solution', 'tpl'], { env })).code, 1);
  });

  it('devices create --mac stores domainInfo.nic_macID in wire form; get finds it by MAC in any spelling', async () => {
    const c = await reef(['devices', 'create', '--type', 'MILLI', '--mac', '00:13:50:05:FF:AA:BB:01', '--json', '--solution', 'macs'], { env });
    assert.equal(c.code, 0, c.stderr);
    const d = JSON.parse(c.stdout);
    assert.deepEqual(d.domainInfo, { nic_macID: '00135005ffaabb01' });
    for (const spelling of ['00135005FFAABB01', '00-13-50-05-ff-aa-bb-01']) {
      const g = await reef(['devices', 'get', spelling, '--json', '--solution', 'macs'], { env });
      assert.equal(g.code, 0, g.stderr);
      assert.equal(JSON.parse(g.stdout).id, d.id);
    }
    const none = await reef(['devices', 'get', '00135005ffaabb02', '--solution', 'macs'], { env });
    assert.equal(none.code, 1);
    assert.match(oneLine(none), /no device with MAC 00135005ffaabb02/);
    const bad = await reef(['devices', 'create', '--type', 'MILLI', '--mac', 'nope'], { env });
    assert.equal(bad.code, 2);
  });

  it('devices update: type, location, template and a merge patch of domainInfo; nothing to change is a usage error', async () => {
    const made = await reef(['devices', 'create', '--type', 'Thermo', '--lat', '10', '--lon', '20', '--json', '--solution', 'upd'], { env });
    assert.equal(made.code, 0, made.stderr);
    const id = JSON.parse(made.stdout).id as string;
    const tpl = await reef(['templates', 'create', '--name', 'Fridge', '--sensors', 'temperature', '--json', '--solution', 'upd'], { env });
    assert.equal(tpl.code, 0, tpl.stderr);
    const tid = JSON.parse(tpl.stdout).id as string;
    const u = await reef(['devices', 'update', id, '--type', 'Fridge', '--lat', '-1.5', '--lon', '2', '--template', tid, '--domain-info', '{"room":"B2"}', '--json', '--solution', 'upd'], { env });
    assert.equal(u.code, 0, u.stderr);
    assert.deepEqual(JSON.parse(u.stdout).domainInfo, { location: { latitude: -1.5, longitude: 2 }, templateId: tid, room: 'B2' });
    assert.equal(JSON.parse(u.stdout).deviceType, 'Fridge');
    const table = await reef(['devices', 'update', id, '--template', 'none', '--domain-info', '{"room":null}', '--solution', 'upd'], { env });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /Fridge\s+-1\.5,2/);
    const g = await reef(['devices', 'get', id, '--json', '--solution', 'upd'], { env });
    assert.deepEqual(JSON.parse(g.stdout).domainInfo, { location: { latitude: -1.5, longitude: 2 } });
    assert.equal((await reef(['devices', 'update', id, '--solution', 'upd'], { env })).code, 2);
    assert.equal((await reef(['devices', 'update', id, '--domain-info', '[1]', '--solution', 'upd'], { env })).code, 2);
    const refused = await reef(['devices', 'update', id, '--lat', '95', '--lon', '0', '--solution', 'upd'], { env });
    assert.equal(refused.code, 2, 'a latitude outside ±90 is refused before any call');
  });

  it('devices create, list (table and --json, --type filter), get, delete', async () => {
    const c = await reef(['devices', 'create', '--type', 'Weather', '--lat', '52.5', '--lon', '13.4', '--json'], { env });
    assert.equal(c.code, 0, c.stderr);
    const d = JSON.parse(c.stdout);
    assert.deepEqual(d.domainInfo, { location: { latitude: 52.5, longitude: 13.4 } });
    const other = await newDevice('Hygro');

    const table = await reef(['devices', 'list'], { env });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout.split('\n')[0]!, /^ID\s+TYPE\s+MAC\s+STATUS\s+LOCATION$/);
    assert.ok(table.stdout.includes(d.id) && table.stdout.includes(other));
    assert.match(table.stdout, /Weather\s+52\.5,13\.4/);

    const filtered = JSON.parse((await reef(['devices', 'list', '--type', 'Weather', '--json'], { env })).stdout);
    assert.deepEqual(
      filtered.map((x: { id: string }) => x.id),
      [d.id],
    );
    const got = await reef(['devices', 'get', d.id, '--json'], { env });
    assert.deepEqual(JSON.parse(got.stdout), d);

    const del = await reef(['devices', 'delete', other], { env });
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout, `deleted ${other}\n`);
    const gone = await reef(['devices', 'get', other], { env });
    assert.equal(gone.code, 1);
    assert.equal(gone.stdout, '');
    assert.match(oneLine(gone), /^reef devices: no device [0-9a-f-]+ in solution "sandbox" \(DEVICE_NOT_FOUND, HTTP 404, request id [0-9a-f]+\)$/);
  });

  it('observations upload CSV (summary and --json), then get it back as csv, json, ndjson and a table', async () => {
    const id = await newDevice();
    const dirp = dir();
    const file = path.join(dirp, 'data.csv');
    fs.writeFileSync(file, csv(2500));
    const up = await reef(['observations', 'upload', file, '--device', id, '--batch-size', '1000'], { env });
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stdout, new RegExp(`^uploaded 2,500 observations from .*data\\.csv to device ${id} in 3 batches: .* obs/s\\), checked in `));
    assert.equal(up.stderr, '', 'no progress bar when stderr is not a terminal');

    const asCsv = await reef(['observations', 'get', '--device', id, '--format', 'csv'], { env });
    assert.equal(asCsv.code, 0, asCsv.stderr);
    const lines = asCsv.stdout.trim().split('\n');
    assert.equal(lines[0], 'timestamp,temperature,humidity');
    assert.equal(lines.length, 2501);
    // Newest first; sorted, it is the uploaded file (numbers as the service keeps them).
    const original = csv(2500)
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.replace(/\.0,/, ','))
      .sort();
    assert.deepEqual(lines.slice(1).sort(), original);

    const asJson = await reef(['observations', 'get', '--device', id, '--json', '--limit', '10'], { env });
    const arr = JSON.parse(asJson.stdout);
    assert.equal(arr.length, 10);
    assert.deepEqual(arr[0], { timestamp: new Date(Date.UTC(2026, 0, 1) + 2499 * 1000).toISOString(), temperature: 29.9, humidity: 40 + (2499 % 7) });

    const nd = await reef(['observations', 'get', '--device', id, '--format', 'ndjson', '--from', '2026-01-01T00:00:10Z', '--to', '2026-01-01T00:00:20Z'], { env });
    const rows = nd.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(rows.length, 10);
    assert.equal(rows[0].timestamp, '2026-01-01T00:00:19.000Z');
    assert.equal(rows[9].timestamp, '2026-01-01T00:00:10.000Z');

    const table = await reef(['observations', 'get', '--device', id, '--limit', '3'], { env });
    const t = table.stdout.trim().split('\n');
    assert.match(t[0]!, /^TIMESTAMP\s+TEMPERATURE\s+HUMIDITY$/);
    assert.equal(t.length, 4);

    const up2 = await reef(['observations', 'upload', file, '--device', id, '--json'], { env });
    assert.equal(up2.code, 0, up2.stderr);
    const summary = JSON.parse(up2.stdout);
    assert.equal(summary.observations, 2500);
    assert.equal(summary.stored, 2500);
    assert.equal(summary.complete, true);
    assert.equal(summary.batches, 1);
    assert.equal(await stored(id), 2500, 'uploading the same file again replaces, never doubles');

    const latest = await reef(['observations', 'latest', '--json'], { env });
    const groups = JSON.parse(latest.stdout);
    assert.deepEqual(groups.find((g: { deviceId: string }) => g.deviceId === id).observations[0].temperature, 29.9);
  });

  it('observations upload NDJSON and CSV with quoted fields, nested columns and numeric-string temperatures', async () => {
    const id = await newDevice();
    const dirp = dir();
    const nd = path.join(dirp, 'data.ndjson');
    fs.writeFileSync(
      nd,
      [
        JSON.stringify({ timestamp: '2026-02-01T00:00:00.000Z', temperature: '72.50', accelerometer: { x: 1, y: 2, z: 3 } }),
        '',
        JSON.stringify({ timestamp: '2026-02-01T00:00:01Z', temperature: 21, note: 'hi' }),
      ].join('\n'),
    );
    const r1 = await reef(['observations', 'upload', nd, '--device', id, '--json'], { env });
    assert.equal(r1.code, 0, r1.stderr);
    assert.equal(JSON.parse(r1.stdout).stored, 2);

    const cf = path.join(dirp, 'rich.csv');
    fs.writeFileSync(cf, '\ufefftimestamp,temperature,accelerometer.x,accelerometer.y,note\r\n2026-02-02T00:00:00Z,"21.5",1,2,"hello, ""world""\nsecond line"\r\n2026-02-02T00:00:01Z,,0.5,,plain\r\n');
    const r2 = await reef(['observations', 'upload', cf, '--device', id], { env });
    assert.equal(r2.code, 0, r2.stderr);
    const got = (await reef(['observations', 'get', '--device', id, '--format', 'ndjson'], { env })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(got, [
      { timestamp: '2026-02-02T00:00:01.000Z', accelerometer: { x: 0.5 }, note: 'plain' },
      { timestamp: '2026-02-02T00:00:00.000Z', temperature: 21.5, accelerometer: { x: 1, y: 2 }, note: 'hello, "world"\nsecond line' },
      { timestamp: '2026-02-01T00:00:01.000Z', temperature: 21, note: 'hi' },
      { timestamp: '2026-02-01T00:00:00.000Z', temperature: 72.5, accelerometer: { x: 1, y: 2, z: 3 } },
    ]);
    // The CSV export flattens nested fields and quotes what needs it; uploading it again round-trips.
    const out = await reef(['observations', 'get', '--device', id, '--format', 'csv'], { env });
    assert.equal(out.stdout.split('\n')[0], 'timestamp,temperature,accelerometer.x,accelerometer.y,accelerometer.z,note');
    const back = path.join(dirp, 'back.csv');
    fs.writeFileSync(back, out.stdout);
    const id2 = await newDevice();
    assert.equal((await reef(['observations', 'upload', back, '--device', id2], { env })).code, 0);
    const again = (await reef(['observations', 'get', '--device', id2, '--format', 'ndjson'], { env })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(again, got);
  });

  it('get streams a long range; a reader that stops early (| head) ends it with exit 0', async () => {
    const id = await newDevice();
    const client = new ReefClient({ endpoint: s.url, credentials: creds });
    await client.uploadObservations(
      id,
      csv(30_000)
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => ({ timestamp: l.split(',')[0]!, temperature: Number(l.split(',')[1]) })),
      { batchSize: 10_000 },
    );
    const full = await reef(['observations', 'get', '--device', id, '--format', 'csv'], { env });
    assert.equal(full.code, 0, full.stderr);
    assert.equal(full.stdout.trim().split('\n').length, 30_001);
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'observations', 'get', '--device', id, '--format', 'ndjson'], { env: { ...process.env, ...env } });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
      child.stdout.once('data', () => child.stdout.destroy());
      child.on('close', (code) => resolve({ code, stderr }));
    });
    assert.equal(r.code, 0);
    assert.equal(r.stderr, '');
  });

  it('a bad line is reported by number, and nothing of the file is uploaded', async () => {
    const id = await newDevice();
    const dirp = dir();
    const cases: [string, string, RegExp][] = [
      // The bad line is the very last of 2,501: all 25 earlier batches would have gone out if the
      // file were not checked whole first.
      ['late.csv', csv(2_500) + 'yesterday,20.0,40\n', /late\.csv line 2502: timestamp must be an ISO-8601 date-time with a time zone/],
      [
        'temp.csv',
        csv(3)
          .replace(/,21\.0,/, ',warm,')
          .replace(/(\n[^\n]*),20\.1,/, '$1,hot,'),
        /temp\.csv line 3: temperature must be a number or a numeric string/,
      ],
      ['fields.csv', csv(5).replace(/\n([^\n]*)\n$/, '\n$1,extra\n'), /fields\.csv line 6: expected 3 fields as in the header, found 4/],
      ['nozone.csv', 'timestamp,temperature\n2026-01-01T00:00:00Z,1\n2026-01-01T00:00:01,2\n', /nozone\.csv line 3: timestamp must be an ISO-8601 date-time with a time zone/],
      ['header.csv', 'time,temperature\n2026-01-01T00:00:00Z,1\n', /header\.csv line 1: the header must name a timestamp column/],
      ['quote.csv', 'timestamp,note\n2026-01-01T00:00:00Z,"open\n2026-01-01T00:00:01Z,x\n', /quote\.csv line 2: a quoted field is never closed/],
      ['bad.ndjson', '{"timestamp":"2026-01-01T00:00:00Z","temperature":1}\n{"timestamp":"2026-01-01T00:00:01Z",\n', /bad\.ndjson line 2: not valid JSON/],
      ['arr.ndjson', '{"timestamp":"2026-01-01T00:00:00Z"}\n[1,2]\n', /arr\.ndjson line 2: must be a JSON object/],
      ['empty.csv', '', /empty\.csv is empty/],
      ['headonly.csv', 'timestamp,temperature\n', /headonly\.csv holds no observations/],
    ];
    for (const [name, content, expected] of cases) {
      const f = path.join(dirp, name);
      fs.writeFileSync(f, content);
      const r = await reef(['observations', 'upload', f, '--device', id, '--batch-size', '100'], { env });
      assert.equal(r.code, 1, `${name}: ${r.stderr}`);
      assert.match(oneLine(r), expected, name);
      assert.match(r.stderr, /^reef observations: /);
      assert.equal(r.stdout, '');
    }
    assert.equal(await stored(id), 0, 'nothing was uploaded');
    const missing = await reef(['observations', 'upload', path.join(dirp, 'nope.csv'), '--device', id], { env });
    assert.equal(missing.code, 1);
    assert.match(oneLine(missing), /cannot read .*nope\.csv: ENOENT/);
  });

  it('an upload to an unknown device fails before the file is read', async () => {
    const f = path.join(dir(), 'x.csv');
    fs.writeFileSync(f, csv(3));
    const r = await reef(['observations', 'upload', f, '--device', '00000000-0000-4000-8000-000000000000', '--json'], { env });
    assert.equal(r.code, 1);
    assert.match(oneLine(r), /DEVICE_NOT_FOUND, HTTP 404/);
  });

  it('bad usage exits 2 with the reason on stderr', async () => {
    // Every command's usage errors: test/unit/cli/usage.test.ts; here, how the binary reports them.
    const cases: [string[], RegExp][] = [
      [['devices'], /Usage:/],
      [['observations'], /Usage:/],
      [['devices', 'frob'], /^reef devices: unknown subcommand "frob"/],
      [['observations', 'get', '--device', 'x', '--format', 'xml'], /^reef observations: --format must be table, csv, json or ndjson\n$/],
    ];
    for (const [args, expected] of cases) {
      const r = await reef(args, { env: { REEF_CONFIG_DIR: dir() } });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr + r.stdout, expected, args.join(' '));
    }
  });

  it('--help on every command exits 0', async () => {
    const top = await reef(['--help']);
    assert.equal(top.code, 0);
    for (const c of ['login', 'logout', 'devices', 'observations']) assert.match(top.stdout, new RegExp(`\\n  ${c} `));
    for (const args of [
      ['login', '--help'],
      ['logout', '--help'],
      ['devices', '--help'],
      ['devices', 'list', '--help'],
      ['observations', '--help'],
      ['observations', 'upload', '--help'],
    ]) {
      const r = await reef(args);
      assert.equal(r.code, 0, args.join(' '));
      assert.match(r.stdout, /^Usage/);
    }
  });

  it('an unreachable service fails with one line (exit 1)', async () => {
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const r = await reef(['devices', 'list', '--endpoint', `http://127.0.0.1:${port}`], { env });
    assert.equal(r.code, 1);
    assert.match(oneLine(r), /^reef devices: cannot reach the service: POST http:\/\/127\.0\.0\.1:\d+\/api\/tokens failed: ECONNREFUSED$/);
  });
});

describe('progress bar', () => {
  it('draws on a terminal and stays silent otherwise', () => {
    const written: string[] = [];
    const tty = new Progress('uploading', 1000, 'obs', { isTTY: true, columns: 120, write: (s) => (written.push(s), true) });
    tty.update(500, true);
    tty.finish();
    assert.match(written[0]!, /^\ruploading \[#+-+\] {2}50% 500\/1,000 obs/);
    assert.equal(written.at(-1), '\r\x1b[K');
    const quiet: string[] = [];
    const pipe = new Progress('uploading', 1000, 'obs', { isTTY: false, write: (s) => (quiet.push(s), true) });
    pipe.update(500, true);
    pipe.finish();
    assert.deepEqual(quiet, []);
  });
});
