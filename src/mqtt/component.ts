// The MQTT broker as a part of `reef serve`: listens beside HTTP, takes kit payloads from the event
// bus (the gateway of any node puts them there) and prints how to connect. Wired by the composition
// root (src/cli/serve.ts COMPONENTS); the gateway never sees this module.
import type { KitPayloadEvent } from '../events/bus.ts';
import { MqttBroker, type BrokerOptions, type Listening } from './broker.ts';
import type { MqttDemo, MqttServices, ServeComponent } from './contracts.ts';
import { mqttRoutes } from './routes.ts';
import { mqttTlsMaterial } from './tls.ts';
import { watchMqtt } from '../metrics/metrics.ts';

export interface MqttComponent extends ServeComponent {
  broker: MqttBroker;
}

export type MqttFactory = ((s: MqttServices, demo: MqttDemo | null) => Promise<MqttComponent | null>) & { last?: MqttComponent };

/** `extra` overrides broker options (tests: a short re-check period, a small payload limit...). */
export function mqttComponent(extra: Partial<BrokerOptions> = {}): MqttFactory {
  const factory: MqttFactory = async (s, demo) => {
    const m = s.config.mqtt;
    if (!m.enabled) return null;
    const log = s.log.child({ component: 'mqtt' });
    const broker = new MqttBroker(
      { store: s.store, events: s.events, auth: s.auth, quotas: s.quotas, log },
      {
        host: m.host,
        port: m.port,
        portFallback: m.portFallback,
        tlsPort: m.tlsPort,
        tlsPortFallback: m.tlsPortFallback,
        tls: mqttTlsMaterial(s.config),
        retain: m.retain,
        recheckMs: m.recheckSeconds * 1000,
        maxPayloadBytes: s.config.http.bodyLimitBytes,
        maxObservations: s.config.maxObservationsPerRequest,
        maxObservationExtraBytes: s.config.maxObservationExtraBytes,
        limits: m.limits,
        ...extra,
      },
    );
    let off: (() => void) | undefined;
    let unwatch: (() => void) | undefined;
    const c: MqttComponent = {
      name: 'mqtt',
      broker,
      apiPlugin: mqttRoutes(() => ({ plain: broker.address(), tls: broker.tlsAddress() }), s.config.http),
      async start() {
        await broker.start();
        unwatch = watchMqtt({ connections: () => broker.gate.open, accepted: () => broker.stats.connects, refused: () => broker.stats.connectsRefused });
        // Alarm events come from the node that evaluates (the leader) over the bus, so every node's
        // broker publishes them; the topic names the device's owner, looked up once per device.
        const owners = new Map<string, string | null>();
        const owner = async (groupId: string, solution: string, deviceId: string): Promise<string | null> => {
          if (!owners.has(deviceId)) {
            if (owners.size > 100_000) owners.clear();
            owners.set(deviceId, (await s.store.getDevice(groupId, solution, deviceId))?.tenantId ?? null);
          }
          return owners.get(deviceId) ?? null;
        };
        off = s.events.subscribe(
          (e) => {
            if (e.kind === 'kit-payload') broker.publishKitPayload(e as KitPayloadEvent);
            else if (e.kind === 'alarm') {
              void owner(e.groupId, e.solution, e.deviceId).then(
                (tenantId) => tenantId && broker.publishAlarm(tenantId, e.deviceId, { event: e.event, alarm: e.alarm }),
                (err: unknown) => log.warn({ err }, 'mqtt could not find the owner of an alarm'),
              );
            }
          },
          ['kit-payload', 'alarm'],
        );
        const a = broker.address();
        if (a.wanted) log.warn(`MQTT port ${a.wanted} is taken (another broker?); listening on ${a.port} instead`);
        log.info({ tcp: `${a.host}:${a.port}`, tls: broker.tlsAddress()?.port }, 'MQTT broker listening');
      },
      async stop() {
        off?.();
        unwatch?.();
        await broker.stop();
      },
      banner() {
        const a = broker.address();
        const host = a.host === '0.0.0.0' || a.host === '::' ? '127.0.0.1' : a.host;
        const inUrl = host.includes(':') ? `[${host}]` : host;
        const lines = [`  MQTT broker: mqtt://${inUrl}:${a.port}${taken(a)}  (docs/mqtt.md)`];
        const t = broker.tlsAddress();
        if (t) lines.push(`  MQTT over TLS: mqtts://${inUrl}:${t.port}${taken(t)}`);
        if (demo) {
          lines.push('  Kit payloads of the demo account, with TOKEN set to its access token:');
          lines.push(`    mosquitto_sub -h ${host} -p ${a.port} -u notused -P "$TOKEN" -t '${demo.tenantId}/alert/+/+' -v`);
        }
        return lines;
      },
    };
    factory.last = c;
    return c;
  };
  return factory;
}

function taken(l: Listening): string {
  return l.wanted ? ` (port ${l.wanted} is taken, e.g. by another broker)` : '';
}
