// `reef mqtt sub|pub` as a user runs it: the real bin/reef.js in a child process, logged in through
// REEF_ENDPOINT / REEF_CLIENT_ID / REEF_CLIENT_SECRET, against a real service with the broker and
// software dev kits: kit payloads printed (text, and CBOR as hex), observations published and stored,
// a refused message and a refused filter reported with exit 1.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { reef as run } from '../../helpers/reef.ts';
import { startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

/** The shared runner (test/helpers/reef.ts), with no stored login unless the test gives one. */
function reef(args: string[], env: Record<string, string>, input = '') {
  return run(args, { env: { REEF_CONFIG_DIR: '/nonexistent/reef-cli', ...env }, input });
}

describe('reef mqtt', () => {
  let h: MqttHarness;
  let env: Record<string, string>;
  let tenantId: string;

  before(async () => {
    h = await startMqtt({ gateway: true });
    const a = await h.t.account('cli');
    tenantId = a.tenantId;
    env = { REEF_ENDPOINT: h.t.url, REEF_CLIENT_ID: a.clientId, REEF_CLIENT_SECRET: a.clientSecret };
    await h.gw!.kit(a.tenantId, '00000000000017a1');
    await h.gw!.kit(a.tenantId, '00000000000017a2', { cbor: true });
  });
  after(() => h.close());

  it("sub prints the tenant's kit payloads: text as text, CBOR as hex", async () => {
    const r = await reef(['mqtt', 'sub', '--count', '6', '--topic', `${tenantId}/alert/00000000000017a1/+`, '--topic', `${tenantId}/alert/00000000000017a2/+`], env);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 6);
    assert.ok(
      lines.some((l) => new RegExp(`^${tenantId}/alert/00000000000017a1/temp \\d+,-?\\d+\\.\\d\\d,[CF]$`).test(l)),
      r.stdout,
    );
    assert.ok(
      lines.some((l) => new RegExp(`^${tenantId}/alert/00000000000017a2/temp hex:a200`).test(l)),
      r.stdout,
    );
  });

  it('sub --json prints one object per message; the default filter is every kit of the tenant', async () => {
    const r = await reef(['mqtt', 'sub', '--count', '2', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    for (const l of r.stdout.trim().split('\n')) {
      const m = JSON.parse(l) as { topic: string; encoding: string; retained: boolean };
      assert.match(m.topic, new RegExp(`^${tenantId}/alert/00000000000017a[12]/temp$`));
      assert.ok(m.encoding === 'text' || m.encoding === 'hex');
    }
  });

  it('sub refuses a filter outside the tenant with exit 1 and says why', async () => {
    const r = await reef(['mqtt', 'sub', '--topic', '#'], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /refused "#": subscribe under your tenant id TN/);
  });

  it('pub stores observations (acknowledged after the commit); a refused message exits 1 with the reason', async () => {
    const t = await h.t.token({ clientId: env.REEF_CLIENT_ID!, clientSecret: env.REEF_CLIENT_SECRET! });
    const d = await h.t.request('POST', '/api/solutions/plant/devices', { token: t, body: { deviceType: 'Thermo' } });
    const { id } = (await d.json()) as { id: string };
    const ok = await reef(['mqtt', 'pub', '--solution', 'plant', '--device', id, '-'], env, '{"observations":[{"timestamp":"2026-07-01T00:00:00Z","temperature":18.5}]}');
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stderr, /^stored/);
    const read = await h.t.request('GET', `/api/solutions/plant/devices/${id}/observations`, { token: t });
    assert.deepEqual(((await read.json()) as { observations: unknown[] }).observations, [{ timestamp: '2026-07-01T00:00:00.000Z', temperature: 18.5 }]);

    const bad = await reef(['mqtt', 'pub', '--solution', 'plant', '--device', id, '--message', '{"observations":[{"timestamp":"soon"}]}'], env);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /refused: .*\(VALIDATION_FAILED, observations\[0\]\.timestamp, request id /);
    const usage = await reef(['mqtt', 'pub', '--device', id], env);
    assert.equal(usage.code, 2);
  });
});
