// The operator's commands as users run them: the real `reef` binary in a child process on a real
// data directory — serve (demo account, graceful SIGTERM), account, provision, config errors.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SqliteStore } from '../../../src/store/sqlite/sqlite-store.ts';
import { BIN, reef as run } from '../../helpers/reef.ts';
import { tempDir } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const reef = (args: string[], env: Record<string, string> = {}) => run(args, { env });

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

function dataDir() {
  const d = tempDir('reef-cli-');
  dirs.push(d);
  return d;
}

describe('reef account / provision', () => {
  it('account create --json prints tenant id, client id and secret; the secret is stored hashed', async () => {
    const dir = dataDir();
    const r = await reef(['account', 'create', '--name', 'acme', '--json', '--data-dir', dir]);
    assert.equal(r.code, 0, r.stderr);
    const c = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(c).sort(), ['clientId', 'clientSecret', 'tenantId']);
    assert.match(c.tenantId, /^TN/);
    assert.match(c.clientId, /^[0-9a-f-]{36}$/);
    const db = fs.readFileSync(path.join(dir, 'reef.db'));
    assert.ok(!db.includes(Buffer.from(c.clientSecret)), 'the secret is not stored in clear');
    assert.ok(db.includes(Buffer.from('scrypt$')));
    const list = JSON.parse((await reef(['account', 'list', '--json', '--data-dir', dir])).stdout);
    assert.equal(list.length, 1);
    assert.equal(list[0].group, c.tenantId, 'an account is a group of its own by default');
    assert.ok(!JSON.stringify(list).includes(c.clientSecret));
  });

  it('--group puts accounts in one tenant group; rotate-secret, disable and enable work', async () => {
    const dir = dataDir();
    const a = JSON.parse((await reef(['account', 'create', '--name', 'a', '--group', 'team', '--json', '--data-dir', dir])).stdout);
    const rot = await reef(['account', 'rotate-secret', '--id', a.clientId, '--json', '--data-dir', dir]);
    assert.equal(rot.code, 0, rot.stderr);
    assert.notEqual(JSON.parse(rot.stdout).clientSecret, a.clientSecret);
    assert.equal((await reef(['account', 'disable', '--id', a.tenantId, '--data-dir', dir])).code, 0);
    const list = JSON.parse((await reef(['account', 'list', '--json', '--data-dir', dir])).stdout);
    assert.equal(list[0].group, 'team');
    assert.equal(list[0].disabled, true);
    assert.equal((await reef(['account', 'enable', '--id', a.tenantId, '--data-dir', dir])).code, 0);
    const missing = await reef(['account', 'disable', '--id', 'TNNOBODY', '--data-dir', dir]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no account/);
  });

  it("--group never joins another account's tenant or an existing group by accident; --join-group joins explicitly", async () => {
    const dir = dataDir();
    const victim = JSON.parse((await reef(['account', 'create', '--name', 'victim', '--json', '--data-dir', dir])).stdout);
    const hijack = await reef(['account', 'create', '--name', 'intruder', '--group', victim.tenantId, '--data-dir', dir]);
    assert.equal(hijack.code, 1);
    assert.match(hijack.stderr, /tenant id/);
    const lower = await reef(['account', 'create', '--name', 'intruder', '--join-group', victim.tenantId.toLowerCase(), '--data-dir', dir]);
    assert.equal(lower.code, 1, 'not even by joining, in any case');
    const first = JSON.parse((await reef(['account', 'create', '--name', 'a', '--group', 'lab', '--json', '--data-dir', dir])).stdout);
    const again = await reef(['account', 'create', '--name', 'b', '--group', 'lab', '--data-dir', dir]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already exists.*--join-group lab/);
    const joined = await reef(['account', 'create', '--name', 'b', '--join-group', 'lab', '--json', '--data-dir', dir]);
    assert.equal(joined.code, 0, joined.stderr);
    const list = JSON.parse((await reef(['account', 'list', '--json', '--data-dir', dir])).stdout) as { tenantId: string; group: string }[];
    assert.deepEqual(
      list
        .filter((r) => r.group === 'lab')
        .map((r) => r.tenantId)
        .sort(),
      [first.tenantId, JSON.parse(joined.stdout).tenantId].sort(),
    );
    assert.equal(list.filter((r) => r.group === victim.tenantId).length, 1, "the victim's group is still only the victim");
  });

  it('provision creates a NICDevKit in sandbox; the same MAC twice is refused clearly', async () => {
    const dir = dataDir();
    const a = JSON.parse((await reef(['account', 'create', '--name', 'kit', '--json', '--data-dir', dir])).stdout);
    const p = await reef(['provision', '--client-id', a.clientId, '--mac', '00:13:50:05:FF:12:34:AB', '--json', '--data-dir', dir]);
    assert.equal(p.code, 0, p.stderr);
    const d = JSON.parse(p.stdout);
    assert.equal(d.deviceType, 'NICDevKit');
    assert.deepEqual({ ...d.provisioningInfo, timestamp: 'T' }, { status: 'provisioned', timestamp: 'T', ssniMacAddress: '00135005ff1234ab', ssniNetworkDeviceType: 'MILLI' });
    assert.deepEqual(d.domainInfo, { nic_macID: '00135005ff1234ab' });
    const again = await reef(['provision', '--client-id', a.clientId, '--mac', '00135005ff1234ab', '--data-dir', dir]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already provisioned/);
    assert.equal(again.stderr.trim().split('\n').length, 1, 'one line on stderr');
  });

  it("account quota shows and sets an account's quotas; provision keeps the device quota", async () => {
    const dir = dataDir();
    const a = JSON.parse((await reef(['account', 'create', '--name', 'quota', '--json', '--data-dir', dir])).stdout);
    const shown = await reef(['account', 'quota', '--id', a.clientId, '--json', '--data-dir', dir]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(JSON.parse(shown.stdout).usage.devices, 0);
    const set = await reef(['account', 'quota', '--id', a.tenantId, '--devices', '1', '--backfill', '500', '--json', '--data-dir', dir]);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual([JSON.parse(set.stdout).limits.devices, JSON.parse(set.stdout).limits.backfill], [1, 500]);
    assert.equal((await reef(['provision', '--client-id', a.clientId, '--mac', '0000000000000a01', '--data-dir', dir])).code, 0);
    const over = await reef(['provision', '--client-id', a.clientId, '--mac', '0000000000000a02', '--data-dir', dir]);
    assert.equal(over.code, 1);
    assert.match(over.stderr, /device quota: this account may have 1 devices and has 1.*QUOTA_EXCEEDED/);
    // Back to the default; the text form names use and limit.
    const back = await reef(['account', 'quota', '--id', a.clientId, '--devices', 'default', '--data-dir', dir]);
    assert.equal(back.code, 0, back.stderr);
    assert.match(back.stdout, /^devices: +1 of 10000$/m);
    assert.match(back.stdout, /^backfill: +500 per simulation$/m);
    assert.equal((await reef(['provision', '--client-id', a.clientId, '--mac', '0000000000000a02', '--data-dir', dir])).code, 0);
    const bad = await reef(['account', 'quota', '--id', a.clientId, '--devices', '-3', '--data-dir', dir]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--devices must be a whole number/);
    assert.equal((await reef(['account', 'quota', '--id', 'nobody', '--data-dir', dir])).code, 1);
    assert.equal((await reef(['account', 'create', '--name', 'x', '--devices', '5', '--data-dir', dir])).code, 2, 'a quota flag elsewhere is a usage error');
  });

  it('bad usage exits 2', async () => {
    assert.equal((await reef(['account', 'create', '--data-dir', dataDir()])).code, 2);
    assert.equal((await reef(['account', 'frobnicate'])).code, 2);
    assert.equal((await reef(['provision', '--mac', '00'])).code, 2);
    assert.equal((await reef(['nosuch'])).code, 2);
    assert.equal((await reef(['account', 'create', '--name', 'x', '--bogus', '1'])).code, 2);
    assert.equal((await reef(['--help'])).code, 0);
  });
});

