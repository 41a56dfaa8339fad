// Stopping the service while a client's upload is in flight: the upload is answered, and the kept-alive
// connection is closed once it is, so that the stop does not wait for the keep-alive timeout.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, it } from 'node:test';
import { startTestServer } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

describe('stopping the service', () => {
  it('answers an upload in flight, then closes its kept-alive connection', async () => {
    // An hour of keep-alive: a connection left open would hold the stop for that long.
    const s = await startTestServer({ http: { keepAliveTimeoutMs: 3_600_000 } });
    const { token } = await s.login('stop');
    const created = await s.request('POST', '/api/solutions/StudioSimulation/devices', { token, body: { deviceType: 'Thermo' } });
    const { id } = (await created.json()) as { id: string };
    const body = JSON.stringify({ observations: [{ timestamp: '2026-11-28T10:00:00.000Z', temperature: 21.5 }] });
    const port = new URL(s.url).port;
    const socket = net.connect(Number(port), '127.0.0.1');
    let answer = '';
    let ended = false;
    socket.setEncoding('utf8').on('data', (d) => (answer += d));
    socket.on('close', () => (ended = true));
    await new Promise((r) => socket.once('connect', r));
    // Headers and half the body: the request is in flight when the stop begins.
    const head = `POST /api/solutions/StudioSimulation/devices/${id}/observations HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const taken = new Promise((r) => s.app.server.once('request', r));
    socket.write(head + body.slice(0, 10));
    await taken;
    const closing = s.close();
    await waitFor('the listener to stop accepting', () => !s.app.server.listening);
    socket.write(body.slice(10));
    await waitFor('the answer', () => answer.includes('\r\n\r\n'));
    assert.match(answer, /^HTTP\/1\.1 201 /);
    await waitFor('the server to close the connection', () => ended);
    await closing;
  });
});
