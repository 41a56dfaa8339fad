// How many MQTT connections a node holds and for how long a connection may say nothing
// (docs/security.md "Limits"): caps per source address, per account and per node, with the
// clients already connected still served at the cap; a TLS connection that never finishes its
// handshake, a connection that never sends CONNECT, and a client that asked for no keep-alive are
// closed. Unbounded, 21,000 connections of one token take every file descriptor of a node, and a
// silent connection to the TLS port stays open for good.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { testConfig, type MqttLimits } from '../../../src/config/config.ts';
import { connectPacket, RawClient, subscribePacket } from '../../helpers/mqtt-wire.ts';
import { tempDir } from '../../helpers/server.ts';
import { opensslCertificate } from '../../helpers/tls.ts';
import { waitFor } from '../../helpers/wait.ts';
import { connect, startMqtt, type MqttHarness } from '../../helpers/mqtt.ts';

const defaults = testConfig({ dataDir: '/x' }).mqtt.limits;
const limitsWith = (l: Partial<MqttLimits>): MqttLimits => ({ ...defaults, ...l });

/** Opens raw connections and sends CONNECT on each; resolves once each has a CONNACK or was closed. */
async function openMany(port: number, n: number, who: (i: number) => { token: string; from: string }): Promise<RawClient[]> {
  const all: RawClient[] = [];
  for (let i = 0; i < n; i++) {
    const { token, from } = who(i);
    const r = RawClient.tcp(port, from);
    all.push(r);
    await r.opened;
    r.send(connectPacket(token));
    // One at a time: which connections are the extra ones is then certain.
    await waitFor(`connection ${i} answered or closed`, () => r.connack !== undefined || r.isClosed);
  }
  return all;
}

describe('MQTT connection caps', () => {
  let h: MqttHarness;
  let open: RawClient[] = [];

  before(async () => {
    h = await startMqtt({ mqtt: { limits: limitsWith({ maxConnections: 50, maxPerAddress: 20, maxPerAccount: 20 }), retain: false } });
  });
  after(async () => {
    for (const r of open) r.end();
    await h.close();
  });

  /** Closes the previous test's connections and waits until the broker counts none. */
  async function fresh(): Promise<void> {
    for (const r of open) r.end();
    open = [];
    await waitFor('no connection left', () => h.mq.broker.aedes.connectedClients === 0);
    await waitFor('the caps count no connection', () => h.mq.broker.gate.open === 0);
  }

  /** Accounts with tokens, one login at a time (the login queue takes 8 at once from one address). */
  async function logins(name: string, n: number) {
    const out = [];
    for (let i = 0; i < n; i++) out.push(await h.t.login(`${name}-${i}`));
    return out;
  }

  /** A connected raw client still gets a message of its tenant. */
  async function stillServed(r: RawClient, tenantId: string): Promise<void> {
    const before = r.received.length;
    r.send(subscribePacket(`${tenantId}/alert/+/+`));
    await waitFor('SUBACK', () => r.received.length >= before + 5);
    h.mq.broker.publishKitPayload({ kind: 'kit-payload', groupId: 'g', tenantId, mac: '0013500500000001', sensorType: 'temp', payload: Buffer.from('still here').toString('base64') });
    await waitFor('the message', () => r.received.includes(Buffer.from('still here')));
  }

  it('closes connections past the cap of one source address at once, and lets other addresses in', async () => {
    await fresh();
    const accounts = await logins('addr', 5);
    open = await openMany(h.port, 25, (i) => ({ token: accounts[i % 5]!.token, from: '127.0.0.2' }));
    assert.equal(open.filter((r) => r.connack === 0).length, 20);
    const extra = open.slice(20);
    assert.ok(
      extra.every((r) => r.isClosed && r.connack === undefined),
      'the 5 past the cap are closed without a CONNACK',
    );
    const elsewhere = (await openMany(h.port, 1, () => ({ token: accounts[0]!.token, from: '127.0.0.3' })))[0]!;
    open.push(elsewhere);
    assert.equal(elsewhere.connack, 0, 'another address is not held to this one');
    await stillServed(open[0]!, accounts[0]!.tenantId);
  });

  it('refuses CONNECTs past the cap of one account with CONNACK 0x03, and lets other accounts in', async () => {
    await fresh();
    const a = await h.t.login('many-conns');
    const b = await h.t.login('other-account');
    open = await openMany(h.port, 25, (i) => ({ token: a.token, from: `127.0.1.${1 + (i % 5)}` }));
    assert.deepEqual(
      open.map((r) => r.connack),
      [...Array(20).fill(0), ...Array(5).fill(3)],
    );
    const other = await connect(h, b.token);
    assert.equal(other.connected, true);
    await other.endAsync();
    await stillServed(open[3]!, a.tenantId);
  });

  it("counts an account's stored persistent sessions toward its cap, and always lets one be resumed", async () => {
    await fresh();
    const a = await h.t.login('many-sessions');
    for (let i = 0; i < 20; i++) {
      const c = await connect(h, a.token, { clientId: `kept-${i}`, clean: false });
      await c.endAsync();
    }
    await waitFor('20 sessions stored', async () => (await h.mq.broker.stored.awayOf(a.tenantId)) === 20);
    const refused = await connect(h, a.token, { clientId: 'one-more' }).then(
      (c) => c.endAsync().then(() => 0),
      (e: { code?: number }) => e.code,
    );
    assert.equal(refused, 3, 'a new client id past the cap: CONNACK 0x03');
    const resumed = await connect(h, a.token, { clientId: 'kept-7', clean: false });
    assert.equal(resumed.connected, true);
    await resumed.endAsync();
  });

  it("closes connections past the node's cap at once, whoever opens them, and serves those it holds", async () => {
    await fresh();
    const accounts = await logins('node', 20);
    open = await openMany(h.port, 60, (i) => ({ token: accounts[i % 20]!.token, from: `127.0.2.${1 + (i % 20)}` }));
    assert.equal(open.filter((r) => r.connack === 0).length, 50);
    assert.ok(open.slice(50).every((r) => r.isClosed && r.connack === undefined));
    await stillServed(open[49]!, accounts[49 % 20]!.tenantId);
    // A place freed is a place taken again.
    open[0]!.end();
    await waitFor('the broker counts the closed connection', () => h.mq.broker.gate.open === 49);
    const again = (await openMany(h.port, 1, () => ({ token: accounts[0]!.token, from: '127.0.2.1' })))[0]!;
    open.push(again);
    assert.equal(again.connack, 0);
  });
});

