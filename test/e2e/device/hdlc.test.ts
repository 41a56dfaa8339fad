// HDLC type 3 (wire §2): CRC, the reference vectors, round trips, damaged input, and the link
// state machines over the in-process line and over a real pty pair.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { crc16x25 } from '../../../src/device/hdlc/crc16.ts';
import { decodeLinkParams, encodeFrame, encodeLinkParams, FrameDecoder, frameKind, iControl, nrOf, nsOf, PF, rrControl, U } from '../../../src/device/hdlc/frame.ts';
import { PrimaryStation, SecondaryStation } from '../../../src/device/hdlc/link.ts';
import { duplexPair, openSerialPort } from '../../../src/device/hdlc/transport.ts';
import { ptyPair, waitFor } from '../../helpers/device.ts';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('CRC-16/X.25 and frame vectors', () => {
  test('check value of "123456789" is 0x906E', () => {
    assert.equal(crc16x25(Buffer.from('123456789')), 0x906e);
  });

  test('the wire reference vectors: RR F=1 N(R)=0, DM F=1, SNRM P=1', () => {
    assert.deepEqual(encodeFrame({ control: rrControl(0, true) }), hex('7E A0 07 03 03 11 96 B6 7E'));
    assert.deepEqual(encodeFrame({ control: U.DM | PF }), hex('7E A0 07 03 03 1F E8 5F 7E'));
    assert.deepEqual(encodeFrame({ control: U.SNRM | PF }), hex('7E A0 07 03 03 93 8C 11 7E'));
    const d = new FrameDecoder();
    const frames = d.push(hex('7E A0 07 03 03 11 96 B6 7E 7E A0 07 03 03 1F E8 5F 7E 7E A0 07 03 03 93 8C 11 7E'));
    assert.deepEqual(
      frames.map((f) => frameKind(f.control)),
      ['RR', 'DM', 'SNRM'],
    );
  });

  test('control fields: I, RR and the U-frames with P/F set', () => {
    assert.equal(iControl(3, 5, true), (5 << 5) | 0x10 | (3 << 1));
    assert.equal(nsOf(iControl(3, 5, true)), 3);
    assert.equal(nrOf(iControl(3, 5, true)), 5);
    assert.deepEqual([U.SNRM | PF, U.DISC | PF, U.UA | PF, U.DM | PF, U.FRMR | PF], [0x93, 0x53, 0x73, 0x1f, 0x97]);
    assert.deepEqual(['I', 'RR', 'SNRM', 'DISC', 'UA', 'DM', 'FRMR'], [0x10, 0x11, 0x93, 0x53, 0x73, 0x1f, 0x97].map(frameKind));
  });

  test('I-frame round trip with info: length field, HCS and FCS; info holding 7E bytes needs no stuffing', () => {
    const info = Buffer.from([0x7e, 0x7d, 0x00, 0xff, 0x7e]);
    const f = encodeFrame({ control: iControl(1, 2, true), info });
    assert.equal(f.readUInt16BE(1), 0xa000 | (f.length - 2));
    assert.equal(f.length, 2 + 7 + info.length + 2);
    const [out] = new FrameDecoder().push(f);
    assert.ok(out);
    assert.deepEqual(out.info, info);
    assert.equal(out.control, iControl(1, 2, true));
  });

  test('UA parameter block: max info 255 each way, window 1', () => {
    const b = encodeLinkParams({ maxInfoTx: 255, maxInfoRx: 255, windowTx: 1, windowRx: 1 });
    assert.deepEqual(b, hex('81 80 12 05 01 FF 06 01 FF 07 04 00 00 00 01 08 04 00 00 00 01'));
    assert.deepEqual(decodeLinkParams(b), { maxInfoTx: 255, maxInfoRx: 255, windowTx: 1, windowRx: 1 });
  });
});

