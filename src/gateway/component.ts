// The gateway as a part of `reef serve` (src/app/contracts.ts Component): the UDP gateway on
// config.gateway.port and the HTTP bridge as an authenticated API plugin. The demo kit that
// announces to it is a component of its own (src/demo/component.ts).
import { coapBridgeRoutes } from './routes.ts';
import type { Component, ComponentFactory, Services } from '../app/contracts.ts';
import { Gateway, type GatewayOptions } from './gateway.ts';
import { kitStatusRoutes } from './kit-status-routes.ts';
import type { KitPayloadSink } from './readings.ts';
import { watchGateway } from '../metrics/metrics.ts';

export interface GatewayComponent extends Component {
  gateway: Gateway;
  /** The bound UDP address of the gateway (tests use port 0). */
  address(): { address: string; port: number };
}

export type GatewayFactory = ComponentFactory & { last?: GatewayComponent };

/**
 * The factory `reef serve` uses (src/cli/serve.ts COMPONENTS). `over` overrides gateway options
 * (tests: static kits, a short deadline, readings off...).
 */
export function gatewayComponent(over: Partial<GatewayOptions> = {}): GatewayFactory {
  const factory: GatewayFactory = async (s: Services) => {
    const g = s.config.gateway;
    if (!g.enabled) return null;
    const log = s.log.child({ component: 'gateway' });
    // Raw kit payloads go on the event bus for the MQTT broker of every node (docs/mqtt.md); the
    // gateway only sees a sink. A node running without MQTT (REEF_MQTT=false) sends none.
    const events = s.events;
    const payloads: KitPayloadSink | null = s.config.mqtt.enabled
      ? (p) => events.publish({ kind: 'kit-payload', groupId: p.device.groupId, tenantId: p.device.tenantId, mac: p.mac, sensorType: p.sensorType, payload: p.payload.toString('base64') })
      : null;
    const gateway = new Gateway(
      { store: s.store, events: s.events, auth: s.auth, log, payloads, quota: s.quotas },
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
    let unwatch: (() => void) | undefined;
    const c: GatewayComponent = {
      name: 'gateway',
      gateway,
      apiPlugin: async (app) => {
        await app.register(coapBridgeRoutes({ gateway: () => gateway, store: s.store, auth: s.auth, deadlineMs: g.deadlineMs }));
        await app.register(kitStatusRoutes({ gateway: () => gateway, store: s.store }));
      },
      address: () => gateway.address(),
      banner() {
        const a = gateway.address();
        return [`  CoAP gateway: udp://${a.address}:${a.port}  (docs/coap.md)`];
      },
      async start() {
        await gateway.start();
        unwatch = watchGateway({ sessions: () => gateway.sessions.size, kits: () => gateway.kits.size, responseCodes: gateway.front.responseCodes });
        const a = gateway.address();
        log.info({ udp: `${a.address}:${a.port}` }, 'CoAP gateway listening');
      },
      async stop() {
        unwatch?.();
        await gateway.stop();
      },
    };
    factory.last = c;
    return c;
  };
  return factory;
}
