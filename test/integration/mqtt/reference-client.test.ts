// The original platform's public reference MQTT client runs unchanged
// against Reef: it obtains a token with its client id and secret (POST /api/tokens), CONNECTs with
// user name `notused` and the token as password, subscribes to `<tenantId>/alert/+/+`, turns each
// kit payload (text `<epoch>,<value>,<unit>` or the CBOR map {0:"temp",1:"<text>"}) into
// {"observations":[{"timestamp":<epoch as ISO ms>,"temperature":"<value>","macId":"<mac>"}]} and
// posts it to the sandbox device whose domainInfo.nic_macID is that MAC: a device its user made, or
// a provisioned kit, listed before its network module, whose series the service keeps in °C
// (docs/api.md "Temperature units", "A kit's network module").
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import mqtt, { type MqttClient } from 'mqtt';
import { unwrapCbor } from '../../../src/coap/index.ts';
import { startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';

const TEXT_MAC = '00000000000016a1';
const CBOR_MAC = '00000000000016a2';

/** The reference client's loop, written from the description (it knows nothing of Reef). */
async function referenceClient(api: string, broker: string, creds: { clientId: string; clientSecret: string; tenantId: string }, posted: (status: number) => void): Promise<MqttClient> {
  const t = await fetch(`${api}/api/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(creds) });
  const { accessToken } = (await t.json()) as { accessToken: string };
  const client = await mqtt.connectAsync(broker, { username: 'notused', password: accessToken, protocolVersion: 4, reconnectPeriod: 0 });
  client.on('message', (topic, payload) => {
    void (async () => {
      const mac = topic.split('/')[2]!;
      const text = payload[0] === 0xa2 && payload[1] === 0x00 ? unwrapCbor(payload).text : payload.toString('utf8');
      const [epoch, value] = text.split(',');
      const body = { observations: [{ timestamp: new Date(Number(epoch) * 1000).toISOString(), temperature: value, macId: mac }] };
      const list = (await (await fetch(`${api}/api/solutions/sandbox/devices`, { headers: { authorization: accessToken } })).json()) as {
        devices: { id: string; domainInfo: { nic_macID?: string } }[];
      };
      const device = list.devices.find((d) => d.domainInfo.nic_macID === mac);
      if (!device) return;
      const r = await fetch(`${api}/api/solutions/sandbox/devices/${device.id}/observations`, {
        method: 'POST',
        headers: { authorization: accessToken, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      posted(r.status);
    })().catch(() => undefined); // a post cut off when the test stops the service
  });
  await client.subscribeAsync(`${creds.tenantId}/alert/+/+`);
  return client;
}

describe("the original's reference MQTT client", () => {
  let h: MqttHarness;
  let client: MqttClient | undefined;
  let second: MqttClient | undefined;

  before(async () => {
    h = await startMqtt({ gateway: true });
  });
  after(async () => {
    await client?.endAsync(true);
    await second?.endAsync(true);
    await h.close();
  });

  it('forwards text and CBOR kit payloads to the devices named by nic_macID, unchanged', async () => {
    const acct = await h.t.login('ref');
    // The devices the reference client posts to, as its users created them on the original.
    const ids: Record<string, string> = {};
    for (const mac of [TEXT_MAC, CBOR_MAC]) {
      const r = await h.t.request('POST', '/api/solutions/sandbox/devices', { token: acct.token, body: { deviceType: 'MILLI', domainInfo: { nic_macID: mac } } });
      assert.equal(r.status, 201);
      ids[mac] = ((await r.json()) as { id: string }).id;
    }
    const statuses: number[] = [];
    client = await referenceClient(h.t.url, h.url, acct, (s) => statuses.push(s));
    await h.gw!.kit(acct.tenantId, TEXT_MAC, { unit: 'F' });
    await h.gw!.kit(acct.tenantId, CBOR_MAC, { cbor: true, unit: 'C' });

    const obs = async (mac: string) => (await h.t.services.store.queryObservations(ids[mac]!, { limit: 1000 })).observations;
    // Rows become visible at the commit, a moment before the client sees its 201: wait for both.
    await until(async () => statuses.length >= 4 && (await obs(TEXT_MAC)).length >= 2 && (await obs(CBOR_MAC)).length >= 2, 'the reference client posted readings of both kits');
    assert.ok(
      statuses.every((s) => s === 201),
      `every post was accepted: ${statuses.join(',')}`,
    );
    for (const mac of [TEXT_MAC, CBOR_MAC]) {
      for (const o of await obs(mac)) {
        // Whole seconds (the kit's epoch), the value as the kit wrote it, and the MAC as a free field.
        assert.equal(o.ts % 1000, 0);
        assert.equal(typeof o.temperature, 'number');
        assert.deepEqual(o.extra, { macId: mac });
      }
    }
  });
  it('with only provisioned kits it posts to the kit (listed before its network module), whose series stays in °C', async () => {
    const acct = await h.t.login('ref-kits');
    const macs = { F: '00000000000016b1', C: '00000000000016b2' };
    const statuses: number[] = [];
    second = await referenceClient(h.t.url, h.url, acct, (s) => statuses.push(s));
    const f = await h.gw!.kit(acct.tenantId, macs.F, { unit: 'F', periodMs: 1000 });
    const c = await h.gw!.kit(acct.tenantId, macs.C, { cbor: true, unit: 'C', periodMs: 1000 });
    const obs = async (id: string) => (await h.t.services.store.queryObservations(id, { limit: 1000 })).observations;
    // The client's own rows carry its macId: wait until each kit has one.
    await until(async () => (await obs(f.device.id)).some((o) => o.extra?.macId) && (await obs(c.device.id)).some((o) => o.extra?.macId), "the reference client's uploads are stored on both kits");
    assert.ok(
      statuses.every((s) => s === 201),
      `every post was accepted: ${statuses.join(',')}`,
    );
    for (const [kit, unit] of [
      [f.device, 'F'],
      [c.device, 'C'],
    ] as const) {
      for (const o of await obs(kit.id)) {
        assert.equal(o.extra?.unit, 'C', JSON.stringify(o));
        assert.equal(o.extra?.rawUnit, unit, JSON.stringify(o));
        const raw = o.extra?.rawValue as number;
        assert.equal(o.temperature, unit === 'F' ? Math.round((((raw - 32) * 5) / 9) * 10_000) / 10_000 : raw, JSON.stringify(o));
      }
    }
  });
});
