// `reef coap get|put|observe` as users run it: the real binary in a child process, through a real
// service's gateway to a software dev kit announcing itself over UDP on 127.0.0.1.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { reef as run } from '../../helpers/reef.ts';
import { tempDir } from '../../helpers/server.ts';

const reef = (args: string[], env: Record<string, string>) => run(args, { env });
import { startGateway, type GatewayHarness } from '../../helpers/gateway.ts';

describe('reef coap', () => {
  let h: GatewayHarness;
  let env: Record<string, string>;
  let id: string;
  const MAC = '00000000000007c1';
  const cfgDir = tempDir('reef-cli-coap-');
  before(async () => {
    h = await startGateway();
    const c = await h.t.account('kit-owner');
    id = (await h.kit(c.tenantId, MAC)).device.id;
    env = { REEF_CONFIG_DIR: cfgDir, REEF_ENDPOINT: h.t.url, REEF_CLIENT_ID: c.clientId, REEF_CLIENT_SECRET: c.clientSecret };
  });
  after(async () => {
    await h.close();
    fs.rmSync(cfgDir, { recursive: true, force: true });
  });

  it('get reads the sensor; --device takes the MAC too; --json is the bridge JSON', async () => {
    const r = await reef(['coap', 'get', '--device', id, 'snsr/arduino/temp?sens'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^2\.05 Content {2}\d+,-?\d+\.\d\d,[CF] {2}\(-?\d+(\.\d+)? [CF] at \d{4}-\d\d-\d\dT/);
    const j = await reef(['coap', 'get', '--device', MAC.toUpperCase(), 'arduino/temp?sens', '--json'], env);
    assert.equal(j.code, 0, j.stderr);
    const b = JSON.parse(j.stdout);
    assert.equal(b.deviceId, id);
    assert.equal(b.code, '2.05');
    assert.equal(typeof b.reading.value, 'number');
  });

  it('put sets the unit, which get then reads', async () => {
    const put = await reef(['coap', 'put', '--device', id, 'snsr/arduino/temp?cfg=C'], env);
    assert.equal(put.code, 0, put.stderr);
    assert.equal(put.stdout, '2.04 Changed\n');
    const cfg = await reef(['coap', 'get', '--device', id, 'snsr/arduino/temp?cfg', '--json'], env);
    assert.match(JSON.parse(cfg.stdout).payload, /^\d+,C$/);
    assert.equal((await reef(['coap', 'put', '--device', id, 'snsr/arduino/temp?cfg=F'], env)).code, 0);
  });

  it('observe prints one line per notification; --count stops it', async () => {
    const r = await reef(['coap', 'observe', '--device', id, 'snsr/arduino/temp?sens', '--count', '3', '--json'], env);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 3);
    assert.ok(lines.every((n) => n.code === '2.05' && typeof n.observe === 'number' && n.reading));
    const people = await reef(['coap', 'observe', '--device', id, 'snsr/arduino/temp?sens', '--count', '2'], env);
    assert.equal(people.code, 0, people.stderr);
    const out = people.stdout.trim().split('\n');
    assert.equal(out.length, 2);
    assert.match(out[0]!, /^\d{4}-\d\d-\d\dT\S+ {2}2\.05 Content .* observe \d+$/);
  });

  it("a kit's error, an unknown MAC and bad usage", async () => {
    const bad = await reef(['coap', 'get', '--device', id, 'snsr/arduino/temp'], env);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^reef coap: the kit answered 4\.05 .*\(BAD_GATEWAY, HTTP 502, request id \w+\)\n$/);
    const unknown = await reef(['coap', 'get', '--device', '00000000000007ff', 'snsr/arduino/temp?sens'], env);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.stderr, 'reef coap: no dev kit with MAC 00000000000007ff in solution sandbox\n');
    // Each usage error: test/unit/cli/usage.test.ts; here, how the binary reports one.
    const bare = await reef(['coap'], env);
    assert.equal(bare.code, 2, bare.stderr);
    const usage = await reef(['coap', 'get', '--device', id], env);
    assert.equal(usage.code, 2);
    assert.equal(usage.stderr, "reef coap: get needs one RESOURCE, e.g. 'snsr/arduino/temp?sens'\n");
    const help = await reef(['coap', '--help'], env);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage:\n {2}reef coap get/);
  });
});
