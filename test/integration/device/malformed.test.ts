// Malformed datagrams get the RFC 7252 answer (RST, 4.02, 4.13) or are dropped, and a kit that has
// swallowed 100,000 random and mutated datagrams still answers correctly.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ACK, Code, codeToString, CON, decodeReading, getUintOption, NON, Option, RST, serializeMessage, uintOption, uriOptions } from '../../../src/coap/index.ts';
import type { Kit } from '../../../src/device/kit.ts';
import { RawClient, startKit, waitFor } from '../../helpers/device.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const GET_SENS = serializeMessage({ type: CON, code: Code.GET, mid: 0x0101, token: Buffer.from([1]), options: uriOptions('/snsr/arduino/temp?sens'), payload: Buffer.alloc(0) });

describe('malformed datagrams against a kit', () => {
  let kit: Kit;
  let c: RawClient;
  let port: number;
  let mid = 0x2000;
  const alive = async (): Promise<void> => {
    const m = mid++;
    c.send(port, { type: CON, code: Code.GET, mid: m, token: Buffer.from([0x55]), options: uriOptions('/snsr/arduino/temp?sens'), payload: Buffer.alloc(0) });
    const r = await c.until((x) => x.type === ACK && x.mid === m);
    assert.equal(codeToString(r.code), '2.05');
    decodeReading(r.payload);
  };

  before(async () => {
    kit = await startKit();
    port = kit.address().port;
    c = await RawClient.open();
  });
  after(async () => {
    c.close();
    await kit.stop();
  });

  test('an unknown version and a truncated header are dropped silently', async () => {
    c.send(port, hex('81 01 00 01 b4 736e7372'));
    c.send(port, hex('41 01'));
    c.send(port, Buffer.alloc(0));
    assert.equal(await c.quiet(200), true);
    await alive();
  });

  test('token length over 8 in a CON is rejected with RST carrying its MID', async () => {
    c.send(port, hex('49 01 0a 0b 0102030405060708 09'));
    const r = await c.nextMessage();
    assert.equal(r.type, RST);
    assert.equal(r.mid, 0x0a0b);
  });

  test('bad option deltas/lengths and a payload with no marker are format errors: RST for CON and for NON', async () => {
    c.send(port, hex('40 01 0c 01 f1 00'));
    assert.deepEqual([(await c.nextMessage()).type], [RST]);
    c.send(port, hex('40 01 0c 02 bf'));
    assert.equal((await c.nextMessage()).mid, 0x0c02);
    // Payload bytes sent without the 0xFF marker are read as options and run past the end.
    c.send(port, Buffer.concat([hex('40 01 0c 03 b4 736e7372'), Buffer.from('hello')]));
    assert.equal((await c.nextMessage()).mid, 0x0c03);
    c.send(port, hex('50 01 0c 04 d1'));
    const n = await c.nextMessage();
    assert.equal(n.type, RST);
    assert.equal(n.mid, 0x0c04);
    // A payload marker followed by nothing.
    c.send(port, hex('40 01 0c 05 ff'));
    assert.equal((await c.nextMessage()).mid, 0x0c05);
    await alive();
  });

  test('a malformed ACK or RST is ignored (RFC 7252 §4.2)', async () => {
    c.send(port, hex('69 00 0d 01 01'));
    c.send(port, hex('70 00 0d 02 ff 00'));
    assert.equal(await c.quiet(200), true);
  });

  test('an unknown critical option in a CON request is 4.02 with a diagnostic; in a NON request RST', async () => {
    const bad = { number: 9999, value: Buffer.from([1]) };
    c.send(port, { type: CON, code: Code.GET, mid: 0x0e01, token: Buffer.from([3]), options: [...uriOptions('/snsr/arduino/temp?sens'), bad], payload: Buffer.alloc(0) });
    const r = await c.nextMessage();
    assert.equal(r.type, ACK);
    assert.equal(codeToString(r.code), '4.02');
    assert.match(r.payload.toString(), /Option9999/);
    c.send(port, { type: NON, code: Code.GET, mid: 0x0e02, token: Buffer.from([3]), options: [...uriOptions('/snsr/arduino/temp?sens'), bad], payload: Buffer.alloc(0) });
    assert.equal((await c.nextMessage()).type, RST);
  });

  test('an oversized request is 4.13 with Size1; one too large for the HDLC info field too', async () => {
    c.send(port, serializeMessage({ type: CON, code: Code.PUT, mid: 0x0f01, token: Buffer.from([4]), options: uriOptions('/snsr/sys/time'), payload: Buffer.alloc(2000, 1) }));
    const r = await c.nextMessage();
    assert.equal(codeToString(r.code), '4.13');
    assert.equal(getUintOption(r, Option.SIZE1), 1152);
    c.send(port, serializeMessage({ type: CON, code: Code.PUT, mid: 0x0f02, token: Buffer.from([4]), options: uriOptions('/snsr/sys/time'), payload: Buffer.alloc(600, 1) }));
    const r2 = await c.nextMessage();
    assert.equal(codeToString(r2.code), '4.13');
    assert.equal(getUintOption(r2, Option.SIZE1), 255);
    // An oversized datagram that is not even a message is dropped.
    c.send(port, Buffer.alloc(3000, 0xee));
    assert.equal(await c.quiet(200), true);
    await alive();
  });

  test('fuzz: 100,000 random and mutated datagrams, then the kit still answers correctly', async () => {
    let seed = 0xc0ffee;
    const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const fuzzer = await RawClient.open();
    try {
      const bases = [
        GET_SENS,
        serializeMessage({ type: NON, code: Code.PUT, mid: 7, token: Buffer.from([1, 2, 3]), options: uriOptions('/snsr/sys/time'), payload: hex('06 08 6553f100 0000007b') }),
        serializeMessage({
          type: CON,
          code: Code.GET,
          mid: 9,
          token: Buffer.alloc(0),
          options: [...uriOptions('/snsr/arduino/temp?sens'), uintOption(Option.OBSERVE, 0), uintOption(Option.BLOCK2, 3)],
          payload: Buffer.alloc(0),
        }),
      ];
      const base = kit.module.endpoint.stats.received;
      for (let i = 0; i < 100_000; i++) {
        let b: Buffer;
        const kind = i % 3;
        if (kind === 0) b = Buffer.from(Array.from({ length: Math.floor(rnd() * 64) }, () => Math.floor(rnd() * 256)));
        else {
          b = Buffer.from(bases[Math.floor(rnd() * bases.length)]!);
          for (let k = 0; k < 1 + Math.floor(rnd() * 3); k++) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
          if (kind === 2 && rnd() < 0.5) b = b.subarray(0, Math.floor(rnd() * b.length));
        }
        fuzzer.socket.send(b, port, '127.0.0.1');
        // Flow control: let the kit catch up so the socket buffers do not simply overflow.
        if (i % 200 === 199) {
          for (let k = 0; k < 200 && kit.module.endpoint.stats.received - base < i + 1; k++) await new Promise((r) => setTimeout(r, 1));
        }
        if (fuzzer.inbox.length > 1000) fuzzer.inbox.length = 0;
      }
      await waitFor(() => kit.module.endpoint.stats.received - base > 90_000, 10_000, 'the kit to receive most of the flood');
      assert.ok(kit.module.endpoint.stats.refused > 10_000);
      await alive();
      // The configuration and clock resources still behave.
      c.send(port, { type: CON, code: Code.GET, mid: 0x3001, token: Buffer.from([6]), options: uriOptions('/snsr/arduino/temp?cfg'), payload: Buffer.alloc(0) });
      const cfg = await c.until((x) => x.mid === 0x3001);
      assert.match(cfg.payload.toString(), /^\d+,[CF]$/);
      assert.equal(kit.primary.state, 'up');
    } finally {
      fuzzer.close();
    }
  });
});
