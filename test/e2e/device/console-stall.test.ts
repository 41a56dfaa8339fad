// A diagnostic-console reader that stops reading (docs/security.md "Kits"): the kit keeps answering
// CoAP and the console keeps at most MAX_PENDING_OUTPUT bytes for it, dropping the rest with a note
// once the reader reads again. Before, a tty write blocked the kit's process once the pty's buffer
// was full, so one idle terminal froze every kit of the process. The kit runs as `reef device` in a
// child process, so a frozen kit fails the test instead of freezing it.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { ptyPair, waitFor } from '../../helpers/device.ts';
import { BIN } from '../../helpers/reef.ts';

function coapGet(url: string): Promise<string> {
  return new Promise((resolve) => {
    execFile('coap-client-notls', ['-B', '5', '-m', 'get', url], { timeout: 20_000 }, (_err, stdout) => resolve(String(stdout)));
  });
}

describe('diagnostic console: a reader that stops reading', () => {
  let pty: Awaited<ReturnType<typeof ptyPair>>;
  let kit: ReturnType<typeof spawn>;
  let out = '';
  let fd = -1;

  before(async () => {
    pty = await ptyPair();
    kit = spawn(process.execPath, [BIN, 'device', '--port', '0', '--host', '127.0.0.1', '--log-level', '0', '--allow-direct', '--diag', pty.a, '--mac', '00000000000016f9'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    kit.stdout!.on('data', (d) => (out += d));
    kit.stderr!.on('data', (d) => (out += d));
    await waitFor(() => /coap:\/\/127\.0\.0\.1:\d+\//.test(out), 15_000, 'the kit address');
    // The terminal: written to, never read (non-blocking, so this test is never the one stuck).
    fd = fs.openSync(pty.b, fs.constants.O_RDWR | fs.constants.O_NOCTTY | fs.constants.O_NONBLOCK);
  });
  after(() => {
    if (fd >= 0) fs.closeSync(fd);
    kit.kill();
    pty.close();
  });

  test('the kit keeps answering CoAP, and the console answers again once the reader reads', async () => {
    const base = /(coap:\/\/127\.0\.0\.1:\d+)\//.exec(out)![1]!;
    assert.match(await coapGet(`${base}/.well-known/core`), /<\//, 'the kit answers before the flood');
    // 2,000 `help` commands: about 1.6 MB of answers, far past every buffer between kit and reader.
    const line = Buffer.from('help\r'.repeat(100));
    const deadline = Date.now() + 10_000;
    for (let sent = 0; sent < 20 && Date.now() < deadline; ) {
      try {
        fs.writeSync(fd, line);
        sent++;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') throw e;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    // Time for the kit to answer all it read and fill the line.
    await new Promise((r) => setTimeout(r, 1500));
    const answer = await coapGet(`${base}/.well-known/core`);
    assert.match(answer, /<\//, 'the kit answers CoAP while its console reader is stalled');

    // The reader reads again: what was kept arrives, then the note, and a command is answered.
    let text = '';
    const buf = Buffer.alloc(65536);
    const drain = () => {
      for (;;) {
        try {
          const n = fs.readSync(fd, buf, 0, buf.length, null);
          if (n <= 0) return;
          text += buf.subarray(0, n).toString('latin1');
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'EAGAIN') return;
          throw e;
        }
      }
    };
    await waitFor(
      () => {
        drain();
        return /bytes of output dropped: the terminal was not reading/.test(text);
      },
      15_000,
      'the note about dropped output',
    );
    const start = text.length;
    fs.writeSync(fd, 'show mac\r');
    await waitFor(
      () => {
        drain();
        return text.slice(start).includes('mac = 00000000000016f9');
      },
      10_000,
      'the answer to show mac',
    );
    assert.equal(kit.exitCode, null, 'the kit is still running');
  });
});
