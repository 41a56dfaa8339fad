// What one observation read may cost: a tag filter that matches little examines a bounded number
// of stored observations per page and hands on the rest through next_page (a filter matching
// nothing used to walk every row of the device on the main thread), and a bucketed read asks for
// a bounded number of buckets (more is 400 naming the limit). On SQLite and PostgreSQL alike.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { createTestDatabase } from '../../helpers/pg.ts';

const T0 = Date.UTC(2026, 5, 1);
const iso = (ms: number) => new Date(ms).toISOString();

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`bounded reads (${backend})`, () => {
    let server: TestServer;
    let token: string;
    let device: string;
    let drop: (() => Promise<void>) | undefined;
    before(async () => {
      let databaseUrl: string | null = null;
      if (backend === 'postgres') {
        const db = await createTestDatabase();
        databaseUrl = db.url;
        drop = db.drop;
      }
      server = await startTestServer({ databaseUrl, reads: { maxScan: 1000, maxBuckets: 500 } });
      token = (await server.login('reader')).token;
      const made = await server.request('POST', '/api/solutions/sandbox/devices', { token, body: { deviceType: 'Thermo' } });
      assert.equal(made.status, 201);
      device = ((await made.json()) as { id: string }).id;
      // 5,000 readings a minute apart; two carry the tag "door": the 100th and the 4,500th newest.
      const observations = Array.from({ length: 5000 }, (_, i) => ({
        timestamp: iso(T0 + i * 60_000),
        temperature: 20,
        tags: i === 4900 || i === 500 ? ['door'] : ['plain'],
      }));
      const up = await server.request('POST', `/api/solutions/sandbox/devices/${device}/observations`, { token, body: { observations } });
      assert.equal(up.status, 201, await up.text());
    });
    after(async () => {
      await server.close();
      await drop?.();
    });

    it('a tag filter examines at most REEF_READ_MAX_SCAN readings per page; next_page goes on; the walk finds every match once', async () => {
      let url: string | null = `${server.url}/api/solutions/sandbox/devices/${device}/observations?tags=door&limit=100`;
      const found: string[] = [];
      let pages = 0;
      while (url && pages < 20) {
        const r: Response = await fetch(url, { headers: { authorization: token } });
        assert.equal(r.status, 200);
        const body = (await r.json()) as { observations: { timestamp: string }[] };
        found.push(...body.observations.map((o) => o.timestamp));
        url = r.headers.get('next_page');
        pages++;
      }
      assert.deepEqual(found, [iso(T0 + 4900 * 60_000), iso(T0 + 500 * 60_000)]);
      assert.equal(pages, 5, '5,000 readings at 1,000 examined per page');
    });

    it('a tag that matches nothing answers an empty page with next_page, not a walk of the whole device', async () => {
      const r = await server.request('GET', `/api/solutions/sandbox/devices/${device}/observations?tags=none`);
      const r2 = await server.request('GET', `/api/solutions/sandbox/devices/${device}/observations?tags=none`, { token });
      assert.equal(r.status, 401);
      assert.equal(r2.status, 200);
      assert.deepEqual(await r2.json(), { observations: [] });
      assert.match(r2.headers.get('next_page') ?? '', /after=/);
    });

    it('a solution-wide tag filter examines at most REEF_READ_MAX_SCAN readings per page; next_page resumes where it stopped', async () => {
      let url: string | null = `${server.url}/api/solutions/sandbox/observations?from=${iso(T0)}&to=${iso(T0 + 10_000 * 60_000)}&tags=door&limit=100`;
      const found: string[] = [];
      const cursors: string[] = [];
      while (url && cursors.length < 20) {
        const r: Response = await fetch(url, { headers: { authorization: token } });
        assert.equal(r.status, 200);
        const body = (await r.json()) as { deviceId: string; observations: { timestamp: string }[] }[];
        for (const g of body) found.push(...g.observations.map((o) => `${g.deviceId}@${o.timestamp}`));
        url = r.headers.get('next_page');
        if (url) cursors.push(new URL(url).searchParams.get('after') ?? '');
      }
      assert.deepEqual(found, [`${device}@${iso(T0 + 4900 * 60_000)}`, `${device}@${iso(T0 + 500 * 60_000)}`]);
      // 5,000 readings at 1,000 examined per page: five pages, each cursor where the last one stopped.
      assert.deepEqual(
        cursors.map((c) => c.split('~')[0]),
        [4000, 3000, 2000, 1000].map((i) => iso(T0 + i * 60_000)),
      );
    });

    it('more buckets than REEF_READ_MAX_BUCKETS is 400 naming the limit; at the limit it is answered', async () => {
      const from = iso(T0);
      const over = await server.request('GET', `/api/solutions/sandbox/devices/${device}/observations?from=${from}&to=${iso(T0 + 501 * 60_000)}&bucket=1m`, { token });
      assert.equal(over.status, 400);
      const body = (await over.json()) as { code: string; field: string; message: string; statusCode: number };
      assert.equal(body.code, 'VALIDATION_FAILED');
      assert.equal(body.field, 'bucket');
      assert.match(body.message, /at most 500 buckets/);
      const at = await server.request('GET', `/api/solutions/sandbox/devices/${device}/observations?from=${from}&to=${iso(T0 + 500 * 60_000)}&bucket=1m`, { token });
      assert.equal(at.status, 200);
      assert.equal(((await at.json()) as { buckets: unknown[] }).buckets.length, 500);
    });
  });
}
