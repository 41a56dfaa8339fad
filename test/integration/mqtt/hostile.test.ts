// Hostile input at the MQTT port (docs/mqtt.md): malformed packets before and after
// CONNECT, packets announcing more than the limits (cut at the header, before the body is held),
// and seeded random bytes. Every probe must end in the answer MQTT 3.1.1 demands (the connection
// closed, a CONNACK refusal) and the broker must keep serving real clients, holding no state of the
// connections it closed.
import assert from 'node:assert/strict';
import net from 'node:net';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import { mulberry32 as prng } from '../../../src/core/random.ts';
import { testConfig } from '../../../src/config/config.ts';
import { assertClean, tally } from '../security/tally.ts';
import { connectPacket, publishPacket, subscribePacket, varint } from '../../helpers/mqtt-wire.ts';
import { connect, grants, startMqtt, until, type MqttHarness } from '../../helpers/mqtt.ts';

const BODY_LIMIT = 64 * 1024;

interface Exchange {
  /** Everything the broker sent. */
  received: Buffer;
  /** The broker closed the connection (we never end it first in these probes, unless `end` was asked). */
  closedByServer: boolean;
  /** Bytes of ours the broker took before closing. */
  written: number;
}

/**
 * Sends `chunks` on a fresh connection and waits for the broker to close it (or, with `end`, ends it
 * ourselves). With `afterConnack`, the first chunk (a CONNECT) goes alone and the rest follow its
 * CONNACK, so they reach the handlers of an authenticated client.
 */
function exchange(port: number, chunks: Buffer[], o: { end?: boolean; afterConnack?: boolean } = {}): Promise<Exchange> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    let written = 0;
    let ended = false;
    let rest: Buffer[] | null = null;
    s.on('data', (b) => {
      got.push(b);
      if (rest && Buffer.concat(got).length >= 4) {
        const r = rest;
        rest = null;
        send(r);
      }
    });
    s.on('error', () => undefined);
    s.on('close', () => resolve({ received: Buffer.concat(got), closedByServer: !ended, written }));
    const send = (list: Buffer[]) => {
      for (const c of list) {
        if (s.destroyed) break;
        s.write(c, (e) => {
          if (!e) written += c.length;
        });
      }
      if (o.end) {
        ended = true;
        s.end();
      }
    };
    s.on('connect', () => {
      if (o.afterConnack) {
        rest = chunks.slice(1);
        s.write(chunks[0]!, (e) => {
          if (!e) written += chunks[0]!.length;
        });
      } else send(chunks);
    });
  });
}

