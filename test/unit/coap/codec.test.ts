// The RFC 7252 codec and the small payload formats of src/coap.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ACK,
  Block2Assembler,
  blockSize,
  checkOptions,
  classifyDatagram,
  Code,
  CoapFormatError,
  type CoapMessage,
  codeFromString,
  codeToString,
  CON,
  decodeAnnouncement,
  decodeBlock,
  decodeCbor,
  decodeReading,
  decodeTimeTlv,
  decodeUint,
  derivedTimes,
  DEFAULT_TRANSMISSION,
  encodeAnnouncement,
  encodeBlock,
  encodeCbor,
  encodeReading,
  encodeTimeTlv,
  encodeUint,
  isCritical,
  isNoCacheKey,
  isUnsafe,
  NON,
  Option,
  parseMessage,
  planBlock2,
  RST,
  serializeMessage,
  uintOption,
  uriOptions,
  uriPath,
  uriQuery,
  AnnouncementError,
  TimeTlvError,
} from '../../../src/coap/index.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const msg = (over: Partial<CoapMessage> = {}): CoapMessage => ({ type: CON, code: Code.GET, mid: 0x1234, token: Buffer.from([0xab]), options: [], payload: Buffer.alloc(0), ...over });

describe('RFC 7252 message codec', () => {
  test('serializes a GET with path and query exactly as the RFC lays it out', () => {
    const b = serializeMessage(msg({ options: uriOptions('/snsr/arduino/temp?sens') }));
    assert.deepEqual(b, hex('41 01 12 34 ab b4 736e7372 07 61726475696e6f 04 74656d70 44 73656e73'));
    const m = parseMessage(b);
    assert.deepEqual(uriPath(m), ['snsr', 'arduino', 'temp']);
    assert.deepEqual(uriQuery(m), ['sens']);
  });

  test('extended option delta and length encodings (13 and 14) round trip', () => {
    const options = [
      { number: 1, value: Buffer.alloc(12, 1) },
      { number: 14, value: Buffer.alloc(13, 2) },
      { number: 300, value: Buffer.alloc(268, 3) },
      { number: 300 + 269, value: Buffer.alloc(269, 4) },
      { number: 65000, value: Buffer.alloc(1000, 5) },
    ];
    const m = msg({ options, payload: Buffer.from('body') });
    const out = parseMessage(serializeMessage(m));
    assert.deepEqual(out.options, options);
    assert.deepEqual(out.payload, Buffer.from('body'));
    // Delta 13 with one extension byte, length 14 with two.
    const b = serializeMessage(msg({ token: Buffer.alloc(0), options: [{ number: 20, value: Buffer.alloc(300) }] }));
    assert.deepEqual(b.subarray(4, 8), hex('de 07 00 1f'));
  });

  test('options are sorted by number and repeated options keep their order', () => {
    const m = msg({
      options: [uintOption(Option.MAX_AGE, 60), { number: Option.URI_PATH, value: Buffer.from('b') }, uintOption(Option.OBSERVE, 0), { number: Option.URI_PATH, value: Buffer.from('c') }],
    });
    const out = parseMessage(serializeMessage(m));
    assert.deepEqual(
      out.options.map((o) => o.number),
      [6, 11, 11, 14],
    );
    assert.deepEqual(uriPath(out), ['b', 'c']);
  });

  test('uint options drop leading zeros; 0 is empty; decode tolerates leading zeros', () => {
    assert.deepEqual(encodeUint(0), Buffer.alloc(0));
    assert.deepEqual(encodeUint(0x1234), hex('1234'));
    assert.deepEqual(encodeUint(0xffffff), hex('ffffff'));
    assert.equal(decodeUint(hex('000102')), 0x102);
  });

  test('codes: c.dd strings both ways', () => {
    assert.equal(codeToString(Code.CONTENT), '2.05');
    assert.equal(codeFromString('4.04'), Code.NOT_FOUND);
    assert.equal(codeFromString('5.01'), Code.NOT_IMPLEMENTED);
  });

  test('option properties from the number: critical, unsafe, NoCacheKey', () => {
    assert.equal(isCritical(Option.URI_PATH), true);
    assert.equal(isCritical(Option.MAX_AGE), false);
    assert.equal(isUnsafe(Option.URI_HOST), true);
    assert.equal(isNoCacheKey(Option.SIZE1), true);
  });

  const formatError = (b: Buffer): CoapFormatError => {
    try {
      parseMessage(b);
    } catch (e) {
      assert.ok(e instanceof CoapFormatError);
      return e;
    }
    assert.fail('expected a format error');
  };

  test('format errors are typed with what the receiver does (RFC 7252 §3, §4.2, §4.3)', () => {
    assert.equal(formatError(hex('41 01')).disposition, 'ignore'); // truncated header
    assert.equal(formatError(hex('81 01 00 01 00')).disposition, 'ignore'); // version 2
    const tkl = formatError(hex('49 01 00 07 0102030405060708 09'));
    assert.equal(tkl.disposition, 'reset');
    assert.equal(tkl.mid, 7);
    assert.equal(formatError(hex('44 01 00 08 0102')).disposition, 'reset'); // shorter than token
    assert.equal(formatError(hex('40 01 00 09 f1 00')).disposition, 'reset'); // delta 15
    assert.equal(formatError(hex('40 01 00 09 bf')).disposition, 'reset'); // length 15
    assert.equal(formatError(hex('40 01 00 09 b5 61')).disposition, 'reset'); // value runs past the end
    assert.equal(formatError(hex('40 01 00 09 d1')).disposition, 'reset'); // truncated extended delta
    assert.equal(formatError(hex('40 01 00 09 ff')).disposition, 'reset'); // marker with empty payload
    assert.equal(formatError(hex('40 21 00 09')).disposition, 'reset'); // reserved class 1
    assert.equal(formatError(hex('41 00 00 09 01')).disposition, 'reset'); // empty message with a token
    assert.equal(formatError(hex('60 00 00 09 ff 00')).disposition, 'ignore'); // bad empty ACK: ignored
    assert.equal(formatError(hex('51 01 00 09 01 ff')).disposition, 'reset'); // NON: rejected too
  });

  test('checkOptions: unknown, bad length and repeated options; classifyDatagram answers 4.02, RST, or strips electives', () => {
    const m = msg({
      options: [
        { number: 2049, value: Buffer.alloc(1) },
        { number: 2048, value: Buffer.alloc(1) },
        uintOption(Option.CONTENT_FORMAT, 0),
        uintOption(Option.CONTENT_FORMAT, 0),
        { number: Option.URI_HOST, value: Buffer.alloc(0) },
      ],
    });
    const p = checkOptions(parseMessage(serializeMessage(m)));
    assert.deepEqual(
      p.map((x) => [x.number, x.reason, x.critical]),
      [
        [Option.URI_HOST, 'bad-length', true],
        [Option.CONTENT_FORMAT, 'repeated', false],
        [2048, 'unrecognized', false],
        [2049, 'unrecognized', true],
      ],
    );
    const con = classifyDatagram(serializeMessage(msg({ options: [{ number: 2049, value: Buffer.alloc(1) }] })));
    assert.equal(con.kind, 'respond');
    assert.equal(con.kind === 'respond' && codeToString(con.code), '4.02');
    const non = classifyDatagram(serializeMessage(msg({ type: NON, options: [{ number: 2049, value: Buffer.alloc(1) }] })));
    assert.equal(non.kind, 'reset');
    const ack = classifyDatagram(serializeMessage(msg({ type: ACK, code: Code.CONTENT, options: [{ number: 2049, value: Buffer.alloc(1) }] })));
    assert.equal(ack.kind, 'ignore');
    const elective = classifyDatagram(serializeMessage(msg({ options: [{ number: 2048, value: Buffer.alloc(1) }, ...uriOptions('/a')] })));
    assert.equal(elective.kind, 'message');
    assert.deepEqual(elective.kind === 'message' && elective.msg.options.map((o) => o.number), [Option.URI_PATH]);
    const rst = classifyDatagram(hex('70 00 12 34'));
    assert.equal(rst.kind === 'message' && rst.msg.type, RST);
  });

  test('100,000 random and mutated datagrams: parse either succeeds and re-serializes, or throws CoapFormatError', () => {
    let seed = 12345;
    const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const base = serializeMessage(msg({ options: [...uriOptions('/snsr/arduino/temp?sens'), uintOption(Option.OBSERVE, 0), uintOption(Option.BLOCK2, 0x13)], payload: Buffer.from('x') }));
    let ok = 0;
    for (let i = 0; i < 100_000; i++) {
      let b: Buffer;
      if (i % 2 === 0) b = Buffer.from(Array.from({ length: Math.floor(rnd() * 40) }, () => Math.floor(rnd() * 256)));
      else {
        b = Buffer.from(base);
        for (let k = 0; k < 1 + Math.floor(rnd() * 4); k++) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
        if (rnd() < 0.2) b = b.subarray(0, Math.floor(rnd() * b.length));
      }
      try {
        const m = parseMessage(b);
        const again = parseMessage(serializeMessage(m));
        assert.deepEqual(again.options, m.options);
        classifyDatagram(b);
        ok++;
      } catch (e) {
        if (!(e instanceof CoapFormatError)) throw e;
      }
    }
    assert.ok(ok > 1000, `some datagrams parse (${ok})`);
  });
});

