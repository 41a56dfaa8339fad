// The app shows how to connect over MQTT — the broker's address, the account's topics
// and a mosquitto_sub line — from GET /api/mqtt, and nothing when the service runs no broker; a
// service without the alarms component shows no alarms panel.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { testConfig } from '../../../src/config/config.ts';
import { mqttComponent, type MqttFactory } from '../../../src/mqtt/component.ts';
import type { TestServer } from '../../helpers/server.ts';
import { connect, ensureWebBuilt, launchBrowser, newPage, shot, startWebServer, waitText } from './harness.ts';

describe('web app: MQTT connection details', () => {
  let browser: Browser;
  let server: TestServer;
  let plain: TestServer;
  let factory: MqttFactory;
  before(async () => {
    ensureWebBuilt();
    factory = mqttComponent();
    server = await startWebServer({ mqtt: { ...testConfig({ dataDir: '/nonexistent' }).mqtt, port: 0, tlsPort: 0 } }, [factory]);
    plain = await startWebServer();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await plain?.close();
  });

  test('connected: the broker address, the kit-payload and alarm topics and a command to try', async () => {
    const c = await server.account('mqtt-app');
    const { page, errors, close } = await newPage(browser);
    await connect(page, server.url, c, 'sandbox');
    const port = factory.last!.broker.address().port;
    await page.locator('#mqtt-info summary').click();
    const text = await waitText(page, '#mqtt-info dl', new RegExp(`mqtt://127\\.0\\.0\\.1:${port}`));
    assert.match(text, new RegExp(`${c.tenantId}/alert/\\+/\\+`));
    assert.match(text, new RegExp(`${c.tenantId}/alarms/\\+`));
    assert.match(text, /mosquitto_sub -h 127\.0\.0\.1 -p \d+ -u notused -P "\$TOKEN"/);
    await shot(page, 'mqtt-info');
    assert.deepEqual(errors, []);
    await close();
  });

  test('a service without a broker shows no MQTT box, and without alarms no alarms panel (and no error about it)', async () => {
    const c = await plain.account('no-mqtt');
    const { page, close } = await newPage(browser);
    const answered = page.waitForResponse((r) => r.url().endsWith('/api/mqtt'));
    const alarms = page.waitForResponse((r) => r.url().includes('/alarm-rules'));
    await connect(page, plain.url, c, 'sandbox');
    assert.equal((await answered).status(), 404);
    assert.equal((await alarms).status(), 404);
    await page.locator('#status strong').waitFor();
    assert.equal(await page.locator('#mqtt-info').isHidden(), true);
    await page.locator('#alarms-panel').waitFor({ state: 'hidden' });
    assert.doesNotMatch((await page.textContent('#message')) ?? '', /endpoint/, 'no error about routes this service does not have');
    await close();
  });
});
