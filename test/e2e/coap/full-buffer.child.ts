// Run by datagrams-full-buffer.test.ts inside its own user and network namespace (`unshare -rn`),
// where it may slow the loopback interface down: a token bucket on `lo` holds sent datagrams in
// the queue discipline, and a datagram counts against its sender's send buffer until it leaves
// there, so a burst larger than the buffer meets EAGAIN, which plain loopback never gives (the
// kernel hands a datagram to the receiving socket inside the send call). Prints one JSON line.
import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import { openDatagrams } from '../../../src/coap/index.ts';
import { waitFor } from '../../helpers/wait.ts';

const COUNT = 600;
const SIZE = 1000;

execFileSync('ip', ['link', 'set', 'lo', 'up']);
// 20 Mbit/s: the 600 kB burst leaves in about a quarter of a second, ~200 kB at a time fit the
// send buffer (net.core.wmem_default), so the sender meets a full buffer several times.
execFileSync('tc', ['qdisc', 'add', 'dev', 'lo', 'root', 'tbf', 'rate', '20mbit', 'burst', '32kb', 'limit', '16mb']);

const results: Record<string, unknown> = {};
for (const batched of [false, true]) {
  const receiver = dgram.createSocket('udp4');
  await new Promise<void>((r) => receiver.bind(0, '127.0.0.1', () => r()));
  const got: string[] = [];
  receiver.on('message', (m) => got.push(m.toString()));
  // Room for the whole burst at the receiver (4 MiB, net.core.rmem_max here): the loss this test
  // looks for is the sender's; a receiver kept off the CPU by other tests for a few tens of
  // milliseconds would otherwise drop datagrams from its ~200 KiB default buffer (seen in CI).
  receiver.setRecvBufferSize(4 << 20);
  const sender = await openDatagrams({ host: '127.0.0.1', port: 0, batched, maxMessageSize: 1152 });
  const errors: string[] = [];
  sender.listen(
    () => undefined,
    (e) => errors.push(e.message),
  );
  const sent: string[] = [];
  for (let i = 0; i < COUNT; i++) {
    const text = `${i}:`.padEnd(SIZE, String.fromCharCode(97 + (i % 26)));
    sent.push(text);
    sender.send(Buffer.from(text), receiver.address().port, '127.0.0.1');
  }
  // After this turn the batched socket has flushed its queue (process.nextTick), and both have
  // handed the kernel what it would take.
  await new Promise((r) => setImmediate(r));
  const queuedAfterBurst = sender.queuedSends();
  await waitFor(`${COUNT} datagrams at the ${sender.kind} sender's receiver`, () => got.length >= COUNT, 30_000).catch((e: Error) => {
    throw new Error(`${e.message} (${got.length} arrived)`);
  });
  results[sender.kind] = { queuedAfterBurst, queuedAtEnd: sender.queuedSends(), inOrder: got.length === sent.length && got.every((g, i) => g === sent[i]), received: got.length, errors };
  await sender.close();
  receiver.close();
}
process.stdout.write(JSON.stringify(results) + '\n');
