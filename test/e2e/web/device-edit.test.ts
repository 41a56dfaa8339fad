// The device panel in the browser app (docs/web.md, docs/api.md "Changing a device"): the selected
// device's location and template are changed in place and stored; the map and the fields a template
// offers follow; a bad change is said beside the Save button and nothing is stored.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, series, shot, startWebServer, upload, waitText } from './harness.ts';

const SOL = 'Orchard';

describe('web app: the device panel', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  let device: string;
  let template: string;

  before(async () => {
    server = await startWebServer();
    browser = await launchBrowser();
    creds = await server.login('device-edit');
    const r = await server.request('POST', `/api/solutions/${SOL}/devicetemplates`, {
      token: creds.token,
      body: { name: 'Soil probe', sensors: [{ name: 'soilMoisture', type: 'number', unit: '%' }] },
    });
    assert.equal(r.status, 201, await r.clone().text());
    template = ((await r.json()) as { deviceTemplates: { id: string } }).deviceTemplates.id;
    device = await createDevice(server, creds.token, SOL, { deviceType: 'Probe', domainInfo: { location: { latitude: 45.5, longitude: 7.25 }, row: 'A' } });
    await upload(server, creds.token, SOL, device, series(Date.now() - 3600_000, Date.now() - 1000, 300));
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  const stored = async () => ((await (await server.request('GET', `/api/solutions/${SOL}/devices/${device}`, { token: creds.token })).json()) as { domainInfo: Record<string, unknown> }).domainInfo;

  test('moves the device and gives it a template: stored, and the template’s field is offered; a bad latitude is said and changes nothing', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SOL);
    await page.locator(`#devices tr[data-id="${device}"]`).click();
    const panel = page.locator('#device-panel');
    await panel.waitFor();
    assert.equal(await panel.getByLabel('Latitude', { exact: true }).inputValue(), '45.5');
    assert.equal(await panel.getByLabel('Longitude', { exact: true }).inputValue(), '7.25');
    await page.waitForSelector(`#device-template option[value="${template}"]`, { state: 'attached' });
    assert.equal(await panel.getByLabel('Template', { exact: true }).inputValue(), '', 'no template yet');
    assert.equal(await page.locator('#field option[value="soilMoisture"]').count(), 0);

    await panel.getByLabel('Latitude', { exact: true }).fill('-33.9');
    await panel.getByLabel('Longitude', { exact: true }).fill('18.4');
    await panel.getByLabel('Template', { exact: true }).selectOption(template);
    await panel.getByRole('button', { name: 'Save device' }).click();
    await waitText(page, '#device-status', /Saved/);
    assert.deepEqual(await stored(), { location: { latitude: -33.9, longitude: 18.4 }, row: 'A', templateId: template }, 'other members kept');
    // The list reloads: the table shows the new location, the template's field is offered to plot.
    await waitText(page, `#devices tr[data-id="${device}"] .where`, /-33\.900, 18\.400/);
    await page.waitForSelector('#field option[value="soilMoisture"]', { state: 'attached', timeout: 20_000 });
    await shot(page, 'device-panel-saved');

    await panel.getByLabel('Latitude', { exact: true }).fill('95');
    await panel.getByRole('button', { name: 'Save device' }).click();
    const message = await waitText(page, '#device-error', /latitude/i);
    assert.match(message, /-90|90/);
    assert.equal((await stored()).location && ((await stored()).location as { latitude: number }).latitude, -33.9, 'nothing stored');

    // Emptied coordinates and "No template" remove both.
    await panel.getByLabel('Latitude', { exact: true }).fill('');
    await panel.getByLabel('Longitude', { exact: true }).fill('');
    await panel.getByLabel('Template', { exact: true }).selectOption('');
    await panel.getByRole('button', { name: 'Save device' }).click();
    await waitText(page, '#device-status', /Saved/);
    assert.deepEqual(await stored(), { row: 'A' });
    assert.deepEqual(errors, []);
    await close();
  });
});
