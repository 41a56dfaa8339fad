// `reef device` as a user runs it: flags, help, errors reported together, one line per kit.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Code, CoapEndpoint, codeToString } from '../../src/coap/index.ts';
import { run } from '../../src/cli/device.ts';
import { loadDeviceConfig, macPlus } from '../../src/device/config.ts';
import { waitFor } from './helpers.ts';

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
    const done = run(['--count', '3', '--port', '0', '--mac', '00000000000000fe', '--log-level', '0', '--firmware', '1.2.1000.112738'], {
      out: (l) => out.push(l),
      err: () => undefined,
      until,
      env: {},
    });
    await waitFor(() => out.length === 3, 10_000, 'three kit lines');
    const client = await CoapEndpoint.create();
    try {
      for (const [i, line] of out.entries()) {
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
});
