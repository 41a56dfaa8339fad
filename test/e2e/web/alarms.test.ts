// The alarms panel and plot thresholds in Chromium: a raised alarm listed first with a one-click
// acknowledge, the badge in the device table, the threshold drawn on the plot and the alarm marked
// on its time axis, a threshold typed in the form and one dragged on the plot, both saved.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { createAlarmComponent, type AlarmParts } from '../../../src/alarms/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, shot, startWebServer, upload } from './harness.ts';

describe('web app: alarms', () => {
  let server: TestServer;
  let browser: Browser;
  let parts: AlarmParts;

  before(async () => {
    server = await startWebServer({}, [createAlarmComponent({ silenceCheckMs: 0, onReady: (p) => (parts = p) })]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('active alarms first, acknowledged with one click; badge, threshold line and alarm mark; typed and dragged thresholds are saved', async () => {
    const c = await server.account('watch');
    const token = await server.token(c);
    const dev = await createDevice(server, token, 'sandbox', { deviceType: 'Fridge', domainInfo: {} });
    const quiet = await createDevice(server, token, 'sandbox', { deviceType: 'Fridge', domainInfo: {} });
    const rule = await server.request('POST', '/api/solutions/sandbox/alarm-rules', { token, body: { condition: 'above', threshold: 8, hysteresis: 1, deviceId: dev, name: 'cold room warm' } });
    assert.equal(rule.status, 201);
    const ruleId = ((await rule.json()) as { id: string }).id;
    const now = Date.now();
    const minute = (m: number) => new Date(now - (30 - m) * 60_000).toISOString();
    // Raised, cleared (an older, cleared alarm), raised again: one active and one cleared.
    await upload(server, token, 'sandbox', dev, [
      { timestamp: minute(0), temperature: 5 },
      { timestamp: minute(5), temperature: 9 },
      { timestamp: minute(10), temperature: 4 },
    ]);
    await upload(server, token, 'sandbox', dev, [{ timestamp: minute(20), temperature: 10 }]);
    await upload(server, token, 'sandbox', quiet, [{ timestamp: minute(20), temperature: 3 }]);
    await parts.engine.flush();

    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, c, 'sandbox');
    const panel = page.locator('#alarms-panel');
    await panel.locator('li.alarm').nth(1).waitFor();
    const statuses = await panel.locator('li.alarm').evaluateAll((els) => els.map((e) => e.getAttribute('data-status')));
    assert.deepEqual(statuses, ['raised', 'cleared-unacknowledged'], 'active first');
    assert.match((await panel.locator('h2').textContent()) ?? '', /1 active/);
    // Badge on the device's row only.
    const badge = (id: string) => page.locator(`#devices tr[data-id="${id}"] .alarm-badge`);
    await page.waitForFunction((id) => !(document.querySelector(`#devices tr[data-id="${id}"] .alarm-badge`) as HTMLElement | null)?.hidden, dev);
    assert.equal(await badge(dev).textContent(), '1 alarm');
    assert.equal(await badge(quiet).isHidden(), true);
    // And on its tile among the latest readings.
    assert.equal(await page.locator(`#latest li[data-id="${dev}"] .alarm-badge`).textContent(), '1 alarm');
    assert.equal(await page.locator(`#latest li[data-id="${quiet}"] .alarm-badge`).count(), 0);

    // The device with the newest reading is plotted: its threshold line and both alarms are drawn.
    await page.locator(`#devices tr[data-id="${dev}"]`).click();
    await page.waitForFunction(() => document.querySelector('#plot')?.getAttribute('data-thresholds') === '8.00');
    await page.waitForFunction(() => document.querySelector('#plot')?.getAttribute('data-alarm-marks') === '2');
    await shot(page, 'alarms-raised');

    // One click acknowledges; the service records who.
    await panel
      .getByRole('button', { name: /^Acknowledge cold room warm/ })
      .first()
      .click();
    await page.waitForFunction(() => document.querySelector('#alarms-panel li.alarm')?.getAttribute('data-status') === 'acknowledged');
    const listed = (await (await server.request('GET', '/api/solutions/sandbox/alarms?status=active', { token })).json()) as { alarms: { status: string; acknowledgedBy: { name: string } }[] };
    assert.deepEqual(
      listed.alarms.map((a) => [a.status, a.acknowledgedBy.name]),
      [['acknowledged', 'watch']],
    );

    // Typing a threshold updates the rule; the line moves. An alarm event while it is being typed
    // (here the alarm clears: a reading below the threshold less its hysteresis) reloads the list
    // and leaves the typed value alone.
    await page.getByLabel('Threshold in °C').fill('12');
    await upload(server, token, 'sandbox', dev, [{ timestamp: minute(25), temperature: 5 }]);
    await parts.engine.flush();
    await page.waitForFunction(() => document.querySelector('#alarms-panel li.alarm')?.getAttribute('data-status') === 'cleared');
    assert.equal(await page.getByLabel('Threshold in °C').inputValue(), '12');
    await page.getByRole('button', { name: 'Update alarm' }).click();
    await page
      .waitForFunction(() => document.querySelector('#plot')?.getAttribute('data-thresholds') === '12.00')
      .catch(async (e) => {
        throw new Error(
          `${e}: message ${await page.locator('#message').textContent()}, thresholds ${await page.locator('#plot').getAttribute('data-thresholds')}, rules ${await (await server.request('GET', '/api/solutions/sandbox/alarm-rules', { token })).text()}, selected ${await page.locator('#devices tr[aria-selected=true]').evaluateAll((els) => els.map((e) => e.getAttribute('data-id')))}, form ${await page.locator('#alarms-panel form').textContent()}`,
        );
      });
    const typed = (await (await server.request('GET', `/api/solutions/sandbox/alarm-rules/${ruleId}`, { token })).json()) as { threshold: number; name: string };
    assert.deepEqual([typed.threshold, typed.name], [12, 'cold room warm']);

    // Dragging the line down saves a lower threshold.
    // The form is below the plot: the plot is scrolled back into view to drag on it.
    await page.locator('#plot').scrollIntoViewIfNeeded();
    // The plot may be rebuilt at any moment (a live point, the new threshold), so its box and the
    // line's position are read together, in one step in the page, once both are laid out.
    const { box, y12 } = (await (
      await page.waitForFunction(() => {
        const over = document.querySelector('#plot .u-over');
        const y = document.querySelector('#plot')?.getAttribute('data-threshold-y');
        if (!over || !y) return null;
        const r = over.getBoundingClientRect();
        return r.height > 0 ? { box: { x: r.x, y: r.y, width: r.width, height: r.height }, y12: Number(y) } : null;
      })
    ).jsonValue())!;
    assert.ok(y12 > 0 && y12 < box.height, `the 12 °C line is inside the plot (at ${y12} px)`);
    await page.mouse.move(box.x + box.width / 2, box.y + y12);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width / 2, box.y + y12 + 40, { steps: 5 });
    await page.mouse.up();
    // Said beside the form, not at the top of the page.
    await page.waitForFunction(() => /Threshold set to/.test(document.querySelector('#alarm-status')?.textContent ?? ''));
    const dragged = (await (await server.request('GET', `/api/solutions/sandbox/alarm-rules/${ruleId}`, { token })).json()) as { threshold: number };
    assert.ok(dragged.threshold < 12, `dragged down from 12, now ${dragged.threshold}`);
    await shot(page, 'alarms-dragged');
    assert.deepEqual(errors, []);
    await close();
  });

  test('map markers carry the active-alarm badge; it goes when the alarm clears', async () => {
    const c = await server.account('map');
    const token = await server.token(c);
    const warm = await createDevice(server, token, 'sandbox', { deviceType: 'Fridge', domainInfo: { location: { latitude: 59.91, longitude: 10.75 } } });
    const fine = await createDevice(server, token, 'sandbox', { deviceType: 'Fridge', domainInfo: { location: { latitude: -33.87, longitude: 151.21 } } });
    const rule = await server.request('POST', '/api/solutions/sandbox/alarm-rules', { token, body: { condition: 'above', threshold: 8, deviceId: warm } });
    assert.equal(rule.status, 201);
    const ts = new Date(Date.now() - 60_000).toISOString();
    await upload(server, token, 'sandbox', warm, [{ timestamp: ts, temperature: 11 }]);
    await upload(server, token, 'sandbox', fine, [{ timestamp: ts, temperature: 3 }]);
    await parts.engine.flush();

    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, c, 'sandbox');
    await page.waitForFunction(() => document.querySelectorAll('#map svg circle.dot').length === 2);
    const mark = (id: string) => page.locator(`#map g.alarm-mark[data-ids="${id}"]`);
    await mark(warm).waitFor();
    assert.equal(await mark(warm).locator('text').textContent(), '1');
    assert.equal(await mark(fine).count(), 0, 'no badge on a device without alarms');
    assert.match((await page.locator(`#map circle.dot[data-id="${warm}"] title`).textContent()) ?? '', /; 1 active alarm$/);
    await shot(page, 'alarms-map-badge');

    // Cleared by hand: the live stream takes the badge off the marker.
    const [alarm] = ((await (await server.request('GET', '/api/solutions/sandbox/alarms?status=active', { token })).json()) as { alarms: { id: string }[] }).alarms;
    assert.equal((await server.request('POST', `/api/solutions/sandbox/alarms/${alarm!.id}/clear`, { token })).status, 200);
    await page.waitForFunction((id) => !document.querySelector(`#map g.alarm-mark[data-ids="${id}"]`), warm);
    assert.doesNotMatch((await page.locator(`#map circle.dot[data-id="${warm}"] title`).textContent()) ?? '', /alarm/);
    assert.deepEqual(errors, []);
    await close();
  });
});