describe('hostile input at the MQTT port', () => {
  let h: MqttHarness;
  let alice: { tenantId: string; token: string };

  before(async () => {
    h = await startMqtt({ config: { http: { ...testConfig({ dataDir: '/x' }).http, bodyLimitBytes: BODY_LIMIT } } });
    alice = await h.t.login('alice');
  });
  after(() => h.close());

  /** A real client still connects and subscribes. */
  async function stillServing(): Promise<void> {
    const c = await connect(h, alice.token);
    assert.deepEqual(await grants(c, [`${alice.tenantId}/alert/+/+`]), [0]);
    await c.endAsync();
  }

  it('closes the connection on malformed packets before CONNECT, answering only what MQTT 3.1.1 asks', async () => {
    const t = tally('mqtt: malformed before CONNECT');
    const closes = async (what: string, chunks: Buffer[], reply?: (b: Buffer) => boolean) => {
      const x = await exchange(h.port, chunks);
      const ok = x.closedByServer && (reply ? reply(x.received) : x.received.length === 0);
      t.record(ok ? 'correct' : 'wrong', `${what}: closed ${x.closedByServer}, reply ${x.received.toString('hex').slice(0, 32)}`);
    };
    await closes('garbage', [Buffer.alloc(16, 0xff)]);
    await closes('SUBSCRIBE first (§3.1.0-1)', [subscribePacket(`${alice.tenantId}/alert/+/+`)]);
    await closes('protocol name MQTX (§3.1.2-1)', [connectPacket(alice.token, { name: 'MQTX' })]);
    // §3.1.2-2: an unsupported level gets CONNACK 0x01 and the connection closed: MQTT 5 (the broker
    // speaks 3.1 and 3.1.1). A level no MQTT version has is refused by the parser: closed unanswered.
    await closes('protocol level 5', [connectPacket(alice.token, { level: 5 })], (b) => b.length >= 4 && b[0] === 0x20 && b[3] === 0x01);
    await closes('protocol level 9', [connectPacket(alice.token, { level: 9 })]);
    await closes('reserved CONNECT flag (§3.1.2-3)', [connectPacket(alice.token, { flags: 0xc3 })]);
    await closes('five-byte Remaining Length (§2.2.3)', [Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x7f])]);
    await closes('a CONNECT announcing 256 MiB', [Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f])]);
    await closes('a CONNECT announcing 70 KiB', [Buffer.concat([Buffer.from([0x10]), varint(70 * 1024)])]);
    await closes('a wrong token', [connectPacket('a.b.c')], (b) => b.length === 4 && b[0] === 0x20 && b[3] === 0x04);
    assertClean(t);
    await stillServing();
  });

  it('closes the connection on malformed or oversized packets after CONNECT', async () => {
    const t = tally('mqtt: malformed after CONNECT');
    const CONNACK_OK = Buffer.from([0x20, 0x02, 0x00, 0x00]);
    const closes = async (what: string, after: Buffer[]) => {
      const x = await exchange(h.port, [connectPacket(alice.token), ...after], { afterConnack: true });
      const ok = x.closedByServer && x.received.subarray(0, 4).equals(CONNACK_OK);
      t.record(ok ? 'correct' : 'wrong', `${what}: closed ${x.closedByServer}, reply ${x.received.toString('hex').slice(0, 32)}`);
    };
    await closes('a second CONNECT (§3.1.0-2)', [connectPacket(alice.token)]);
    await closes('SUBSCRIBE with flags 0 (§3.8.1-1)', [subscribePacket(`${alice.tenantId}/alert/+/+`, 0x80)]);
    await closes('PUBLISH with QoS 3 (§3.3.1-4)', [publishPacket(`${alice.tenantId}/x`, Buffer.from('x'), 0x36)]);
    await closes("PUBLISH to a topic with '#' (§3.3.2-2)", [publishPacket(`${alice.tenantId}/#`, Buffer.from('x'))]);
    await closes('reserved packet type 0', [Buffer.from([0x00, 0x00])]);
    await closes('reserved packet type 15', [Buffer.from([0xf0, 0x00])]);
    await closes('a PUBLISH announcing 256 MiB', [Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f])]);
    await closes('a PUBLISH one byte over the limit', [Buffer.concat([Buffer.from([0x30]), varint(BODY_LIMIT + 65_539 + 1)])]);
    assertClean(t);
    await stillServing();
  });

  it('cuts an oversized packet at its header: the broker does not take in the body', async () => {
    // 8 MiB offered behind a header announcing 200 MiB: the connection is closed long before.
    const body = Buffer.alloc(1024 * 1024, 0x61);
    const x = await exchange(h.port, [connectPacket(alice.token), Buffer.from([0x30, 0x80, 0x80, 0x80, 0x64]), ...Array.from({ length: 8 }, () => body)], { afterConnack: true });
    assert.equal(x.closedByServer, true);
    assert.ok(x.written < 8 * body.length, `the broker took ${x.written} bytes`);
    assert.ok(h.mq.broker.stats.oversizedPackets >= 1);
    await stillServing();
  });

  it('survives seeded random bytes, before and after CONNECT, and holds nothing of those connections', async () => {
    const t = tally('mqtt: random bytes');
    const rnd = prng(14_2026);
    const before = h.mq.broker.aedes.connectedClients;
    for (let i = 0; i < 300; i++) {
      const junk = Buffer.from(Array.from({ length: 1 + Math.floor(rnd() * 200) }, () => Math.floor(rnd() * 256)));
      // Half start with a valid CONNECT, so the fuzz reaches the packet handlers behind authentication.
      const chunks = i % 2 ? [connectPacket(alice.token), junk] : [junk];
      const x = await exchange(h.port, chunks, { end: true, afterConnack: i % 2 === 1 });
      // Anything the broker answered is MQTT: a CONNACK first (or nothing at all).
      t.record(x.received.length === 0 || x.received[0] === 0x20 ? 'correct' : 'wrong', `probe ${i}: ${x.received.toString('hex').slice(0, 32)}`);
    }
    assertClean(t);
    await stillServing();
    await until(() => h.mq.broker.aedes.connectedClients === before, 'every probe connection is gone from the broker');
    assert.equal(Object.keys((h.mq.broker.aedes as unknown as { clients: object }).clients).length, before);
  });

  it('keeps memory flat under a stream of oversized and malformed connections', async () => {
    // The heap after a full collection, before and after 600 more hostile connections (the broker
    // runs in this process): what they leave behind must stay far below what they sent.
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const round = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const kind = i % 3;
        const chunks =
          kind === 0
            ? [connectPacket(alice.token), Buffer.concat([Buffer.from([0x30]), varint(BODY_LIMIT + 65_540)]), Buffer.alloc(32 * 1024, 0x62)]
            : kind === 1
              ? [Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f]), Buffer.alloc(32 * 1024)]
              : [connectPacket(alice.token), subscribePacket(`${alice.tenantId}/alert/+/+`, 0x80)];
        await exchange(h.port, chunks, { afterConnack: kind !== 1 });
      }
    };
    await round(150);
    gc();
    const before = process.memoryUsage().heapUsed;
    await round(600);
    await stillServing();
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // 600 connections offered ~13 MiB; a leak of even 4 KiB each would show as 2.4 MiB.
    assert.ok(grown < 2 * 1024 * 1024, `the heap grew by ${(grown / 1024).toFixed(0)} KiB`);
  });
});