describe('frame decoder on damaged input', () => {
  const good = (n: number): Buffer => encodeFrame({ control: iControl(n & 7, 0, true), info: Buffer.from(`msg${n}`) });

  test('frames split byte by byte are reassembled', () => {
    const d = new FrameDecoder();
    const bytes = Buffer.concat([good(1), good(2)]);
    const out = [];
    for (const b of bytes) out.push(...d.push(Buffer.from([b])));
    assert.deepEqual(
      out.map((f) => f.info.toString()),
      ['msg1', 'msg2'],
    );
  });

  test('concatenated frames, with separate flags and with a shared flag, all decode', () => {
    const d = new FrameDecoder();
    const a = good(1);
    const b = good(2);
    const c = good(3);
    const shared = Buffer.concat([a, b.subarray(1), c]);
    assert.deepEqual(
      d.push(shared).map((f) => f.info.toString()),
      ['msg1', 'msg2', 'msg3'],
    );
    assert.equal(d.counters.frames, 3);
  });

  test('a corrupted info byte (FCS) or header byte (HCS) drops that frame only and is counted', () => {
    const d = new FrameDecoder();
    const badFcs = good(1);
    badFcs.writeUInt8(badFcs.readUInt8(9) ^ 0x01, 9);
    const badHcs = good(2);
    badHcs.writeUInt8(badHcs.readUInt8(5) ^ 0x20, 5);
    const out = d.push(Buffer.concat([badFcs, badHcs, good(3)]));
    assert.deepEqual(
      out.map((f) => f.info.toString()),
      ['msg3'],
    );
    assert.equal(d.counters.badFcs, 1);
    assert.equal(d.counters.badHcs, 1);
  });

  test('a truncated frame followed by a good one: the good one survives, the truncation is counted', () => {
    const d = new FrameDecoder();
    const t = good(1).subarray(0, 8);
    const out = d.push(Buffer.concat([t, good(2)]));
    assert.deepEqual(
      out.map((f) => f.info.toString()),
      ['msg2'],
    );
    assert.ok(d.counters.truncated >= 1);
  });

  test('a truncated frame left alone is dropped by flush (UART timeout)', () => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(good(1).subarray(0, 6)), []);
    assert.ok(d.pending > 0);
    d.flush();
    assert.equal(d.counters.truncated, 1);
    assert.deepEqual(
      d.push(good(2)).map((f) => f.info.toString()),
      ['msg2'],
    );
  });

  test('an oversized frame (info over 255) is dropped and counted; a bad format type too; garbage is skipped', () => {
    const d = new FrameDecoder(255);
    const big = encodeFrame({ control: iControl(0, 0, true), info: Buffer.alloc(300, 0x41) });
    const badType = hex('7E B0 07 03 03 11 96 B6 7E');
    const out = d.push(Buffer.concat([Buffer.from('garbage'), big, badType, good(5)]));
    assert.deepEqual(
      out.map((f) => f.info.toString()),
      ['msg5'],
    );
    assert.ok(d.counters.oversized >= 1);
    assert.ok(d.counters.badFormat >= 1);
    assert.ok(d.counters.garbage >= 7);
  });

  test('random noise between frames never loses a good frame that follows a flag fill', () => {
    const d = new FrameDecoder();
    let seen = 0;
    for (let i = 0; i < 200; i++) {
      const noise = Buffer.from(Array.from({ length: 1 + (i % 40) }, (_, k) => (i * 31 + k * 17) & 0xff));
      seen += d.push(Buffer.concat([noise, Buffer.from([0x7e]), good(i)])).length;
      d.flush();
    }
    assert.ok(seen >= 195, `recovered ${seen} of 200`);
  });
});

function linkPair(o: { timeoutMs?: number } = {}) {
  const [a, b] = duplexPair();
  const toSecondary: Buffer[] = [];
  const toPrimary: Buffer[] = [];
  let primary!: PrimaryStation;
  const secondary = new SecondaryStation(b, {
    timeoutMs: o.timeoutMs ?? 100,
    onMessage: (m) => {
      toSecondary.push(m);
      if (m.toString().startsWith('echo ')) secondary.send(Buffer.from(m.toString().slice(5)));
    },
    wake: () => primary.poll(),
  });
  primary = new PrimaryStation(a, { timeoutMs: o.timeoutMs ?? 100, onMessage: (m) => toPrimary.push(m) });
  return { a, b, primary, secondary, toSecondary, toPrimary };
}

