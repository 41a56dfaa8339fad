// `reef device` as a user runs it: flags, help, errors reported together, one line per kit.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Code, CoapEndpoint, codeToString } from '../../../src/coap/index.ts';
import { run } from '../../../src/cli/device.ts';
import { loadDeviceConfig, macPlus } from '../../../src/device/config.ts';
import { waitFor } from '../../helpers/device.ts';

describe('reef device', () => {
  test('--help prints usage and exits 0', async () => {
    const out: string[] = [];
    assert.equal(await run(['--help'], { out: (l) => out.push(l) }), 0);
    assert.match(out.join('\n'), /--count N/);
  });

  test('invalid flags and environment values are reported together with exit code 2', async () => {
    const err: string[] = [];
    const code = await run(['--count', '0', '--mac', 'xyz', '--period', 'soon'], { err: (l) => err.push(l), env: { REEF_DEVICE_LOG_LEVEL: '9' } });
    assert.equal(code, 2);
    const text = err.join('\n');
    for (const w of ['count', 'mac', 'periodMs', 'logLevel']) assert.match(text, new RegExp(w));
    assert.equal(await run(['--bogus'], { err: () => undefined }), 2);
  });

  test('--count 3 --port 0 prints one line per kit, every kit answers, and the command stops cleanly', async () => {
    const out: string[] = [];
    let stop!: () => void;
    const until = new Promise<void>((r) => (stop = r));
    const done = run(['--count', '3', '--port', '0', '--mac', '00000000000000fe', '--log-level', '0', '--firmware', '1.2.1000.112738', '--allow-direct'], {
      out: (l) => out.push(l),
      err: () => undefined,
      until,
      env: {},
    });
    await waitFor(() => out.length === 4, 10_000, 'three kit lines and the reach line');
    // The banner says who can reach the kits: here anyone, because of --allow-direct.
    assert.match(out[3]!, /^direct CoAP allowed \(--allow-direct, lab use\)/);
    const client = await CoapEndpoint.create();
    try {
      for (const [i, line] of out.slice(0, 3).entries()) {
        const m = /^([0-9a-f]{16}) coap:\/\/127\.0\.0\.1:(\d+)\/sensor$/.exec(line);
        assert.ok(m, line);
        assert.equal(m[1], macPlus('00000000000000fe', i));
        const r = await client.request({ address: '127.0.0.1', port: Number(m[2]) }, { method: Code.GET, uri: '/sensor/arduino/temp?sens' });
        assert.equal(codeToString(r.code), '2.05');
      }
    } finally {
      await client.close();
      stop();
    }
    assert.equal(await done, 0);
  });

  test('configuration: REEF_DEVICE_* variables, durations, and flags over the environment', () => {
    const c = loadDeviceConfig(
      { periodMs: '500ms' },
      { REEF_DEVICE_PERIOD: '5s', REEF_DEVICE_UART_TIMEOUT_IN_MS: '1500', REEF_DEVICE_COAP_MSG_MAX_AGE_IN_SECS: '120', REEF_DEVICE_GATEWAY: 'localhost:5683', REEF_DEVICE_CBOR: 'yes' },
    );
    assert.equal(c.periodMs, 500);
    assert.equal(c.uartTimeoutMs, 1500);
    assert.equal(c.maxAgeSec, 120);
    assert.deepEqual(c.gateway, { address: '127.0.0.1', port: 5683 });
    assert.equal(c.cbor, true);
    assert.equal(macPlus('00000000000000ff', 1), '0000000000000100');
  });

  test('a kit whose MAC is not provisioned says so in its log and in the output, instead of reporting it is up', async () => {
    const { startGateway } = await import('../../helpers/gateway.ts');
    const h = await startGateway();
    const out: string[] = [];
    const err: string[] = [];
    let stop!: () => void;
    const until = new Promise<void>((r) => (stop = r));
    const mac = '00000000000016f1';
    try {
      const done = run(['--mac', mac, '--port', '0', '--gateway', `127.0.0.1:${h.addr.port}`, '--key', 'ab'.repeat(32)], { out: (l) => out.push(l), err: (l) => err.push(l), until, env: {} });
      await waitFor(() => err.some((l) => l.startsWith(`${mac}: the gateway ignores this kit: MAC ${mac} is not provisioned`)), 15_000, 'the hint in the output');
      // The kit's own log (the terminal is its serial monitor) gives the hint at WARN.
      assert.ok(
        err.some((l) => / WARN the gateway ignores this kit: MAC 00000000000016f1 is not provisioned/.test(l)),
        err.join('\n'),
      );
      assert.ok(!out.concat(err).some((l) => / up on |accepted by the gateway/.test(l)), 'nothing claims the kit is up');
      assert.match(out.join('\n'), /reached only through the gateway 127\.0\.0\.1:\d+/);
      stop();
      assert.equal(await done, 0);
    } finally {
      stop();
      await h.close();
    }
  });

  test('--firmware-image prints an image the console accepts; --diag auto makes a pty pair, says where to connect, and runs the console there', async () => {
    const { Terminal } = await import('../../helpers/device.ts');
    const fs = await import('node:fs');
    const { parseFirmwareImage } = await import('../../../src/device/firmware.ts');
    const img: string[] = [];
    assert.equal(await run(['--firmware-image', '1.2.1000.112738'], { out: (l) => img.push(l) }), 0);
    const lines = img.join('\n').split('\n');
    assert.equal(lines.at(-1), 'end');
    assert.equal(parseFirmwareImage(lines.slice(0, -1)).version, '1.2.1000.112738');
    const bad: string[] = [];
    assert.equal(await run(['--firmware-image', 'v2'], { err: (l) => bad.push(l) }), 2);
    assert.match(bad.join(''), /looks like 1\.2\.1000\.117958/);

    const out: string[] = [];
    let stop!: () => void;
    const until = new Promise<void>((r) => (stop = r));
    let term: Awaited<ReturnType<typeof Terminal.open>> | undefined;
    try {
      // --diag auto: reef device makes the pty pair and says where to connect.
      const done = run(['--port', '0', '--log-level', '0', '--allow-direct', '--diag', 'auto', '--mac', '00000000000016f2'], { out: (l) => out.push(l), err: () => undefined, until, env: {} });
      await waitFor(() => out.some((l) => l.startsWith('diagnostic port on ')), 10_000, 'the console line');
      const user = /^diagnostic port: connect a terminal to (\S+) at 115200 baud/.exec(out.find((l) => l.startsWith('diagnostic port: connect')) ?? '')?.[1];
      assert.ok(user, out.join('\n'));
      term = await Terminal.open(user);
      const t = term;
      await waitFor(() => t.text.endsWith('> '), 5000, 'the banner and prompt');
      assert.match(t.text, /diagnostic port \(115200 baud\)/);
      assert.match(await term.command('help'), /^commands:/);
      assert.equal(await term.command('show mac'), 'mac = 00000000000016f2');
      assert.match(await term.command('save'), /^error: no state directory: start the kit with --state-dir DIR/);
      term.close();
      term = undefined;
      stop();
      assert.equal(await done, 0);
      assert.equal(fs.existsSync(user), false, 'the pty pair is gone with the kit');
    } finally {
      stop();
      term?.close();
    }
  });
});
