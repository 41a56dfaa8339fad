// Cross-tenant probes over HTTP: another account's requests at every route of the API,
// enumerated from the OpenAPI document (so a route added later is probed too), with the victim's
// solution names, device ids, simulation ids and kit MAC, in several spellings. Nothing of the
// victim's may come back and nothing of the victim's may change; no probe may cause a 5xx.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { gatewayComponent } from '../../../src/gateway/component.ts';
import { createSimulationComponent } from '../../../src/sim/component.ts';
import { provisionKit } from '../../../src/service/devices.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { assertClean, tally } from './tally.ts';

const MARK = 31337.125;
const MAC = '00000000000055e1';

interface Victim {
  tenantId: string;
  token: string;
  deviceIds: string[];
  simId: string;
  secrets: string[];
}

describe('cross-tenant probes over HTTP', () => {
  let s: TestServer;
  let victim: Victim;
  let intruder: { token: string; tenantId: string };
  let snapshot: string;

  /** Everything of the victim's that a probe could change, as one string. */
  async function state(): Promise<string> {
    const parts: unknown[] = [];
    for (const sol of ['sandbox', 'StudioSimulation', 'victimLab']) {
      const list = await s.request('GET', `/api/solutions/${sol}/devices`, { token: victim.token });
      parts.push(sol, list.status, ((await list.json()) as { id: string }[] | { devices?: unknown }) ?? null);
      const ret = await s.request('GET', `/api/solutions/${sol}/retention`, { token: victim.token });
      parts.push(ret.status, await ret.text());
    }
    for (const id of victim.deviceIds) {
      for (const sol of ['victimLab', 'StudioSimulation', 'sandbox']) {
        const r = await s.request('GET', `/api/solutions/${sol}/devices/${id}/observations?limit=1000`, { token: victim.token });
        if (r.status === 200) parts.push(id, await r.text());
      }
    }
    const sims = await s.request('GET', `/api/solutions/StudioSimulation/simulations/${victim.simId}`, { token: victim.token });
    const sim = (await sims.json()) as { state?: string; stoppedAt?: unknown };
    parts.push(sims.status, sim.state, sim.stoppedAt ?? null);
    return JSON.stringify(parts);
  }

  before(async () => {
    s = await startTestServer({ gateway: { enabled: true, port: 0 } }, [createSimulationComponent(), gatewayComponent()]);
    const v = await s.login('victim');
    const mk = async (sol: string) => {
      const r = await s.request('POST', `/api/solutions/${sol}/devices`, { token: v.token, body: { deviceType: 'VirtualDevice', domainInfo: { location: { latitude: 1, longitude: 2 } } } });
      return ((await r.json()) as { id: string }).id;
    };
    const lab = await mk('victimLab');
    const studio = await mk('StudioSimulation');
    const account = (await s.services.store.getAccountByTenantId(v.tenantId))!;
    const kit = (await provisionKit(s.services.store, null, account, MAC)).device.id;
    for (const id of [lab, studio]) {
      const sol = id === lab ? 'victimLab' : 'StudioSimulation';
      await s.request('POST', `/api/solutions/${sol}/devices/${id}/observations`, {
        token: v.token,
        body: { observations: [{ timestamp: '2026-01-01T00:00:00Z', temperature: MARK, secretNote: 'victim-eyes-only' }] },
      });
    }
    await s.request('PUT', '/api/solutions/victimLab/retention', { token: v.token, body: { days: 30 } });
    const sim = await s.request('POST', '/api/solutions/StudioSimulation/simulations', { token: v.token, body: { devices: 1, interval: '1h', name: 'victim-sim' } });
    const simId = ((await sim.json()) as { id: string }).id;
    victim = { tenantId: v.tenantId, token: v.token, deviceIds: [lab, studio, kit], simId, secrets: [lab, studio, kit, simId, String(MARK), 'victim-eyes-only', 'victim-sim', MAC] };
    const i = await s.login('intruder');
    intruder = { token: i.token, tenantId: i.tenantId };
    snapshot = await state();
  });
  after(() => s.close());

  it("every route, every method, the victim's names and ids: no leak, no change, no 5xx", async () => {
    const probe = tally('cross-tenant HTTP');
    const doc = s.app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const paths = Object.entries(doc.paths).filter(([p]) => p.startsWith('/api/solutions/'));
    assert.ok(paths.length >= 8, 'the API is enumerated');
    const spell = (id: string) => [id, id.toUpperCase(), encodeURIComponent(id), `${id}/`, `..%2F${id}`];
    const bodies: Record<string, unknown> = {
      devices: { deviceType: 'VirtualDevice' },
      observations: { observations: [{ timestamp: '2026-01-02T00:00:00Z', temperature: -40 }] },
      retention: { days: 1 },
      simulations: { devices: 1, interval: '1h' },
      stop: {},
      coap: { payload: 'F' },
    };
    for (const [template, methods] of paths) {
      for (const method of Object.keys(methods).map((m) => m.toUpperCase())) {
        for (const solution of ['victimLab', 'sandbox', 'StudioSimulation']) {
          const ids = template.includes('/simulations/{id}') ? spell(victim.simId) : victim.deviceIds.flatMap(spell);
          for (const id of template.includes('{id}') ? ids : ['-']) {
            const url = template.replace('{solution}', solution).replace('{id}', id).replace('{*}', 'snsr/arduino/temp');
            const last = template
              .split('/')
              .filter((x) => !x.startsWith('{'))
              .pop()!;
            const body = method === 'POST' || method === 'PUT' ? (bodies[last] ?? {}) : undefined;
            const r = await s.request(method, url, { token: intruder.token, ...(body === undefined ? {} : { body }) });
            const text = method === 'GET' && /events$/.test(url) ? '' : await r.text();
            // An id the probe itself sent may be echoed in the error message; anything else is a leak.
            const sent = decodeURIComponent(url).toLowerCase();
            const leaked = victim.secrets.find((x) => text.toLowerCase().includes(x.toLowerCase()) && !sent.includes(x.toLowerCase()));
            if (leaked) probe.record('leak', `${method} ${url} → ${r.status} shows ${leaked}`);
            else if (r.status >= 500) probe.record('5xx', `${method} ${url} → ${r.status} ${text.slice(0, 200)}`);
            else if (template.includes('{id}') && r.status < 400) probe.record('wrong', `${method} ${url} → ${r.status}`);
            else probe.record('correct');
            if (/events$/.test(url)) await r.body?.cancel();
          }
        }
      }
    }
    assert.equal(await state(), snapshot, "nothing of the victim's changed");
    // The intruder's own solution listing does not include the victim's devices either.
    const mine = await (await s.request('GET', '/api/solutions/sandbox/observations', { token: intruder.token })).text();
    assert.ok(!victim.secrets.some((x) => mine.includes(x)));
    assertClean(probe);
    assert.ok(probe.tried > 200, `${probe.tried} probes`);
  });
});