describe('reef serve', () => {
  it('reports every configuration error at once and exits 2', async () => {
    const r = await reef(['serve'], { REEF_HTTP_PORT: 'eighty', REEF_TOKEN_TTL: '-1', REEF_LOG_LEVEL: 'loud', REEF_DATABASE_URL: 'mysql://x' });
    assert.equal(r.code, 2);
    for (const v of ['REEF_HTTP_PORT', 'REEF_TOKEN_TTL', 'REEF_LOG_LEVEL', 'REEF_DATABASE_URL']) assert.match(r.stderr, new RegExp(v));
  });

  it('starts with a demo account it prints, serves it, and drains on SIGTERM', async () => {
    const dir = dataDir();
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data-dir', dir, '--gateway', 'false', '--mqtt-port', '0'], {
      env: { ...process.env, REEF_LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    let err = '';
    child.stderr.on('data', (c) => (err += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const banner = () => /client secret: \S+/.test(out);
    await Promise.race([waitFor('the banner', banner), exited.then(() => banner() || assert.fail(`serve exited: ${err}`))]);
    const url = /Reef is running at (http:\/\/\S+)/.exec(out)![1]!;
    const clientId = /client id:\s+(\S+)/.exec(out)![1]!;
    const clientSecret = /client secret:\s+(\S+)/.exec(out)![1]!;
    const t = await fetch(`${url}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId, clientSecret }) });
    assert.equal(t.status, 201);
    const { accessToken } = (await t.json()) as { accessToken: string };
    // An upload in flight when SIGTERM arrives (half its body sent) still completes and is stored.
    const d = (await (
      await fetch(`${url}/api/solutions/sandbox/devices`, { method: 'POST', headers: { authorization: accessToken, 'content-type': 'application/json' }, body: '{"deviceType":"T"}' })
    ).json()) as { id: string };
    const body = JSON.stringify({ observations: [{ timestamp: '2026-01-01T00:00:00Z', temperature: 5 }] });
    const u = new URL(url);
    const req = http.request({
      host: u.hostname,
      port: u.port,
      method: 'POST',
      path: `/api/solutions/sandbox/devices/${d.id}/observations`,
      headers: { authorization: accessToken, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const response = new Promise<number>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
    });
    req.write(body.slice(0, 10));
    await new Promise<void>((resolve) => req.on('socket', (s) => (s.connecting ? s.once('connect', () => resolve()) : resolve())));
    // A sleep: the server reading the headers shows nowhere outside the child.
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGTERM');
    // Draining: no new request is taken (refused, or 503 on a kept-alive connection).
    await waitFor('the drain', () =>
      fetch(url)
        .then((r) => r.status === 503)
        .catch(() => true),
    );
    req.end(body.slice(10));
    assert.equal(await response, 201);
    assert.equal(await exited, 0);
    const store = new SqliteStore({ file: path.join(dir, 'reef.db') });
    await store.migrate();
    assert.equal((await store.queryObservations(d.id, { limit: 10 })).observations.length, 1, 'the acknowledged upload was kept');
    await store.close();
    assert.ok(!out.includes(accessToken) && !err.includes(clientSecret), 'secrets are not logged');
  });
});
