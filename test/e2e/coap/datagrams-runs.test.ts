// Runs of datagrams to one peer on the batched socket (native/udp-batch.c): on Linux they go
// through the kernel as one packet (UDP GSO) and a batched socket takes them as one (UDP GRO); what
// every peer receives must still be the very datagrams sent, each on its own, in order. A kernel or
// route that refuses a run must not cost a datagram: small-mtu.child.ts makes one in a network
// namespace of its own (`unshare -rn`; `ip`, iproute2).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import path from 'node:path';
import { after, it } from 'node:test';
import { type Datagrams, openDatagrams } from '../../../src/coap/index.ts';
import { waitFor } from '../../helpers/wait.ts';

const open: { close(): unknown }[] = [];
after(async () => {
  for (const s of open) await s.close();
});

async function batched(): Promise<Datagrams> {
  const d = await openDatagrams({ host: '127.0.0.1', port: 0, batched: true, maxMessageSize: 1152 });
  open.push(d);
  return d;
}

/** `n` datagrams of `size` bytes, each naming its place and the peer's letter. */
function datagrams(letter: string, from: number, n: number, size: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => Buffer.from(`${letter}${from + i}:`.padEnd(size, letter)));
}

it('runs of datagrams arrive as the datagrams sent, in order, at a plain peer and at a batched (GRO) one', async () => {
  const sender = await batched();
  sender.listen(
    () => undefined,
    (e) => assert.fail(e),
  );
  // A plain node:dgram peer (the kernel splits a run for it) and a batched one (which splits it itself).
  const plain = dgram.createSocket('udp4');
  await new Promise<void>((r) => plain.bind(0, '127.0.0.1', () => r()));
  open.push({ close: () => new Promise<void>((r) => plain.close(() => r())) });
  const gotPlain: string[] = [];
  plain.on('message', (m) => gotPlain.push(m.toString()));
  const receiver = await batched();
  const gotBatched: string[] = [];
  receiver.listen(
    (b, address, port) => {
      assert.deepEqual([address, port], ['127.0.0.1', sender.address().port]);
      gotBatched.push(b.toString());
    },
    (e) => assert.fail(e),
  );
  const toPlain: Buffer[] = [];
  const toBatched: Buffer[] = [];
  // In one turn, so they leave in one flush: a run of 70 (more than one run takes), a shorter one
  // that ends a run, a run of another size, a datagram too big to join a run, runs to the two
  // peers interleaved, empty datagrams, which never join one, and at the batched peer more
  // datagrams than one call hands over.
  const plan: [Buffer[], Buffer[]][] = [
    [toPlain, datagrams('p', 0, 70, 48)],
    [toPlain, datagrams('p', 70, 1, 20)],
    [toPlain, datagrams('p', 71, 5, 48)],
    [toBatched, datagrams('b', 0, 10, 300)],
    [toBatched, datagrams('b', 10, 2, 1150)],
    [toPlain, datagrams('p', 76, 3, 64)],
    [toBatched, datagrams('b', 12, 3, 64)],
    [toBatched, [Buffer.alloc(0), Buffer.alloc(0)]],
    // More datagrams than the addon hands over in one call (128): runs of 64 received whole.
    [toBatched, datagrams('b', 15, 300, 32)],
  ];
  for (const [list, ds] of plan)
    for (const d of ds) {
      list.push(d);
      sender.send(d, list === toPlain ? plain.address().port : receiver.address().port, '127.0.0.1');
    }
  await waitFor('every datagram at both peers', () => gotPlain.length >= toPlain.length && gotBatched.length >= toBatched.length);
  assert.deepEqual(
    gotPlain,
    toPlain.map((b) => b.toString()),
  );
  assert.deepEqual(
    gotBatched,
    toBatched.map((b) => b.toString()),
  );
  // The runs went out as runs (a kernel that refused them would have turned segmentation off) and
  // the batched peer asked to take them whole: the path this test is about was taken.
  assert.deepEqual(sender.offload(), { segmentation: true, coalescing: true });
  assert.deepEqual(receiver.offload(), { segmentation: true, coalescing: true });
});

interface Outcome {
  before: { segmentation: boolean };
  after: { segmentation: boolean };
  plain: boolean;
  batched: boolean;
  errors: string[];
}

it('a route that refuses runs loses no datagram: they go one by one from then on', async () => {
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile('unshare', ['-rn', process.execPath, '--import', 'tsx', path.join(import.meta.dirname, 'small-mtu.child.ts')], { timeout: 60_000 }, (e, out, err) =>
      e ? reject(new Error(`${e.message}\n${err}`)) : resolve(out),
    ),
  );
  const r = JSON.parse(stdout) as Outcome;
  assert.deepEqual(r, { before: { segmentation: true }, after: { segmentation: false }, plain: true, batched: true, errors: [] });
});
