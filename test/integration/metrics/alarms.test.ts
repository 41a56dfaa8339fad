// The alarm counters on /metrics (docs/operations.md "Metrics and logs"): batches evaluated against
// rules, and webhook attempts by outcome, on a receiver that fails once, then accepts.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { at, createRule, newDevice, receiver, startAlarmServer, upload, type AlarmServer } from '../../helpers/alarms.ts';
import { scrapeMetrics } from '../../helpers/metrics.ts';
import { waitFor } from '../../helpers/wait.ts';

const TOKEN = 'alarm-scrape-token-7d3b';
let s: AlarmServer;
before(async () => {
  s = await startAlarmServer({ metrics: { token: TOKEN, listen: null } }, { webhook: { maxAttempts: 3, baseDelayMs: 10_000, timeoutMs: 60_000 } });
});
after(() => s.close());

it('counts evaluated batches and webhook attempts: a retry, then a delivery', async () => {
  const rx = await receiver([500, 204]);
  try {
    const scrape = () => scrapeMetrics(`${s.url}/metrics`, TOKEN);
    const before = await scrape();
    const deliveries = async (outcome: string) => (await scrape()).value('reef_alarm_webhook_deliveries_total', { outcome }) - before.value('reef_alarm_webhook_deliveries_total', { outcome });
    const { token } = await s.login('alarm-metrics');
    const dev = await newDevice(s, token);
    await createRule(s, token, { condition: 'above', threshold: 8, deviceId: dev, webhook: { url: rx.url } });
    await upload(s, token, dev, [at(s, 0, 7)]);
    await upload(s, token, dev, [at(s, 1, 9)]);
    await s.settle();
    await waitFor('the failed attempt counted', async () => (await deliveries('retry')) === 1 || null);
    assert.equal((await scrape()).value('reef_alarm_evaluations_total') - before.value('reef_alarm_evaluations_total'), 2, 'both uploads were evaluated');
    s.clock.now += 10_000;
    await s.parts.sender.deliverDue();
    await waitFor('the delivery counted', async () => (await deliveries('delivered')) === 1 || null);
    assert.equal(await deliveries('retry'), 1);
    assert.equal(await deliveries('dead'), 0);
    assert.equal(rx.received.length, 2);
  } finally {
    await rx.close();
  }
});
