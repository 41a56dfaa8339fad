// Run by datagrams-runs.test.ts inside its own user and network namespace (`unshare -rn`), where
// the loopback interface's MTU is set below the datagrams' size: the kernel refuses a run of them
// (a run's datagrams must each fit the route's MTU), while one datagram alone leaves in IP
// fragments. Prints one JSON line: whether every datagram arrived in order at a plain peer and at
// a batched one, and the sender's segmentation before and after.
import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import { openDatagrams } from '../../../src/coap/index.ts';
import { waitFor } from '../../helpers/wait.ts';

execFileSync('ip', ['link', 'set', 'lo', 'up']);
execFileSync('ip', ['link', 'set', 'lo', 'mtu', '1000']);

const sender = await openDatagrams({ host: '127.0.0.1', port: 0, batched: true, maxMessageSize: 1152 });
const errors: string[] = [];
sender.listen(
  () => undefined,
  (e) => errors.push(e.message),
);
const plain = dgram.createSocket('udp4');
await new Promise<void>((r) => plain.bind(0, '127.0.0.1', () => r()));
const gotPlain: string[] = [];
plain.on('message', (m) => gotPlain.push(m.toString()));
const receiver = await openDatagrams({ host: '127.0.0.1', port: 0, batched: true, maxMessageSize: 1152 });
const gotBatched: string[] = [];
receiver.listen(
  (b) => gotBatched.push(b.toString()),
  (e) => errors.push(e.message),
);
const before = { segmentation: sender.offload().segmentation };
const sent = (letter: string, size: number) => Array.from({ length: 10 }, (_, i) => `${letter}${i}:`.padEnd(size, letter));
// Runs of 1,100-byte datagrams (too big for the MTU of 1,000 as a run), then small ones, which
// leave one by one once segmentation is off.
const toPlain = [...sent('p', 1100), ...sent('q', 40)];
const toBatched = [...sent('b', 1100), ...sent('c', 40)];
for (const t of toPlain) sender.send(Buffer.from(t), plain.address().port, '127.0.0.1');
for (const t of toBatched) sender.send(Buffer.from(t), receiver.address().port, '127.0.0.1');
await waitFor('every datagram', () => gotPlain.length >= toPlain.length && gotBatched.length >= toBatched.length, 20_000);
const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
process.stdout.write(`${JSON.stringify({ before, after: { segmentation: sender.offload().segmentation }, plain: same(gotPlain, toPlain), batched: same(gotBatched, toBatched), errors })}\n`);
await sender.close();
await receiver.close();
plain.close();
