// The demo kit as a part of `reef serve`: on the first start with a demo account it provisions one
// simulated kit (MAC derived from the demo tenant) to that account; on every start it runs that kit
// in process, announcing to this node's gateway, so a new user reaches a kit through the gateway at
// once (docs/coap.md "Try it"). It is its own component so that the gateway knows nothing of the
// software kit (src/device) and the kit nothing of the platform: only this wiring knows both.
import { createHash } from 'node:crypto';
import type { Component, ComponentFactory, DemoCredentials, Services } from '../app/contracts.ts';
import { ReefError } from '../core/errors.ts';
import type { GatewayComponent } from '../gateway/component.ts';
import { proxyUri } from '../gateway/gateway.ts';
import { provisionKit } from '../service/devices.ts';
import { issueKitKey, kitKey } from '../service/kit-keys.ts';

export interface DemoKitComponent extends Component {
  /** The demo kit's MAC once it runs. */
  demoMac: string | null;
}

export type DemoKitFactory = ComponentFactory & { last?: DemoKitComponent };

const DEMO_STATE = 'gateway/demo-kit';

/** The demo kit's MAC: stable per demo tenant, in a range real kits do not use (first byte 0xde). */
export function demoKitMac(tenantId: string): string {
  return 'de' + createHash('sha256').update(tenantId).digest('hex').slice(0, 14);
}

/**
 * The demo kit of `reef serve` (src/cli/serve.ts COMPONENTS). `gateway` gives the gateway component
 * it announces to (started before this one, stopped after it); no gateway or no demo account → none.
 */
export function demoKitComponent(gateway: () => GatewayComponent | null | undefined, opts: { periodMs?: number } = {}): DemoKitFactory {
  const factory: DemoKitFactory = async (s: Services, demo: DemoCredentials | null) => {
    if (!demo || !s.config.gateway.enabled) return null;
    const periodMs = opts.periodMs ?? 15_000;
    let kit: { stop(): Promise<void> } | null = null;
    const c: DemoKitComponent = {
      name: 'demo kit',
      demoMac: null,
      banner() {
        const gw = gateway();
        if (!c.demoMac || !gw) return [];
        const a = gw.address();
        const uri = `coap://${a.address === '0.0.0.0' ? '127.0.0.1' : a.address}:${a.port}`;
        return [
          `  Demo dev kit ${c.demoMac} (in sandbox; like a real kit it answers only through this gateway); with TOKEN set to an access token of the demo account:`,
          `    coap-client-notls -p 50000 -m post -e "$TOKEN" ${uri}/sessions`,
          `    coap-client-notls -p 50000 -P ${uri} "${proxyUri(c.demoMac, s.config.gateway.meshDomain, '/snsr/arduino/temp?sens')}"`,
        ];
      },
      async start() {
        const gw = gateway();
        if (!gw) return;
        try {
          kit = await startDemoKit(s, demo, gw.address(), periodMs, (mac) => (c.demoMac = mac));
        } catch (e) {
          s.log.warn({ err: e }, 'the demo kit could not be started');
        }
      },
      async stop() {
        await kit?.stop().catch(() => undefined);
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
  // The software kit lives in src/device (it knows nothing of the platform); loaded only when used.
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
