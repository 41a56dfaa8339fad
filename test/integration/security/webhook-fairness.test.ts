// Webhook delivery is fair across tenants (docs/alarms.md "Delivery fairness"): a tenant whose
// receiver never answers holds at most its own slots, so another tenant's webhook goes out at once.
// Before, deliveries were one queue in store order with eight senders: 100 deliveries to a silent
// receiver held every sender for their whole timeout, round after round, and another tenant's
// delivery waited behind all of them (129 s in the attack).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createAlarmComponent, type AlarmParts } from '../../../src/alarms/component.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const SOL = '/api/solutions/StudioSimulation';
const clock = { now: Date.now() };

/** A receiver that reads each request and answers `status`, or never answers ('hang'). */
async function receiver(status: number | 'hang') {
  let received = 0;
  const hung: http.ServerResponse[] = [];
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      if (status === 'hang') hung.push(res);
      else res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`,
    received: () => received,
    /** Requests answered by nobody yet, at this moment. */
    open: () => hung.filter((r) => !r.socket?.destroyed).length,
    async close() {
      for (const r of hung) r.destroy();
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    },
  };
}

async function device(s: TestServer, token: string): Promise<string> {
  const r = await s.request('POST', `${SOL}/devices`, { token, body: { deviceType: 'VirtualDevice', domainInfo: {} } });
  assert.equal(r.status, 201, await r.clone().text());
  return ((await r.json()) as { id: string }).id;
}

describe('webhook delivery fairness', () => {
  let s: TestServer;
  let parts: AlarmParts;
  before(async () => {
    s = await startTestServer({ alarms: { webhookAllowPrivate: true, webhookAllowCidrs: [] } }, [
      // A long timeout: the silent receiver's requests stay open for the whole test.
      createAlarmComponent({ now: () => clock.now, silenceCheckMs: 0, deliveryPollMs: 0, webhook: { timeoutMs: 120_000 }, onReady: (p) => (parts = p) }),
    ]);
  });
  after(() => s.close());

  it("100 deliveries to a receiver that never answers do not delay another tenant's delivery", async () => {
    const silent = await receiver('hang');
    const ok = await receiver(200);
    try {
      const hostile = await s.login('hostile');
      const victim = await s.login('victim');
      // The hostile tenant: 100 devices under a silence rule whose webhook never answers.
      for (let i = 0; i < 100; i++) await device(s, hostile.token);
      let r = await s.request('POST', `${SOL}/alarm-rules`, { token: hostile.token, body: { condition: 'silence', silence: '10m', webhook: silent.url } });
      assert.equal(r.status, 201);
      const vdev = await device(s, victim.token);
      r = await s.request('POST', `${SOL}/alarm-rules`, { token: victim.token, body: { condition: 'above', threshold: 8, deviceId: vdev, webhook: ok.url } });
      assert.equal(r.status, 201);
      await parts.engine.flush();

      // The hostile tenant's 100 alarms first: 100 deliveries, all to the silent receiver.
      clock.now += 11 * 60_000;
      await parts.engine.checkSilence();
      await waitFor('the silent receiver to be reached', () => silent.received() >= 1, 10_000);
      // Then the victim's alarm.
      r = await s.request('POST', `${SOL}/devices/${vdev}/observations`, {
        token: victim.token,
        body: { observations: [{ timestamp: new Date(clock.now).toISOString(), temperature: 20 }] },
      });
      assert.equal(r.status, 201);
      await parts.engine.flush();
      void parts.sender.deliverDue();
      await waitFor("the victim's webhook while the hostile ones hang", () => ok.received() === 1, 15_000);
      // The silent target was never given more than its share: two connections at once.
      assert.ok(silent.received() <= 2, `the silent receiver holds ${silent.received()} requests`);
      assert.ok(silent.open() <= 2);
    } finally {
      await silent.close();
      await ok.close();
    }
  });
});
