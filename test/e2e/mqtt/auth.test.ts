// Who may connect to the MQTT broker and what they may subscribe to, with real clients (the `mqtt`
// npm client and mosquitto_sub): token and client id + secret logins, wrong and expired tokens
// refused, the account and token re-checked while connected (disabled account, expiring token,
// rotated secret close the connection), subscriptions only under the tenant's own group's tenant
// ids (SUBACK 0x80 otherwise), and client ids that are each tenant's own.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { MqttClient } from 'mqtt';
import { rotateSecret, setDisabled } from '../../../src/auth/accounts.ts';
import { TokenService } from '../../../src/auth/tokens.ts';
import { closed, connect, grants, mosquittoSub, startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';

describe('MQTT authentication and authorization', () => {
  let h: MqttHarness;
  const clients: MqttClient[] = [];
  const track = (c: MqttClient) => {
    clients.push(c);
    return c;
  };

  before(async () => {
    // A short re-check period, so a disabled account's idle connection ends within the test.
    h = await startMqtt({ broker: { recheckMs: 200 } });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
    await h.close();
  });

  /** A token of the service's own key, issued on another clock or with another lifetime. */
  async function tokenWith(tenantId: string, ttlSeconds: number, now: () => number = Date.now): Promise<string> {
    const ts = new TokenService(h.t.services.store, { ttlSeconds, issuer: 'reef', secret: null }, now);
    await ts.init();
    return (await ts.issue(tenantId)).accessToken;
  }

  it('accepts an access token as password whatever the user name, and grants the QoS asked for under the own tenant id', async () => {
    const a = await h.t.login('alice');
    const c = track(await connect(h, a.token, { username: 'notused' }));
    assert.deepEqual(await grants(c, { [`${a.tenantId}/alert/+/+`]: { qos: 0 }, [`${a.tenantId}/alert/+/temp`]: { qos: 1 }, [`${a.tenantId}/errors/#`]: { qos: 2 } }), [0, 1, 2]);
  });

  it('mosquitto_sub logs in with the token and subscribes under its tenant id', async () => {
    const a = await h.t.login('alice-cli');
    const sub = mosquittoSub(h.port, ['-u', 'notused', '-P', a.token, '-t', `${a.tenantId}/alert/+/+`, '-E']);
    assert.equal(await sub.exit, 0, sub.stderr());
    assert.deepEqual(sub.granted, [0]);
  });

  it('accepts the client id as user name with the client secret as password', async () => {
    const a = await h.t.account('secret-user');
    const c = track(await connect(h, a.clientSecret, { username: a.clientId }));
    const [g] = await c.subscribeAsync(`${a.tenantId}/alert/+/+`);
    assert.equal(g!.qos, 0);
  });

  it('refuses a wrong secret, a forged or garbage token, an expired token and no password (CONNACK refused)', async () => {
    const a = await h.t.account('bob');
    const refused = async (password: string, username = 'notused') => {
      const e = await connect(h, password, { username }).then(
        (c) => {
          track(c);
          return null;
        },
        (err: Error & { code?: number }) => err,
      );
      assert.ok(e, `connecting with ${JSON.stringify(password.slice(0, 20))} must fail`);
      return e.code;
    };
    assert.equal(await refused('wrong-secret-000000000000', a.clientId), 4);
    assert.equal(await refused('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJUTjEifQ.AAAA'), 4);
    assert.equal(await refused('not a token at all'), 4, 'a non-token password with a user name that is no client id');
    assert.equal(await refused(await tokenWith(a.tenantId, 60, () => Date.now() - 3_600_000)), 4, 'expired');
    assert.equal(await refused(''), 4);

    const sub = mosquittoSub(h.port, ['-u', 'notused', '-P', 'garbage.garbage.garbage', '-t', `${a.tenantId}/alert/+/+`, '-E']);
    assert.notEqual(await sub.exit, 0);
    assert.match(sub.stderr() + sub.lines.join('\n'), /not authori[sz]ed|bad user name or password/i);
  });

  it('refuses a disabled account at CONNECT with "not authorized"', async () => {
    const a = await h.t.login('disabled-early');
    await setDisabled(h.t.services.store, a.tenantId, true);
    await until(async () => (await h.t.services.auth.account(a.tenantId))?.disabled === true, 'the account cache sees the change');
    const e = await connect(h, a.token).then(
      (c) => {
        track(c);
        return null;
      },
      (err: Error & { code?: number }) => err,
    );
    assert.equal(e?.code, 5);
  });

  it('refuses "#", wildcard tenants, "$SYS" and another tenant\'s prefix with SUBACK 0x80, never a wider grant', async () => {
    const a = await h.t.login('carol');
    const other = await h.t.login('dave');
    const c = track(await connect(h, a.token));
    assert.deepEqual(await grants(c, [`#`, `+/alert/+/+`, `$SYS/#`, `${other.tenantId}/alert/+/+`, `${other.tenantId}/#`, `${a.tenantId}/alert/#`]), [128, 128, 128, 128, 128, 0]);
    const sub = mosquittoSub(h.port, ['-u', 'x', '-P', a.token, '-t', '#', '-t', `${other.tenantId}/alert/+/+`, '-E']);
    await sub.exit;
    assert.deepEqual(sub.granted, [128, 128]);
  });

  it("lets a member of a tenant group subscribe under another member's tenant id, and nobody outside the group", async () => {
    const a = await h.t.login('g-alice', 'lab');
    const b = await h.t.login('g-bob', 'lab');
    const outsider = await h.t.login('g-eve', 'elsewhere');
    const cb = track(await connect(h, b.token));
    assert.deepEqual(await grants(cb, [`${a.tenantId}/alert/+/+`]), [0]);
    const ce = track(await connect(h, outsider.token));
    assert.deepEqual(await grants(ce, [`${a.tenantId}/alert/+/+`]), [128]);
  });

  it('closes the connection of an account disabled while connected (periodic re-check)', async () => {
    const a = await h.t.login('erin');
    const c = track(await connect(h, a.token));
    await c.subscribeAsync(`${a.tenantId}/alert/+/+`);
    const gone = closed(c);
    await setDisabled(h.t.services.store, a.tenantId, true);
    await gone;
    assert.equal(c.connected, false);
  });

  it('closes a connection when its token expires', async () => {
    const a = await h.t.account('frank');
    const c = track(await connect(h, await tokenWith(a.tenantId, 1)));
    await c.subscribeAsync(`${a.tenantId}/alert/+/+`);
    await closed(c);
    assert.equal(c.connected, false);
  });

  it('closes a client id + secret connection when the secret is rotated', async () => {
    const a = await h.t.account('grace');
    const c = track(await connect(h, a.clientSecret, { username: a.clientId }));
    const gone = closed(c);
    await rotateSecret(h.t.services.store, a.tenantId);
    await gone;
    assert.equal(c.connected, false);
  });

  it('closes a token connection when the secret is rotated after the token was issued', async () => {
    const a = await h.t.login('grace-token');
    const c = track(await connect(h, a.token));
    const gone = closed(c);
    await rotateSecret(h.t.services.store, a.tenantId);
    await gone;
    assert.equal(c.connected, false);
  });

  it("lets two tenants use the same client id without touching each other's client; the same tenant takes over", async () => {
    const a = await h.t.login('henry');
    const b = await h.t.login('ivy');
    const holder = track(await connect(h, a.token, { clientId: 'shared-id-1' }));
    const other = track(await connect(h, b.token, { clientId: 'shared-id-1' }));
    assert.equal(holder.connected, true, "the other tenant's CONNECT did not cut the holder off");
    assert.equal(other.connected, true);
    const gone = closed(holder);
    const again = track(await connect(h, a.token, { clientId: 'shared-id-1' }));
    await gone;
    assert.equal(again.connected, true);
    assert.equal(other.connected, true, "a tenant's takeover of its own client id leaves the other tenant's client alone");
  });
});
