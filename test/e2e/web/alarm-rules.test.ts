// Alarms a person cannot miss, and every rule kind from the app, in Debian's Chromium against a
// real service with the alarms component: the active count in the header and the tab's title (on a
// desktop and a phone), a rule on a field other than temperature (outside a range), a rate-of-change
// rule and a silence rule made with the form, each saved as the API stores it, the outcome said
// beside the form.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { createAlarmComponent, type AlarmParts } from '../../../src/alarms/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, shot, startWebServer, upload, waitText } from './harness.ts';

interface Rule {
  deviceId: string | null;
  field: string;
  condition: string;
  low?: number;
  high?: number;
  ratePerMinute?: number;
  direction?: string;
  silenceMs?: number;
  durationMs: number;
}

describe('web app: alarm count and every rule kind', () => {
  let server: TestServer;
  let browser: Browser;
  let parts: AlarmParts;
  let creds: { clientId: string; clientSecret: string };
  let token: string;
  let dev: string;

  before(async () => {
    server = await startWebServer({}, [createAlarmComponent({ silenceCheckMs: 0, onReady: (p) => (parts = p) })]);
    browser = await launchBrowser();
    const c = await server.account('rules');
    creds = c;
    token = await server.token(c);
    dev = await createDevice(server, token, 'sandbox', { deviceType: 'Fridge', domainInfo: { name: 'Cold room' } });
    const now = Date.now();
    await upload(
      server,
      token,
      'sandbox',
      dev,
      Array.from({ length: 20 }, (_, i) => ({ timestamp: new Date(now - (20 - i) * 60_000).toISOString(), temperature: 4 + (i % 3), humidity: 60 + i })),
    );
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  const rules = async (): Promise<Rule[]> => ((await (await server.request('GET', '/api/solutions/sandbox/alarm-rules', { token })).json()) as { rules: Rule[] }).rules;

  async function form(page: Page): Promise<void> {
    await page.locator('#alarm-field').scrollIntoViewIfNeeded();
  }

  test('rules of every kind from the form: outside a range on humidity, rate of change, silence; saved as asked, said beside the form', async () => {
    const { page, errors, close } = await newPage(browser, { width: 1440, height: 900 });
    await connect(page, server.url, creds, 'sandbox');
    await waitText(page, '#status', /Connected to/);
    await page.waitForSelector('#alarm-field option[value="humidity"]', { state: 'attached' });
    await form(page);
    // Outside 40–70 % humidity for 5 minutes.
    await page.locator('#alarm-field').selectOption('humidity');
    await page.locator('#alarm-condition').selectOption('outside');
    assert.equal(await page.locator('#alarm-threshold').isVisible(), false, 'only the inputs of the chosen kind show');
    await page.getByLabel('Low', { exact: true }).fill('40');
    await page.getByLabel('High', { exact: true }).fill('70');
    await page.getByLabel('Lasting (min)').fill('5');
    await page.getByRole('button', { name: 'Set alarm' }).click();
    await waitText(page, '#alarm-status', /Alarm saved\./);
    const box = await page.locator('#alarm-status').boundingBox();
    const btn = await page.locator('#alarms-panel button[type=submit]').boundingBox();
    assert.ok(box && btn && Math.abs(box.y - btn.y) < 120, 'the outcome is beside the form');
    let saved = (await rules()).find((r) => r.field === 'humidity');
    assert.deepEqual(saved && [saved.deviceId, saved.condition, saved.low, saved.high, saved.durationMs], [dev, 'outside', 40, 70, 300_000]);
    await shot(page, 'alarm-rule-outside');

    // A low end above the high end is refused beside the form, nothing stored.
    await page.locator('#alarm-field').selectOption('temperature');
    await page.locator('#alarm-condition').selectOption('outside');
    await page.getByLabel('Low in °C').fill('9');
    await page.getByLabel('High in °C').fill('3');
    await page.getByRole('button', { name: 'Set alarm' }).click();
    await waitText(page, '#alarm-status', /low end must be below the high end/);
    assert.equal((await rules()).filter((r) => r.field === 'temperature').length, 0);

    // Rate of change on temperature: rising faster than 2 °C a minute.
    await page.locator('#alarm-condition').selectOption('rate');
    await page.getByLabel('Change per minute in °C').fill('2');
    await page.getByLabel('Direction').selectOption('rise');
    await page.getByRole('button', { name: 'Set alarm' }).click();
    await waitText(page, '#alarm-status', /Alarm saved\./);
    saved = (await rules()).find((r) => r.field === 'temperature');
    assert.deepEqual(saved && [saved.condition, saved.ratePerMinute, saved.direction], ['rate', 2, 'rise']);

    // The same device's temperature rule becomes a silence rule: 30 minutes without readings.
    await page.locator('#alarm-condition').selectOption('silence');
    await page.getByLabel('Minutes without readings').fill('30');
    await page.getByRole('button', { name: 'Update alarm' }).click();
    await waitText(page, '#alarm-status', /Alarm saved\./);
    saved = (await rules()).find((r) => r.field === 'temperature');
    assert.deepEqual(saved && [saved.condition, saved.silenceMs], ['silence', 1_800_000]);
    assert.deepEqual(errors, []);
    await close();
  });

  for (const size of [
    { name: 'desktop', width: 1440, height: 900 },
    { name: 'phone', width: 390, height: 844 },
  ]) {
    test(`${size.name}: active alarms are counted in the header and the tab's title, following the live stream`, async () => {
      const { page, errors, close } = await newPage(browser, { width: size.width, height: size.height });
      await connect(page, server.url, creds, 'sandbox');
      await waitText(page, '#status', /Connected to/);
      // A rule that the next reading breaks.
      const r = await server.request('POST', '/api/solutions/sandbox/alarm-rules', {
        token,
        body: { condition: 'above', threshold: 50, field: 'humidity', deviceId: dev, name: `humid ${size.name}` },
      });
      assert.equal(r.status, 201);
      await upload(server, token, 'sandbox', dev, [{ timestamp: new Date().toISOString(), temperature: 5, humidity: 90 }]);
      await parts.engine.flush();
      await waitText(page, '#alarm-count', /^[1-9]\d* active alarms?$/);
      assert.equal(await page.locator('#alarm-count').isVisible(), true);
      const n = Number((await page.textContent('#alarm-count'))!.split(' ')[0]);
      assert.ok(n >= 1);
      assert.equal(await page.title(), `(${n}) Reef — devices and observations`);
      const header = await page.locator('#alarm-count').boundingBox();
      assert.ok(header && header.y < size.height, 'the count is in the first view');
      await shot(page, `alarm-count-${size.name}`);
      // The rule goes, so the next size raises its own.
      await server.request('DELETE', `/api/solutions/sandbox/alarm-rules/${((await r.json()) as { id: string }).id}`, { token });
      assert.deepEqual(errors, []);
      await close();
    });
  }
});