describe('link state machines', () => {
  test('before SNRM the secondary answers DM; after SNRM/UA the link carries I-frames both ways, mod-8 sequence', async () => {
    const { a, b, primary, secondary, toSecondary, toPrimary } = linkPair();
    const heard: Buffer[] = [];
    (b as { tap?: (d: Buffer) => void }).tap = (d) => heard.push(d);
    a.write(encodeFrame({ control: rrControl(0, true) }));
    await waitFor(() => heard.length > 0);
    assert.deepEqual(heard[0], hex('7E A0 07 03 03 1F E8 5F 7E'));
    assert.equal(secondary.counters.dmSent, 1);
    assert.equal(primary.state, 'down', 'a DM while down does not start the link by itself');
    await primary.connect();
    assert.equal(secondary.state, 'NRM');
    assert.deepEqual(primary.params, { maxInfoTx: 255, maxInfoRx: 255, windowTx: 1, windowRx: 1 });
    for (let i = 0; i < 20; i++) primary.send(Buffer.from(`echo ${i}`));
    await waitFor(() => toPrimary.length === 20, 5000, 'twenty echoes');
    assert.deepEqual(
      toSecondary.map(String),
      Array.from({ length: 20 }, (_, i) => `echo ${i}`),
    );
    assert.deepEqual(
      toPrimary.map(String),
      Array.from({ length: 20 }, (_, i) => String(i)),
    );
    // Device-initiated: wake-and-poll.
    secondary.send(Buffer.from('notification'));
    await waitFor(() => toPrimary.length === 21);
    assert.equal(toPrimary[20]?.toString(), 'notification');
    primary.close();
    secondary.close();
  });

  test('corrupted, truncated and oversized frames injected on the line are dropped, counted, and the link survives', async () => {
    const { a, primary, secondary, toSecondary, toPrimary } = linkPair();
    await primary.connect();
    const before = toPrimary.length;
    const junk = [
      (() => {
        const f = encodeFrame({ control: iControl(0, 0, true), info: Buffer.from('x') });
        f.writeUInt8(f.readUInt8(8) ^ 0xff, 8);
        return f;
      })(),
      encodeFrame({ control: iControl(0, 0, true), info: Buffer.from('y') }).subarray(0, 7),
      encodeFrame({ control: iControl(0, 0, true), info: Buffer.alloc(400, 1) }),
    ];
    for (const j of junk) a.write(j);
    for (let i = 0; i < 5; i++) primary.send(Buffer.from(`echo ${i}`));
    await waitFor(() => toPrimary.length === before + 5, 5000, 'echoes after junk');
    assert.ok(secondary.counters.badFcs >= 1);
    assert.ok(secondary.counters.oversized >= 1);
    assert.ok(secondary.counters.truncated >= 1);
    assert.equal(toSecondary.filter((m) => m.toString() === 'x' || m.toString() === 'y').length, 0);
    primary.close();
    secondary.close();
  });

  test('a lost reply is recovered by retransmission without delivering twice (N(S) duplicate detection)', async () => {
    const { a, b, primary, secondary, toSecondary, toPrimary } = linkPair({ timeoutMs: 30 });
    await primary.connect();
    // Drop the secondary's next two frames on the line.
    let drop = 2;
    const orig = b.write.bind(b);
    b.write = (d: Buffer) => {
      if (drop > 0) {
        drop--;
        return;
      }
      orig(d);
    };
    primary.send(Buffer.from('echo once'));
    await waitFor(() => toPrimary.length === 1, 5000, 'echo after loss');
    assert.equal(toSecondary.filter((m) => m.toString() === 'echo once').length, 1);
    assert.ok(secondary.counters.duplicates >= 1);
    assert.ok(primary.counters.timeouts >= 1);
    void a;
    primary.close();
    secondary.close();
  });

  test('an invalid N(R) gets FRMR; the primary resets the link with SNRM and carries on', async () => {
    const { a, primary, secondary, toPrimary } = linkPair();
    await primary.connect();
    a.write(encodeFrame({ control: rrControl(5, true) }));
    await waitFor(() => primary.counters.frmrReceived === 1 || secondary.counters.frmrSent >= 1);
    assert.equal(secondary.counters.frmrSent >= 1, true);
    await waitFor(() => primary.state === 'up' && secondary.state === 'NRM', 5000, 'link reset');
    primary.send(Buffer.from('echo after-frmr'));
    await waitFor(() => toPrimary.some((m) => m.toString() === 'after-frmr'), 5000, 'echo after FRMR');
    primary.close();
    secondary.close();
  });

  test('DISC answers UA and the secondary returns to disconnected mode (DM to polls)', async () => {
    const { primary, secondary } = linkPair();
    await primary.connect();
    primary.disconnect();
    await waitFor(() => secondary.state === 'NDM');
    primary.close();
    secondary.close();
  });
});

describe('HDLC over a real pty pair (socat)', () => {
  test('the kit link runs over two pty paths', async () => {
    const pty = await ptyPair();
    const pa = pty.a;
    const pb = pty.b;
    try {
      const sa = openSerialPort(pa);
      const sb = openSerialPort(pb);
      const got: Buffer[] = [];
      let primary!: PrimaryStation;
      const secondary = new SecondaryStation(sb, {
        timeoutMs: 500,
        onMessage: (m) => secondary.send(Buffer.concat([Buffer.from('re:'), m])),
        wake: () => primary.poll(),
      });
      primary = new PrimaryStation(sa, { timeoutMs: 500, onMessage: (m) => got.push(m) });
      await primary.connect();
      for (let i = 0; i < 5; i++) primary.send(Buffer.from([0x7e, i, 0x7e]));
      await waitFor(() => got.length === 5, 10_000, 'replies over the pty');
      assert.deepEqual(got[4], Buffer.from([0x72, 0x65, 0x3a, 0x7e, 4, 0x7e]));
      primary.close();
      secondary.close();
    } finally {
      pty.close();
    }
  });
});