describe('MQTT connections that say nothing', () => {
  let h: MqttHarness;
  let dir: string;
  let cert: { cert: string; key: string; certPem: string };
  let token: string;
  const raws: RawClient[] = [];

  before(async () => {
    dir = tempDir('reef-mqtt-silent-');
    cert = opensslCertificate(dir, '127.0.0.1');
    // One second for the handshake and for CONNECT; a keep-alive of at most one second.
    h = await startMqtt({ mqtt: { tlsCert: cert.cert, tlsKey: cert.key, tlsPort: 0, limits: limitsWith({ connectTimeoutMs: 1000, maxKeepAliveSeconds: 1 }) } });
    token = (await h.t.login('quiet')).token;
  });
  after(async () => {
    for (const r of raws) r.end();
    await h.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const track = (r: RawClient) => {
    raws.push(r);
    return r;
  };

  it('closes a connection to the TLS port that never starts its handshake', async () => {
    const r = track(RawClient.tcp(h.mq.broker.tlsAddress()!.port));
    await r.opened;
    await waitFor('the silent TLS connection is closed', () => r.isClosed, 15_000);
  });

  it('closes a TLS connection that finished its handshake but sends no CONNECT, and a plain one', async () => {
    const t = track(RawClient.tls(h.mq.broker.tlsAddress()!.port, cert.certPem));
    const p = track(RawClient.tcp(h.port));
    await Promise.all([t.opened, p.opened]);
    assert.equal(t.isClosed, false, 'the handshake succeeded');
    await waitFor('both are closed', () => t.isClosed && p.isClosed, 15_000);
  });

  it('holds a client that asked for no keep-alive, or a longer one, to the maximum: silent for 1.5 times it, it is closed', async () => {
    const none = track(RawClient.tcp(h.port));
    const long = track(RawClient.tcp(h.port));
    await Promise.all([none.opened, long.opened]);
    none.send(connectPacket(token, { keepAlive: 0 }));
    long.send(connectPacket(token, { keepAlive: 3600 }));
    await waitFor('both are accepted', () => none.connack === 0 && long.connack === 0);
    await waitFor('both are closed for silence', () => none.isClosed && long.isClosed, 15_000);
  });
});
