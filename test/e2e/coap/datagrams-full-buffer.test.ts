// A send buffer that fills up (EAGAIN) loses nothing and reorders nothing, on both datagram
// sockets. Loopback never fills it, so full-buffer.child.ts runs in a network namespace of its
// own (`unshare -rn`, util-linux; `ip` and `tc`, iproute2) with the loopback interface slowed down.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';

const CHILD = path.join(import.meta.dirname, 'full-buffer.child.ts');

interface Outcome {
  queuedAfterBurst: number;
  queuedAtEnd: number;
  inOrder: boolean;
  received: number;
  errors: string[];
}

it('a burst larger than the send buffer waits for room and arrives whole and in order (node:dgram and batched)', async () => {
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile('unshare', ['-rn', process.execPath, '--import', 'tsx', CHILD], { timeout: 120_000 }, (e, out, err) => (e ? reject(new Error(`${e.message}\n${err}`)) : resolve(out))),
  );
  const results = JSON.parse(stdout) as Record<string, Outcome>;
  for (const kind of ['dgram', 'batched']) {
    const r = results[kind]!;
    // The kernel refused part of the burst: the test reached the path it is about.
    assert.ok(r.queuedAfterBurst > 0, `${kind}: the burst should have met a full send buffer`);
    assert.deepEqual({ received: r.received, inOrder: r.inOrder, queuedAtEnd: r.queuedAtEnd, errors: r.errors }, { received: 600, inOrder: true, queuedAtEnd: 0, errors: [] }, kind);
  }
});
