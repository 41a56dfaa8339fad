// Authority ends everywhere at once (docs/security.md "Tokens and their authority"): when an account
// is disabled or its secret rotated, its MQTT connections get nothing more from the moment the
// node knows it and are closed within about a second, as event streams are (not at the end of a
// 30 s re-check period, receiving a group member's messages all along).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { rotateSecret, setDisabled } from '../../../src/auth/accounts.ts';
import { waitFor } from '../../helpers/wait.ts';
import { closed, connect, inbox, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

const MAC = '0013500500000001';

describe('MQTT: authority ends at once', () => {
  let h: MqttHarness;
  const clients: MqttClient[] = [];
  const track = (c: MqttClient) => {
    clients.push(c);
    return c;
  };

  // The default settings: nothing shortened for the test.
  before(async () => {
    h = await startMqtt();
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  const kitPayload = (tenantId: string, text: string) =>
    h.mq.broker.publishKitPayload({ kind: 'kit-payload', groupId: 'g', tenantId, mac: MAC, sensorType: 'temp', payload: Buffer.from(text).toString('base64') });

  /**
   * `victim` (connected as `connectAs`) and a witness of the same group both subscribe to a group
   * member's kit payloads; `revoke` takes the victim's authority away. Once the node sees it, a
   * message the witness receives never reaches the victim, whose connection is closed.
   */
  async function endsAtOnce(
    group: string,
    connectAs: (a: { token: string; clientId: string; clientSecret: string }) => Promise<MqttClient>,
    revoke: (tenantId: string) => Promise<unknown>,
    seen: (tenantId: string) => Promise<boolean>,
  ) {
    const victim = await h.t.login(`${group}-victim`, group);
    const member = await h.t.login(`${group}-member`, group);
    const v = track(await connectAs(victim));
    const w = track(await connect(h, member.token));
    await v.subscribeAsync(`${member.tenantId}/alert/+/+`);
    await w.subscribeAsync(`${member.tenantId}/alert/+/+`);
    const toVictim = inbox(v);
    const toWitness = inbox(w);
    kitPayload(member.tenantId, 'before');
    await waitFor('both receive the message before', () => toVictim.length === 1 && toWitness.length === 1);

    const gone = closed(v);
    await revoke(victim.tenantId);
    await waitFor('the node sees the change', () => seen(victim.tenantId));
    kitPayload(member.tenantId, 'after');
    await waitFor('the witness receives the message after', () => toWitness.length === 2);
    assert.deepEqual(
      toVictim.map((m) => m.payload.toString()),
      ['before'],
      'nothing reaches the revoked connection',
    );
    // Within about a second (the re-check runs every second); the cap only keeps a broken test from hanging.
    await waitFor('the revoked connection is closed', () => gone.then(() => true), 10_000);
  }

  it('a disabled account', async () => {
    await endsAtOnce(
      'lab-disable',
      (a) => connect(h, a.token),
      (tenantId) => setDisabled(h.t.services.store, tenantId, true),
      async (tenantId) => (await h.t.services.auth.account(tenantId))?.disabled === true,
    );
  });

  it('a rotated secret, for a client id + secret connection', async () => {
    let hash = '';
    await endsAtOnce(
      'lab-rotate',
      async (a) => {
        const c = await connect(h, a.clientSecret, { username: a.clientId });
        hash = (await h.t.services.auth.account((await h.t.services.store.getAccountByClientId(a.clientId.toLowerCase()))!.tenantId))!.secretHash;
        return c;
      },
      (tenantId) => rotateSecret(h.t.services.store, tenantId),
      async (tenantId) => (await h.t.services.auth.account(tenantId))?.secretHash !== hash,
    );
  });
});
