// Solution-wide queries, on SQLite and on PostgreSQL: GET /api/solutions/{s}/observations
// with from/to/limit/after/tags answers every matching observation of the solution in
// [{deviceId, observations}] groups, paged by the next_page header (cursor `after`) that clients GET
// verbatim; without a range it keeps answering the latest of each device. Another tenant's
// observations never show, and a bad parameter is a 400 in the uniform error body.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../../helpers/pg.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const T0 = Date.UTC(2026, 10, 1);
const iso = (ms: number) => new Date(ms).toISOString();

interface Group {
  deviceId: string;
  observations: { timestamp: string; temperature?: number; tags?: string[] }[];
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`solution-wide observations (${backend})`, () => {
    let server: TestServer;
    let db: TestDatabase | undefined;
    let token: string;
    let otherToken: string;
    const ids: string[] = [];

    before(async () => {
      if (backend === 'postgres') db = await createTestDatabase('reef_solq');
      server = await startTestServer(db ? { databaseUrl: db.url } : {});
      token = (await server.login('owner')).token;
      otherToken = (await server.login('neighbour')).token;
      for (let d = 0; d < 3; d++) {
        const r = await server.request('POST', '/api/solutions/field/devices', { token, body: { deviceType: 'Thermo' } });
        ids.push(((await r.json()) as { id: string }).id);
      }
      // Device 0: 250 readings a minute apart; device 1: 3 (one tagged); device 2: none.
      const upload = (id: string, observations: unknown[]) => server.request('POST', `/api/solutions/field/devices/${id}/observations`, { token, body: { observations } });
      assert.equal(
        (
          await upload(
            ids[0]!,
            Array.from({ length: 250 }, (_, i) => ({ timestamp: iso(T0 + i * 60_000), temperature: 10 + i / 100 })),
          )
        ).status,
        201,
      );
      assert.equal(
        (
          await upload(
            ids[1]!,
            [0, 1, 2].map((i) => ({ timestamp: iso(T0 + i * 60_000), temperature: 30 + i, ...(i === 1 ? { tags: ['door'] } : {}) })),
          )
        ).status,
        201,
      );
      // The neighbour has a solution of the same name with observations in the same range.
      const theirs = ((await (await server.request('POST', '/api/solutions/field/devices', { token: otherToken, body: { deviceType: 'Thermo' } })).json()) as { id: string }).id;
      await server.request('POST', `/api/solutions/field/devices/${theirs}/observations`, { token: otherToken, body: { observations: [{ timestamp: iso(T0), temperature: 99 }] } });
    });
    after(async () => {
      await server?.close();
      await db?.drop();
    });

    /** The way the original SDK pages: GET the next_page URL verbatim with the same raw token. */
    async function allPages(first: string): Promise<{ groups: Group[]; pages: number }> {
      const groups: Group[] = [];
      let url: string | null = `${server.url}${first}`;
      let pages = 0;
      while (url) {
        const r: Response = await fetch(url, { headers: { authorization: token, 'content-type': 'application/json', accept: 'application/json' } });
        assert.equal(r.status, 200);
        groups.push(...((await r.json()) as Group[]));
        url = r.headers.get('next_page');
        pages++;
        assert.ok(pages < 100, 'paging ends');
      }
      return { groups, pages };
    }

    it('a range answers every matching observation, grouped by device, paged through next_page', async () => {
      const q = `from=${encodeURIComponent(iso(T0))}&to=${encodeURIComponent(iso(T0 + 300 * 60_000))}&limit=100`;
      const { groups, pages } = await allPages(`/api/solutions/field/observations?${q}`);
      assert.equal(pages, 3);
      const flat = groups.flatMap((g) => g.observations.map((o) => `${g.deviceId}@${o.timestamp}`));
      const expected = [...Array.from({ length: 250 }, (_, i) => `${ids[0]}@${iso(T0 + (249 - i) * 60_000)}`), ...[2, 1, 0].map((i) => `${ids[1]}@${iso(T0 + i * 60_000)}`)];
      assert.deepEqual(flat, expected, 'each observation once, device by device, newest first');
      assert.ok(groups.every((g) => g.observations.length > 0));
    });

    it('from (inclusive) and to (exclusive) bound it; tags with a range filters; limit caps the page', async () => {
      const r = await server.request('GET', `/api/solutions/field/observations?from=${iso(T0 + 60_000)}&to=${iso(T0 + 3 * 60_000)}`, { token });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('next_page'), null);
      assert.deepEqual(
        ((await r.json()) as Group[]).map((g) => [g.deviceId, g.observations.map((o) => o.timestamp)]),
        [
          [ids[0], [iso(T0 + 2 * 60_000), iso(T0 + 60_000)]],
          [ids[1], [iso(T0 + 2 * 60_000), iso(T0 + 60_000)]],
        ],
      );
      const tagged = (await (await server.request('GET', `/api/solutions/field/observations?from=${iso(T0)}&to=${iso(T0 + 86_400_000)}&tags=door`, { token })).json()) as Group[];
      assert.deepEqual(tagged, [{ deviceId: ids[1], observations: [{ timestamp: iso(T0 + 60_000), temperature: 31, tags: ['door'] }] }]);
      const one = await server.request('GET', `/api/solutions/field/observations?from=${iso(T0)}&limit=1`, { token });
      const body = (await one.json()) as Group[];
      assert.equal(body.length, 1);
      assert.equal(body[0]!.observations.length, 1);
      assert.match(one.headers.get('next_page')!, /^http:\/\/.+\/api\/solutions\/field\/observations\?.*after=/);
    });

    it("without a range it is still the latest of each device (tags and limit ignored), and never another tenant's", async () => {
      for (const q of ['', '?tags=door', '?limit=1']) {
        const latest = (await (await server.request('GET', `/api/solutions/field/observations${q}`, { token })).json()) as Group[];
        assert.deepEqual(
          latest.map((g) => [g.deviceId, g.observations.length]),
          [
            [ids[0], 1],
            [ids[1], 1],
          ],
          q,
        );
        assert.equal(latest[0]!.observations[0]!.timestamp, iso(T0 + 249 * 60_000));
      }
      const theirs = (await (await server.request('GET', `/api/solutions/field/observations?from=${iso(T0)}`, { token: otherToken })).json()) as Group[];
      assert.equal(theirs.length, 1);
      assert.ok(!ids.includes(theirs[0]!.deviceId));
      assert.deepEqual(
        theirs[0]!.observations.map((o) => o.temperature),
        [99],
      );
    });

    it('bad parameters are 400 in the uniform error body', async () => {
      for (const [q, code, field] of [
        ['from=yesterday', 'VALIDATION_FAILED', 'from'],
        [`from=${iso(T0 + 1000)}&to=${iso(T0)}`, 'VALIDATION_FAILED', 'from'],
        ['after=2026-11-01T00:00:00.000Z', 'INVALID_CURSOR', 'after'],
        ['after=nonsense~12', 'INVALID_CURSOR', 'after'],
        ['from=2026-11-01T00:00:00Z&limit=0', 'VALIDATION_FAILED', undefined],
      ] as const) {
        const r = await server.request('GET', `/api/solutions/field/observations?${q}`, { token });
        assert.equal(r.status, 400, q);
        const e = (await r.json()) as { code: string; field?: string; requestId: string; statusCode: number };
        assert.equal(e.code, code, q);
        assert.equal(e.statusCode, 400);
        if (field) assert.equal(e.field, field, q);
      }
      assert.equal((await server.request('GET', `/api/solutions/nosuch/observations?from=${iso(T0)}`, { token })).status, 404);
    });
  });
}
