// The duplicate memory (RFC 7252 §4.5) against a plain model: which messages it knows, by key,
// token and expiry, after long random runs that make it grow, wrap and move its index entries.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MessageMemory } from '../../../src/coap/memory.ts';

/** A small seeded generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const token = (bytes: number[]): Buffer => Buffer.from(bytes);

describe('MessageMemory', () => {
  it('knows a message by peer, Message ID and token until it expires', () => {
    const m = new MessageMemory(64);
    const k = m.key('127.0.0.1', 5683, 7);
    const ref = m.remember(k, token([1, 2, 3]), 1000);
    assert.equal(m.find(k, token([1, 2, 3]), 999), ref);
    assert.equal(m.find(k, token([1, 2, 3]), 1000), -1, 'expired');
    assert.equal(m.find(k, token([1, 2, 4]), 0), -1, 'another token: a new message reusing the MID');
    assert.equal(m.find(k, token([1, 2, 3, 0]), 0), -1, 'a longer token is another token');
    assert.equal(m.find(m.key('127.0.0.1', 5684, 7), token([1, 2, 3]), 0), -1, 'another port');
    assert.equal(m.find(m.key('127.0.0.2', 5683, 7), token([1, 2, 3]), 0), -1, 'another address');
    assert.equal(m.find(m.key('127.0.0.1', 5683, 8), token([1, 2, 3]), 0), -1, 'another MID');
  });

  it('tells apart tokens of every length, 0 to 8 bytes', () => {
    const m = new MessageMemory(64);
    const tokens = Array.from({ length: 9 }, (_, n) => token(Array.from({ length: n }, (_, i) => 0xf0 + i)));
    for (const [mid, t] of tokens.entries()) m.remember(m.key('::1', 1, mid), t, 10);
    tokens.forEach((t, mid) => {
      assert.notEqual(m.find(m.key('::1', 1, mid), t, 0), -1);
      for (const other of tokens) if (other !== t) assert.equal(m.find(m.key('::1', 1, mid), other, 0), -1);
    });
  });

  it('keeps the answer to a CON until the message is forgotten', () => {
    const m = new MessageMemory(4);
    const k = m.key('10.0.0.1', 1, 1);
    const ref = m.remember(k, token([9]), 100);
    m.setReply(ref, Buffer.from('answer'));
    assert.equal(m.reply(m.find(k, token([9]), 0))?.toString(), 'answer');
    for (let mid = 2; mid <= 5; mid++) m.remember(m.key('10.0.0.1', 1, mid), token([9]), 100);
    assert.equal(m.find(k, token([9]), 0), -1, 'the oldest of five is forgotten by a memory of four');
    assert.equal(m.reply(ref), undefined);
    m.setReply(ref, Buffer.from('too late'));
    assert.equal(m.reply(ref), undefined, 'an answer for a forgotten message is not kept in another’s slot');
  });

  it('a message remembered again replaces the earlier one of its key', () => {
    const m = new MessageMemory(8);
    const k = m.key('10.0.0.1', 1, 1);
    const first = m.remember(k, token([1]), 100);
    m.setReply(first, Buffer.from('old'));
    const second = m.remember(k, token([2]), 200);
    assert.equal(m.find(k, token([1]), 0), -1);
    assert.equal(m.find(k, token([2]), 150), second);
    assert.equal(m.reply(second), undefined);
  });

  it('past 65,536 peer addresses (forged sources) it starts again, forgetting, and still works', () => {
    const m = new MessageMemory(64);
    const k = m.key('10.0.0.1', 1, 1);
    m.remember(k, token([1]), 100);
    for (let i = 0; i < 65_536; i++) m.key(`192.168.${i >> 8}.${i & 255}`, 1, 1);
    assert.equal(m.find(m.key('10.0.0.1', 1, 1), token([1]), 0), -1, 'forgotten with the numbering');
    // The address numbered first after the restart must not inherit what the old first one sent.
    assert.equal(m.find(m.key('192.168.255.255', 1, 1), token([1]), 0), -1);
    const k2 = m.key('10.0.0.2', 1, 1);
    m.remember(k2, token([2]), 100);
    assert.notEqual(m.find(k2, token([2]), 0), -1);
    assert.equal(m.find(m.key('10.0.0.3', 1, 1), token([2]), 0), -1, 'another address is another key');
  });

  for (const seed of [1, 2, 3]) {
    it(`agrees with a model over 60,000 random messages (seed ${seed})`, () => {
      const rnd = random(seed);
      const max = 1000;
      const m = new MessageMemory(max);
      // The model: every remembered message with its arrival number; alive while fewer than `max`
      // messages arrived after it and no later one of the same key replaced it.
      const model = new Map<string, { seq: number; token: string; expires: number }>();
      let count = 0;
      const pick = () => {
        const address = `10.0.${Math.floor(rnd() * 3)}.${Math.floor(rnd() * 4)}`;
        const port = 5683 + Math.floor(rnd() * 3);
        const mid = Math.floor(rnd() * 400);
        const t = token(Array.from({ length: Math.floor(rnd() * 9) }, () => Math.floor(rnd() * 2)));
        return { id: `${address}|${port}|${mid}`, key: m.key(address, port, mid), t };
      };
      for (let now = 0; now < 60_000; now++) {
        const a = pick();
        const known = model.get(a.id);
        const expected = known && known.seq >= count - max && known.expires > now && known.token === a.t.toString('hex');
        assert.equal(m.find(a.key, a.t, now) >= 0, Boolean(expected), `message ${now}: ${a.id} ${a.t.toString('hex')}`);
        if (!expected) {
          const expires = now + 1 + Math.floor(rnd() * 3000);
          m.remember(a.key, a.t, expires);
          model.set(a.id, { seq: count++, token: a.t.toString('hex'), expires });
        }
      }
    });
  }
});
