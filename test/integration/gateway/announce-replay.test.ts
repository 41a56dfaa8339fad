// A kit announcement replayed from another address is refused, and logged once per source a minute,
// not once per datagram: over real UDP to a gateway in this process, its clock injected.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { announcementMessage, serializeMessage } from '../../../src/coap/index.ts';
import type { Kit } from '../../../src/device/kit.ts';
import { startGateway, until, type GatewayHarness } from '../../helpers/gateway.ts';
import { testClock } from '../../helpers/clock.ts';

describe('replayed kit announcements', () => {
  const clock = testClock();
  const lines: { msg: string; level: number; peer?: string; suppressed?: number; outcome?: string }[] = [];
  let h: GatewayHarness;
  let kit: Kit;
  let replayer: dgram.Socket;

  before(async () => {
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    h = await startGateway({ log, options: { now: clock.now } });
    const a = await h.t.login('rita');
    kit = (await h.kit(a.tenantId, '00000000000004a1')).kit;
    replayer = dgram.createSocket('udp4');
    await new Promise<void>((r) => replayer.bind(0, '127.0.0.1', () => r()));
  });
  after(async () => {
    replayer.close();
    await h.close();
  });

  /** Sends the kit's own signed announcement from the replayer's address `n` times; waits until all are refused. */
  async function replay(n: number): Promise<void> {
    const refused = h.gw.gateway.stats.announcementsRefused;
    const announcement = kit.module.announcement();
    // A new Message ID each: not a duplicate (RFC 7252 §4.5).
    for (let i = 0; i < n; i++) replayer.send(serializeMessage(announcementMessage(announcement, mid++, Buffer.from('r1'))), h.addr.port, h.addr.address);
    await until(() => h.gw.gateway.stats.announcementsRefused - refused === n, `the gateway refuses the ${n} replays`);
  }

  let mid = 1;
  const warned = () => lines.filter((l) => l.msg === 'gateway refused an announcement');

  it('logs one WARN line for a burst of replays, and a minute later one more with the count suppressed', async () => {
    const from = `127.0.0.1|${replayer.address().port}`;
    await replay(5);
    assert.equal(warned().length, 1);
    assert.equal(warned()[0]!.level, 40);
    assert.equal(warned()[0]!.peer, from);
    assert.equal(warned()[0]!.outcome, 'refused-source');
    assert.equal(warned()[0]!.suppressed, 0);
    await replay(3);
    assert.equal(warned().length, 1, 'still one line within the minute');
    clock.advance(60_000);
    await replay(2);
    assert.equal(warned().length, 2);
    assert.equal(warned()[1]!.suppressed, 7, 'the 4 + 3 replays not logged');
    assert.equal(h.gw.gateway.kits.get(kit.mac)?.peer.port, kit.module.address().port, 'the kit was not moved');
  });
});
