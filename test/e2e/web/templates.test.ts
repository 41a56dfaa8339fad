// Device templates in the browser app (docs/api.md "Device templates"): the fields a
// device's template names are offered to plot before any reading carries them, with the units the
// template states; a template no device names adds nothing, and another solution's never shows.
// An alarm rule per template draws its threshold on the plot of a device naming that template.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { createAlarmComponent } from '../../../src/alarms/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { connect, createDevice, launchBrowser, newPage, series, startWebServer, upload, waitAttr } from './harness.ts';

const SOL = 'Greenhouse';

describe('web app: device templates name the fields to plot', () => {
  let server: TestServer;
  let browser: Browser;
  let creds: { clientId: string; clientSecret: string; token: string };
  let device: string;

  async function template(solution: string, name: string, sensors: unknown[]): Promise<string> {
    const r = await server.request('POST', `/api/solutions/${solution}/devicetemplates`, { token: creds.token, body: { deviceTemplate: { name, sensors } } });
    assert.equal(r.status, 201, await r.clone().text());
    return ((await r.json()) as { deviceTemplates: { id: string } }).deviceTemplates.id;
  }

  before(async () => {
    server = await startWebServer({}, [createAlarmComponent({ silenceCheckMs: 0 })]);
    browser = await launchBrowser();
    creds = await server.login('templates');
    const climate = await template(SOL, 'Climate', [
      'temperature',
      { name: 'co2level', type: 'number', unit: 'ppm' },
      { name: 'tilt', type: 'vector', fields: ['x', 'y'], unit: 'deg' },
      { name: 'firmware', type: 'string' },
    ]);
    const unused = await template(SOL, 'Unused', [{ name: 'pressure2', type: 'number', unit: 'hPa' }]);
    const other = await template('Elsewhere', 'Other', [{ name: 'soilMoisture', type: 'number', unit: '%' }]);
    device = await createDevice(server, creds.token, SOL, { deviceType: 'Thermo', domainInfo: { templateId: climate } });
    await createDevice(server, creds.token, 'Elsewhere', { deviceType: 'Probe', domainInfo: { templateId: other } });
    // Rules per template: the device's template draws its line, the unused template's does not.
    for (const [templateId, threshold] of [
      [climate, 30],
      [unused, 40],
    ] as const) {
      const r = await server.request('POST', `/api/solutions/${SOL}/alarm-rules`, { token: creds.token, body: { templateId, condition: 'above', threshold } });
      assert.equal(r.status, 201, await r.clone().text());
    }
    // Readings carry temperature only: co2level and tilt come from the template alone.
    await upload(server, creds.token, SOL, device, series(Date.now() - 3600_000, Date.now() - 1000, 60));
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  test('the template’s numeric sensors are offered with their units, its alarm rules drawn; text sensors, unused and other solutions’ templates are not', async () => {
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, creds, SOL);
    await page.waitForSelector('#field option[value="co2level"]', { state: 'attached', timeout: 20_000 });
    const options = await page.locator('#field option').evaluateAll((os) => os.map((o) => [(o as HTMLOptionElement).value, o.textContent]));
    assert.deepEqual(options, [
      ['temperature', 'temperature (°C)'],
      ['co2level', 'co2level (ppm)'],
      ['tilt.x', 'tilt.x (deg)'],
      ['tilt.y', 'tilt.y (deg)'],
    ]);
    // The plotted device names Climate: its rule's threshold is drawn, Unused's is not.
    await waitAttr(page, '#plot-info', 'data-devices', device);
    await page.waitForFunction(() => document.querySelector('#plot')?.getAttribute('data-thresholds') === '30.00', undefined, { timeout: 20_000 });
    // Chosen, it plots (no readings carry it yet: an empty plot, not an error).
    await page.getByLabel('Field').selectOption('co2level');
    await waitAttr(page, '#plot-info', 'data-field', 'co2level');
    await waitAttr(page, '#plot-info', 'data-state', 'ready');
    assert.deepEqual(errors, []);
    await close();
  });
});
