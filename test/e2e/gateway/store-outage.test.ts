// A store outage while the gateway checks a session: the client is told 5.03 Service
// Unavailable with a Max-Age giving the seconds to wait (RFC 7252 §5.9.3.4; the catalogue's
// STORE_UNAVAILABLE), never 4.01 — its session is fine and stays open, so the same request works
// again once the database is back. Real parts: PostgreSQL on 127.0.0.1:5432 reached through a TCP
// relay the test can cut (so the outage is a real lost connection, as when the database restarts),
// the gateway over real UDP, libcoap's coap-client.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { coapClient, freePort, openSession, startGateway, until, viaGateway, type GatewayHarness } from '../../helpers/gateway.ts';

/** A TCP relay to PostgreSQL; `cut()` drops every connection and refuses new ones until `restore()`. */
async function pgRelay(target: { host: string; port: number }) {
  const open = new Set<net.Socket>();
  let down = false;
  const server = net.createServer((client) => {
    if (down) return void client.destroy();
    const upstream = net.connect(target.port, target.host);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      down = true;
      for (const s of open) s.destroy();
    },
    restore() {
      down = false;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** libcoap prints the response at verbosity 7 as "v:1 t:ACK c:5.03 ... [ Max-Age:1 ] :: 'diagnostic'". */
const RESPONSE = /c:(\d\.\d\d)\b[^\n]*/;

describe('a store outage during the session check', () => {
  let db: TestDatabase;
  let relay: Awaited<ReturnType<typeof pgRelay>>;
  let h: GatewayHarness;
  const MAC = '00000000000000c5';

  before(async () => {
    db = await createTestDatabase('reef_outage');
    relay = await pgRelay({ host: '127.0.0.1', port: 5432 });
    const url = new URL(db.url);
    url.host = `127.0.0.1:${relay.port}`;
    h = await startGateway({ config: { databaseUrl: url.toString() } });
  });
  after(async () => {
    relay?.restore();
    await h?.close();
    await relay?.close();
    await db?.drop();
  });

  it('answers 5.03 with Max-Age (not 4.01), keeps the session, and serves again once the store is back', async () => {
    const alice = await h.t.login('alice');
    await h.kit(alice.tenantId, MAC);
    const port = await freePort();
    assert.match((await openSession(h, port, alice.token)).out, /session open until/);
    const show = () => coapClient(['-p', String(port), '-B', '5', '-v', '7', `coap://127.0.0.1:${h.addr.port}/sessions`]);
    assert.equal(RESPONSE.exec((await show()).out)?.[1], '2.05');

    relay.cut();
    // The account behind a session is re-read at most once a second; until then the check is
    // answered from memory, so ask until the gateway has to reach the store.
    let answer = '';
    await until(async () => {
      answer = RESPONSE.exec((await show()).out)?.[0] ?? '';
      return !answer.includes('c:2.05');
    }, 'the session check reaches the store');
    assert.match(answer, /c:5\.03/, answer);
    assert.match(answer, /Max-Age:1\b/, answer);
    assert.match(answer, /database is unreachable/, answer);

    // A proxied request in the outage gets the same answer, not a 4.01 nor a 4.04.
    const proxied = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens', ['-v', '7']);
    assert.match(RESPONSE.exec(proxied.out)?.[0] ?? '', /c:5\.03.*Max-Age:1\b/);

    relay.restore();
    // The session survived the outage: once the pool reconnects, the same request is served.
    await until(async () => RESPONSE.exec((await show()).out)?.[1] === '2.05', 'the store is back');
    const get = await viaGateway(h, port, MAC, '/snsr/arduino/temp?sens');
    assert.match(get.stdout.trim(), /^\d{9,12},-?\d+\.\d{2},[CF]$/);
  });
});
