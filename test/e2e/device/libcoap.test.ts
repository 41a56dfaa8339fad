// Interop with libcoap's coap-client (Debian libcoap3-bin: coap-client-notls) against a kit.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { Kit } from '../../../src/device/kit.ts';
import { startKit } from '../../helpers/device.ts';

const run = promisify(execFile);
const READING = /\d+,-?\d+\.\d\d,[CF]/g;

describe('libcoap coap-client against a kit', () => {
  let kit: Kit;
  let base: string;
  // The kit runs in this process, so the client must run asynchronously (execFile, not execFileSync).
  const client = async (...args: string[]): Promise<string> => (await run('coap-client-notls', ['-B', '5', ...args], { timeout: 20_000 })).stdout;

  before(async () => {
    kit = await startKit({ periodMs: 250 });
    base = `coap://127.0.0.1:${kit.address().port}`;
  });
  after(() => kit.stop());

  test('GET ?sens prints a reading', async () => {
    const out = await client('-m', 'get', `${base}/snsr/arduino/temp?sens`);
    assert.match(out.trim(), /^\d+,-?\d+\.\d\d,F$/);
  });

  test('PUT ?cfg=C then GET ?cfg reads C', async () => {
    await client('-m', 'put', `${base}/snsr/arduino/temp?cfg=C`);
    assert.equal(kit.sensor.unit, 'C');
    const out = await client('-m', 'get', `${base}/snsr/arduino/temp?cfg`);
    assert.match(out.trim(), /^\d+,C$/);
    const r = await client('-m', 'get', `${base}/snsr/arduino/temp?sens`);
    assert.match(r.trim(), /,C$/);
    await client('-m', 'put', `${base}/snsr/arduino/temp?cfg=F`);
  });

  test('observe with -s receives the registration answer and at least three notifications', async () => {
    const out = await client('-s', '2', '-m', 'get', `${base}/snsr/arduino/temp?sens`);
    const readings = out.match(READING) ?? [];
    assert.ok(readings.length >= 4, `expected >= 4 readings, got ${readings.length}: ${out}`);
  });

  test('-N sends NON and gets the reading', async () => {
    const out = await client('-N', '-m', 'get', `${base}/snsr/arduino/temp?sens`);
    assert.match(out.trim(), /^\d+,-?\d+\.\d\d,[CF]$/);
  });

  test('discovery: GET /.well-known/core lists the resources (reassembled from 128-byte blocks)', async () => {
    const out = await client('-m', 'get', `${base}/.well-known/core`);
    assert.match(out, /<\/snsr\/arduino\/temp>;rt="temperature";if="sensor";obs/);
    assert.match(out, /<\/snsr\/sys\/time>/);
  });

  test('the clock: GET /sys/time with Accept text/plain and a PUT with the TLV payload', async () => {
    const out = await client('-A', '0', '-m', 'get', `${base}/snsr/sys/time`);
    assert.ok(Math.abs(Number(out.trim()) - Date.now() / 1000) < 60);
  });

  test('the wrong prefix is 4.04', async () => {
    const out = await run('coap-client-notls', ['-B', '5', '-m', 'get', `${base}/sensor/arduino/temp?sens`], { timeout: 20_000 }).then(
      (r) => r.stdout + r.stderr,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
    assert.match(out, /4\.04/);
  });
});
