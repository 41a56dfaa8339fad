// Kit takeover: a host that can send UDP to the gateway must not be able to take over, enumerate or
// knock off a provisioned kit. The attacker here is a plain UDP socket on loopback with no account:
// it announces the victim's MAC from its own address (unsigned, signed with a made-up key, and a
// captured genuine announcement replayed), floods forged announcements, and probes which MACs exist.
// The owner's reads through the gateway must keep reaching the real kit; the attacker hears nothing.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { announcementMessage, encodeAnnouncement, serializeMessage, signAnnouncement, type Announcement } from '../../../src/coap/index.ts';
import { loadDeviceConfig } from '../../../src/device/config.ts';
import { Kit } from '../../../src/device/kit.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';
import { assertClean, tally } from './tally.ts';

const READING = /^\d{9,12},-?\d+\.\d{2},[CF]$/;
const VICTIM = '00000000000011a1';

describe('kit takeover over UDP', () => {
  let h: GatewayHarness;
  let owner: { tenantId: string; token: string };
  let victim: Kit;
  let attacker: dgram.Socket;
  const heard: Buffer[] = [];

  before(async () => {
    h = await startGateway();
    owner = await h.t.login('owner');
    victim = (await h.kit(owner.tenantId, VICTIM)).kit;
    attacker = dgram.createSocket('udp4');
    attacker.on('message', (m) => heard.push(m));
    await new Promise<void>((r) => attacker.bind(0, '127.0.0.1', () => r()));
  });
  after(async () => {
    attacker.close();
    await h.close();
  });

  const send = (msg: Buffer) => new Promise<void>((r) => attacker.send(msg, h.addr.port, '127.0.0.1', () => r()));
  const fromAttacker = (over: Partial<Announcement> = {}): Announcement => ({
    v: 1,
    mac: VICTIM,
    host: '127.0.0.1',
    port: attacker.address().port,
    prefix: 'snsr',
    fw: '1.2.1000.117958',
    cf: 0,
    seq: 1000,
    boot: Math.floor(Date.now() / 1000) + 60,
    period: 86_400,
    ...over,
  });
  let mid = 1;
  const announce = (a: Announcement) => send(serializeMessage(announcementMessage(a, mid++, Buffer.from('a1'))));

  it('forged, wrongly signed and replayed announcements never move the kit, and the attacker hears nothing', async () => {
    const t = tally('kit takeover: forged announcements');
    const real = victim.address();
    const refusedBefore = h.gw.gateway.stats.announcementsRefused;
    const probes: [string, Buffer][] = [
      ['unsigned, from the attacker', encodeAnnouncement(fromAttacker())],
      ['signed with a made-up key', encodeAnnouncement(signAnnouncement(fromAttacker(), randomBytes(32)))],
      ['a genuine announcement replayed from the attacker', encodeAnnouncement(victim.module.announcement())],
      ['a genuine signature on the attacker address', encodeAnnouncement({ ...fromAttacker(), sig: victim.module.announcement().sig! })],
      ['the longest period, unsigned', encodeAnnouncement(fromAttacker({ period: 0xffffffff }))],
    ];
    for (const [, payload] of probes) {
      const a = JSON.parse(payload.toString()) as Announcement;
      await announce(a);
    }
    await until(() => h.gw.gateway.stats.announcementsRefused - refusedBefore >= probes.length, 'every forged announcement is refused');
    for (const [what] of probes) {
      const k = h.gw.gateway.kits.get(VICTIM);
      t.record(k?.peer.port === real.port ? 'correct' : 'leak', `${what}: the kit now routes to ${k?.peer.port}`);
    }
    // The owner still reaches the real kit, whose reading is a real one.
    const port = await freePort();
    await openSession(h, port, owner.token);
    const get = await viaGateway(h, port, VICTIM, '/snsr/arduino/temp?sens');
    t.record(READING.test(get.stdout.trim()) ? 'correct' : 'leak', `owner read after the attack: ${get.out}`);
    t.record(heard.length === 0 ? 'correct' : 'leak', `the attacker got ${heard.length} answers`);
    assertClean(t);
  });

  it('an unknown MAC and a provisioned MAC are refused alike: no answer either way', async () => {
    const t = tally('kit takeover: enumeration');
    const refusedBefore = h.gw.gateway.stats.announcementsRefused;
    heard.length = 0;
    for (const mac of [VICTIM, '0123456789abcdef', '00000000000011a2']) await announce(signAnnouncement(fromAttacker({ mac }), randomBytes(32)));
    await until(() => h.gw.gateway.stats.announcementsRefused - refusedBefore >= 3, 'the probes are refused');
    // A genuine kit's announcement, by contrast, is acknowledged (so the kit knows it is in).
    assert.equal(victim.module.gatewayAccepted, true);
    t.record(heard.length === 0 ? 'correct' : 'leak', `answers to the attacker: ${heard.length}`);
    assertClean(t);
  });

  it('a flood of forged announcements leaves the kit reachable', async () => {
    const t = tally('kit takeover: flood');
    const refusedBefore = h.gw.gateway.stats.announcementsRefused;
    const N = 2000;
    for (let i = 0; i < N; i++) await announce(fromAttacker({ seq: i, port: 1 + (i % 65_000) }));
    await until(() => h.gw.gateway.stats.announcementsRefused - refusedBefore >= N * 0.95, 'the flood is refused');
    t.record(h.gw.gateway.kits.get(VICTIM)?.peer.port === victim.address().port ? 'correct' : 'leak', 'kit moved by the flood');
    const port = await freePort();
    await openSession(h, port, owner.token);
    const get = await viaGateway(h, port, VICTIM, '/snsr/arduino/temp?sens');
    t.record(READING.test(get.stdout.trim()) ? 'correct' : 'wrong', `owner read after the flood: ${get.out}`);
    assertClean(t);
  });

  it('a kit without its key, or with another kit key, is ignored and says so; with its key it is accepted', async () => {
    const account = (await h.t.services.store.getAccountByTenantId(owner.tenantId))!;
    const mac = '00000000000011b1';
    const { kitKey } = await provisionKit(h.t.services.store, null, account, mac);
    const cfg = { mac, host: '127.0.0.1', port: 0, gateway: { address: '127.0.0.1', port: h.addr.port }, monitorWindowMs: 0, logLevel: 0, periodMs: 1000 };
    const said: boolean[] = [];
    const keyless = new Kit(loadDeviceConfig(cfg), { onGateway: (_m, ok) => said.push(ok) });
    const wrong = new Kit(loadDeviceConfig({ ...cfg, key: randomBytes(32).toString('hex') }));
    h.kits.push(keyless, wrong);
    await keyless.start();
    await wrong.start();
    await until(() => keyless.module.gatewayAccepted === false && wrong.module.gatewayAccepted === false, 'both kits learn they are ignored');
    assert.deepEqual(said, [false]);
    assert.equal(h.gw.gateway.kits.get(mac), undefined, 'neither kit was learned');
    await keyless.stop();
    await wrong.stop();
    const right = new Kit(loadDeviceConfig({ ...cfg, key: kitKey }));
    h.kits.push(right);
    await right.start();
    await until(() => right.module.gatewayAccepted === true, 'the kit with its key is accepted');
    assert.equal(h.gw.gateway.kits.get(mac)?.peer.port, right.address().port);
  });
});
