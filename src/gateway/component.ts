// The gateway as a part of `reef serve` (src/server.ts Component): the UDP gateway on
// config.gateway.port, the HTTP bridge as an authenticated API plugin, and the demo kit. On the first
// start with a demo account it provisions one simulated kit (MAC derived from the demo tenant) to
// that account; on every start it runs that kit in process, announcing to this gateway, so a new
// user reaches a kit through the gateway at once (docs/coap.md "Try it").
import { createHash } from 'node:crypto';
import { ReefError } from '../core/errors.ts';
import { coapBridgeRoutes } from '../http/routes/coap-bridge.ts';
import type { Component, ComponentFactory, DemoCredentials, Services } from '../server.ts';
import { provisionKit } from '../service/devices.ts';
import { issueKitKey, kitKey } from '../service/kit-keys.ts';
import { Gateway, proxyUri, type GatewayOptions } from './gateway.ts';
import type { KitPayloadSink } from './readings.ts';

export interface GatewayComponent extends Component {
  gateway: Gateway;
  /** The bound UDP address of the gateway (tests use port 0). */
  address(): { address: string; port: number };
  /** The demo kit's MAC when one runs. */
  demoMac: string | null;
}

export type GatewayFactory = ComponentFactory & { last?: GatewayComponent };

const DEMO_STATE = 'gateway/demo-kit';

/** The demo kit's MAC: stable per demo tenant, in a range real kits do not use (first byte 0xde). */
export function demoKitMac(tenantId: string): string {
  return 'de' + createHash('sha256').update(tenantId).digest('hex').slice(0, 14);
}

/**
 * The factory `reef serve` uses (src/cli/serve.ts COMPONENTS). `extra` overrides gateway options
 * (tests: static kits, a short deadline, readings off...); `demoKit: false` skips the demo kit.
 */
export function gatewayComponent(extra: Partial<GatewayOptions> & { demoKit?: boolean; demoPeriodMs?: number } = {}): GatewayFactory {
  const factory: GatewayFactory = async (s: Services, demo: DemoCredentials | null) => {
    const g = s.config.gateway;
    if (!g.enabled) return null;
    const log = s.log.child({ component: 'gateway' });
    const { demoKit = true, demoPeriodMs = 15_000, ...over } = extra;
    // Raw kit payloads go on the event bus for the MQTT broker of every node (docs/mqtt.md); the
    // gateway only sees a sink. A node running without MQTT (REEF_MQTT=false) sends none.
    const events = s.events;
    const payloads: KitPayloadSink | null = s.config.mqtt.enabled
      ? (p) => events.publish({ kind: 'kit-payload', groupId: p.device.groupId, tenantId: p.device.tenantId, mac: p.mac, sensorType: p.sensorType, payload: p.payload.toString('base64') })
      : null;
    const gateway = new Gateway(
      { store: s.store, events: s.events, auth: s.auth, log, payloads },
      {
        host: g.host,
        port: g.port,
        meshDomain: g.meshDomain,
        deadlineMs: g.deadlineMs,
        sessionTtlMs: g.sessionTtlSeconds * 1000,
        maxSessionsPerAccount: g.maxSessionsPerAccount,
        maxClockSkewMs: g.clockSkewSeconds * 1000,
        readings: g.readings,
        ...(g.kits.length ? { kits: g.kits } : {}),
        ...over,
      },
    );
    let kit: { stop(): Promise<void> } | null = null;
    const c: GatewayComponent = {
      name: 'gateway',
      gateway,
      demoMac: null,
      apiPlugin: coapBridgeRoutes({ gateway: () => gateway, store: s.store, auth: s.auth, deadlineMs: g.deadlineMs }),
      address: () => gateway.address(),
      banner() {
        const a = gateway.address();
        const lines = [`  CoAP gateway: udp://${a.address}:${a.port}  (docs/coap.md)`];
        if (c.demoMac) {
          const gw = `coap://${a.address === '0.0.0.0' ? '127.0.0.1' : a.address}:${a.port}`;
          lines.push(`  Demo dev kit ${c.demoMac} (in sandbox); with TOKEN set to an access token of the demo account:`);
          lines.push(`    coap-client-notls -p 50000 -m post -e "$TOKEN" ${gw}/sessions`);
          lines.push(`    coap-client-notls -p 50000 -P ${gw} "${proxyUri(c.demoMac, s.config.gateway.meshDomain, '/snsr/arduino/temp?sens')}"`);
        }
        return lines;
      },
      async start() {
        await gateway.start();
        const a = gateway.address();
        log.info({ udp: `${a.address}:${a.port}` }, 'CoAP gateway listening');
        if (demo && demoKit) {
          try {
            kit = await startDemoKit(s, demo, a, demoPeriodMs, (mac) => (c.demoMac = mac));
          } catch (e) {
            log.warn({ err: e }, 'the demo kit could not be started');
          }
        }
      },
      async stop() {
        await kit?.stop().catch(() => undefined);
        await gateway.stop();
      },
    };
    factory.last = c;
    return c;
  };
  return factory;
}

async function startDemoKit(s: Services, demo: DemoCredentials, gw: { address: string; port: number }, periodMs: number, onMac: (mac: string) => void) {
  let mac = await s.store.getState(DEMO_STATE);
  if (mac === null) {
    // First start: provision the demo kit to the demo account (once; a deleted demo kit stays deleted).
    const account = await s.store.getAccountByTenantId(demo.tenantId);
    if (!account) return null;
    mac = demoKitMac(demo.tenantId);
    try {
      await provisionKit(s.store, s.events, account, mac);
    } catch (e) {
      if (!(e instanceof ReefError && e.code === 'MAC_ALREADY_PROVISIONED')) throw e;
    }
    await s.store.setState(DEMO_STATE, mac);
  }
  const d = await s.store.getDeviceByMac(mac);
  if (!d || d.tenantId !== demo.tenantId) return null;
  // The demo kit runs in this process, so it takes its key straight from the store (issued at provisioning).
  const key = (await kitKey(s.store, mac)) ?? Buffer.from(await issueKitKey(s.store, mac), 'hex');
  // The software kit lives in src/device (it knows nothing of the platform); only wiring is here.
  const { Kit } = await import('../device/kit.ts');
  const { loadDeviceConfig } = await import('../device/config.ts');
  const address = gw.address === '0.0.0.0' || gw.address === '::' ? '127.0.0.1' : gw.address;
  const kit = new Kit(loadDeviceConfig({ mac, host: '127.0.0.1', port: 0, gateway: { address, port: gw.port }, monitorWindowMs: 0, logLevel: 0, periodMs, announceIntervalMs: 60_000 }), { key });
  await kit.start();
  onMac(mac);
  const uri = proxyUri(mac, s.config.gateway.meshDomain, '/snsr/arduino/temp?sens');
  s.log.info(
    { mac, deviceId: d.id },
    `demo kit ${mac} is running; through the gateway: coap-client-notls -p 50000 -m post -e "$TOKEN" coap://${address}:${gw.port}/sessions && coap-client-notls -p 50000 -P coap://${address}:${gw.port} "${uri}"`,
  );
  return kit;
}