describe('Block2, CBOR, readings, time TLV, announcement, timing', () => {
  test('Block2 values and slicing (RFC 7959)', () => {
    assert.deepEqual(decodeBlock(encodeBlock({ num: 5, more: true, szx: 3 })), { num: 5, more: true, szx: 3 });
    assert.throws(() => decodeBlock(0x17));
    assert.equal(blockSize(3), 128);
    const body = Buffer.alloc(300, 7);
    const p0 = planBlock2(body, undefined, 3);
    assert.ok(p0 && p0 !== 'out-of-range');
    assert.equal(p0.chunk.length, 128);
    assert.equal(p0.block.more, true);
    const p2 = planBlock2(body, encodeBlock({ num: 2, more: false, szx: 3 }), 3);
    assert.ok(p2 && p2 !== 'out-of-range');
    assert.equal(p2.chunk.length, 44);
    assert.equal(p2.block.more, false);
    assert.equal(planBlock2(body, encodeBlock({ num: 9, more: false, szx: 3 }), 3), 'out-of-range');
    // A client asking for 1024-byte blocks gets the server's 128.
    const big = planBlock2(body, encodeBlock({ num: 0, more: false, szx: 6 }), 3);
    assert.ok(big && big !== 'out-of-range' && big.block.szx === 3);
    const asm = new Block2Assembler();
    assert.equal(asm.add({ num: 0, more: true, szx: 3 }, body.subarray(0, 128)), undefined);
    assert.equal(asm.add({ num: 1, more: true, szx: 3 }, body.subarray(128, 256)), undefined);
    assert.deepEqual(asm.add({ num: 2, more: false, szx: 3 }, body.subarray(256)), body);
  });

  test('CBOR subset round trips and refuses trailing or truncated bytes', () => {
    const v = new Map<unknown, unknown>([
      [0, 'temp'],
      [1, [1, -1, 500, -70000, 2 ** 40, true, false, null, 1.5, new Uint8Array([1, 2])]],
    ]);
    assert.deepEqual(decodeCbor(encodeCbor(v as never)), v);
    assert.deepEqual(encodeCbor(new Map([[0, 'temp']])), hex('a1 00 64 74656d70'));
    assert.throws(() => decodeCbor(hex('a1 00')));
    assert.throws(() => decodeCbor(hex('01 02')));
    assert.equal(decodeCbor(hex('f9 3c00')), 1);
  });

  test('readings: text and the CBOR wrapper', () => {
    const r = { epoch: 1553212345, value: 72.5, unit: 'F' as const };
    const t = encodeReading(r, false);
    assert.equal(t.payload.toString(), '1553212345,72.50,F');
    assert.equal(t.contentFormat, 0);
    const c = encodeReading(r, true);
    assert.equal(c.contentFormat, 60);
    assert.deepEqual(c.payload.subarray(0, 2), hex('a2 00'));
    assert.deepEqual(decodeReading(c.payload, 60), r);
    assert.deepEqual(decodeReading(c.payload, 2), r);
    assert.deepEqual(decodeReading(t.payload), r);
    assert.throws(() => decodeReading(Buffer.from('hello')));
  });

  test('time TLV: 06 08 <u32 s> <u32 ms>', () => {
    const b = encodeTimeTlv(1700000000123);
    assert.deepEqual(b, hex('06 08 6553f100 0000007b'));
    assert.equal(decodeTimeTlv(b), 1700000000123);
    assert.throws(() => decodeTimeTlv(b.subarray(0, 9)), TimeTlvError);
    assert.throws(() => decodeTimeTlv(hex('07 08 6553f100 0000007b')), TimeTlvError);
  });

  test('announcement encode/decode and validation naming every bad field', () => {
    const a = { v: 1 as const, mac: '0123456789abcdef', host: '127.0.0.1', port: 4849, prefix: 'snsr' as const, fw: '1.2.1000.117958', cf: 0, seq: 0, boot: 1700000000, period: 60 };
    assert.deepEqual(decodeAnnouncement(encodeAnnouncement(a)), a);
    assert.throws(
      () => decodeAnnouncement(Buffer.from(JSON.stringify({ ...a, mac: 'XYZ', port: 0 }))),
      (e: Error) => e instanceof AnnouncementError && /mac, port/.test(e.message),
    );
    assert.throws(() => decodeAnnouncement(Buffer.from('nope')), AnnouncementError);
  });

  test('derived times of the default transmission parameters (RFC 7252 §4.8.2)', () => {
    const d = derivedTimes(DEFAULT_TRANSMISSION);
    assert.equal(d.maxTransmitSpanMs, 45_000);
    assert.equal(d.maxTransmitWaitMs, 93_000);
    assert.equal(d.exchangeLifetimeMs, 247_000);
    assert.equal(d.nonLifetimeMs, 145_000);
  });
});
