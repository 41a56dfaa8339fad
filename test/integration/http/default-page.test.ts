// The page a client gets without `limit`, on SQLite and on PostgreSQL: about 1 MB of the original's
// JSON (wire §1: "the original capped a page at 1 MB when no limit was given"), 16,384
// observations (docs/api.md "One device"), so the reference plot page, which asks without a
// limit, shows 45 hours of a 10-second device. `limit` keeps its cap of 10,000 a page.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const T0 = Date.UTC(2026, 10, 1);
const STEP = 10_000;
const TOTAL = 16_500;
const DEFAULT_PAGE = 16_384;
const iso = (ms: number) => new Date(ms).toISOString();

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`the default page (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    let token: string;
    let id: string;
    const base = () => `/api/solutions/sandbox/devices/${id}/observations`;

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_page');
      server = await startTestServer(db ? { databaseUrl: db.url } : {});
      token = (await server.login('pager')).token;
      id = ((await (await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'Thermo' } })).json()) as { id: string }).id;
      // A 10-second device over 45.8 hours, in uploads of at most 10,000.
      for (let i = 0; i < TOTAL; i += 10_000) {
        const observations = Array.from({ length: Math.min(10_000, TOTAL - i) }, (_, k) => ({ timestamp: iso(T0 + (i + k) * STEP), temperature: 20 + ((i + k) % 100) / 100 }));
        const r = await server.request('POST', base(), { token, body: { observations } });
        assert.equal(r.status, 201);
      }
    });
    after(async () => {
      await server.close();
      await db?.drop();
    });

    it('one device without limit: 16,384 newest first, within 1 MiB of the original JSON; next_page holds the rest', async () => {
      const r = await server.request('GET', base(), { token });
      assert.equal(r.status, 200);
      const page = (await r.json()) as { observations: { timestamp: string; temperature: number }[] };
      assert.equal(page.observations.length, DEFAULT_PAGE);
      assert.equal(page.observations[0]!.timestamp, iso(T0 + (TOTAL - 1) * STEP));
      assert.equal(page.observations.at(-1)!.timestamp, iso(T0 + (TOTAL - DEFAULT_PAGE) * STEP));
      // The original's form of these observations (temperature and timestamp) fits in 1 MiB.
      const original = JSON.stringify({ observations: page.observations.map((o) => ({ temperature: o.temperature, timestamp: o.timestamp })) });
      assert.ok(Buffer.byteLength(original) <= 1024 * 1024, `${Buffer.byteLength(original)} bytes`);
      const next = r.headers.get('next_page');
      assert.ok(next);
      assert.doesNotMatch(next, /limit=/, 'the next page is asked for as this one was');
      const rest = await fetch(next, { headers: { authorization: token } });
      const tail = ((await rest.json()) as { observations: { timestamp: string }[] }).observations;
      assert.equal(tail.length, TOTAL - DEFAULT_PAGE);
      assert.equal(tail[0]!.timestamp, iso(T0 + (TOTAL - DEFAULT_PAGE - 1) * STEP));
      assert.equal(rest.headers.get('next_page'), null);
    });

    it('limit keeps its cap: 20,000 is served 10,000 a page; a smaller limit is honoured', async () => {
      const big = await server.request('GET', `${base()}?limit=20000`, { token });
      assert.equal(((await big.json()) as { observations: unknown[] }).observations.length, 10_000);
      assert.match(big.headers.get('next_page') ?? '', /limit=20000&after=/);
      const small = await server.request('GET', `${base()}?limit=5`, { token });
      assert.equal(((await small.json()) as { observations: unknown[] }).observations.length, 5);
    });

    it('the solution-wide range query pages the same way without limit', async () => {
      const r = await server.request('GET', `/api/solutions/sandbox/observations?from=${iso(T0)}`, { token });
      assert.equal(r.status, 200);
      const groups = (await r.json()) as { deviceId: string; observations: unknown[] }[];
      assert.deepEqual(
        groups.map((g) => [g.deviceId, g.observations.length]),
        [[id, DEFAULT_PAGE]],
      );
      assert.ok(r.headers.get('next_page'));
    });
  });
}
