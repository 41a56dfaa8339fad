// The node's Prometheus metrics (docs/operations.md "Metrics and logs"): one registry per process,
// at module level, so that a part records with a one-line call where the thing happens, without a
// registry threaded through the store's writers, the buses and the leaders that openBackend builds.
// One process is one node, so process-wide is node-wide; tests that run several servers in one
// process compare scrapes before and after (counters add up across them).
//
// Two kinds of instrument:
// - event-driven ones, counted where it happens (an upload stored, a write group committed, a
//   webhook attempt): the hot paths pay an increment on a pre-labelled child, nothing more;
// - readings, taken from live objects when Prometheus scrapes (open streams, MQTT connections,
//   gateway sessions, leadership): their owners register a reader once and pay nothing per event.
//
// No label ever carries tenant data (account, device, solution, topic, client id): only route
// patterns, status and CoAP codes, and the fixed names below (a test scrapes after a tenant's
// traffic and looks for its identifiers).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export const registry = new Registry();
const registers = [registry];

// ---- HTTP --------------------------------------------------------------------------------------

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const httpDuration = new Histogram({
  name: 'reef_http_request_duration_seconds',
  help: 'HTTP requests by method, route pattern and status: time from the request to the end of the response (its _count counts requests)',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: LATENCY_BUCKETS,
  registers,
});

type HttpChild = ReturnType<typeof httpDuration.labels>;
/** Children by "method route status": prom-client hashes a label set on every call, a Map lookup is cheaper. */
const httpChildren = new Map<string, HttpChild>();

/**
 * One HTTP response. `route` is the route's pattern (`/api/solutions/:solution/devices/:id`), never
 * the URL, so no id reaches a label; undefined (no route matched) is counted as `unmatched`.
 */
export function observeHttp(method: string, route: string | undefined, status: number, ms: number): void {
  const r = route ?? 'unmatched';
  const key = `${method} ${r} ${status}`;
  let child = httpChildren.get(key);
  if (!child) {
    child = httpDuration.labels(method, r, String(status));
    httpChildren.set(key, child);
  }
  child.observe(ms / 1000);
}

// ---- observations and the store ----------------------------------------------------------------

/** The ways observations come in (src/service/observations.ts, the one store path). */
export type ObservationPath = 'http' | 'mqtt' | 'gateway' | 'simulation';

const observationsStored = new Counter({
  name: 'reef_observations_stored_total',
  help: 'Observations stored, by the path they came in on (http, mqtt, gateway, simulation)',
  labelNames: ['path'] as const,
  registers,
});
const storedBy: Record<ObservationPath, ReturnType<typeof observationsStored.labels>> = {
  http: observationsStored.labels('http'),
  mqtt: observationsStored.labels('mqtt'),
  gateway: observationsStored.labels('gateway'),
  simulation: observationsStored.labels('simulation'),
};

export function countStored(path: ObservationPath | undefined, n: number): void {
  if (path && n > 0) storedBy[path].inc(n);
}

const storeWrite = new Histogram({
  name: 'reef_store_write_seconds',
  help: "Observation write groups, by store: time from a group's start to its commit",
  labelNames: ['store'] as const,
  buckets: LATENCY_BUCKETS,
  registers,
});
const storeGroup = new Histogram({
  name: 'reef_store_write_group_batches',
  help: 'Observation write groups, by store: batches (uploads, ticks, readings) committed together',
  labelNames: ['store'] as const,
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
  registers,
});
const writeBy = { sqlite: storeWrite.labels('sqlite'), postgres: storeWrite.labels('postgres') };
const groupBy = { sqlite: storeGroup.labels('sqlite'), postgres: storeGroup.labels('postgres') };

/** A write group of `batches` starts; call the result when it has committed (or failed). */
export function writeGroupStarted(store: 'sqlite' | 'postgres', batches: number): () => void {
  groupBy[store].observe(batches);
  return writeBy[store].startTimer();
}

const standbyReads = new Counter({
  name: 'reef_store_standby_reads_total',
  help: 'Observation reads sent to the read standby (REEF_DATABASE_READ_URL), by result: served there, or failed there and made on the primary',
  labelNames: ['result'] as const,
  registers,
});
const standbyBy = { served: standbyReads.labels('served'), failed: standbyReads.labels('failed') };

/** A read went to the read standby: answered there, or failed there (and went to the primary). */
export function countStandbyRead(result: 'served' | 'failed'): void {
  standbyBy[result].inc();
}

// ---- events, alarms ----------------------------------------------------------------------------

const eventLag = new Histogram({
  name: 'reef_event_bus_lag_seconds',
  help: "Events from other nodes (PostgreSQL bus): time from the publisher's clock at publishing to delivery here",
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers,
});

/** An event another node published at `publishedAt` (its clock, ms) is delivered now. */
export function observeEventLag(publishedAt: number): void {
  eventLag.observe(Math.max(0, Date.now() - publishedAt) / 1000);
}

const alarmEvaluations = new Counter({
  name: 'reef_alarm_evaluations_total',
  help: "Observation batches the alarm evaluator checked against their device's rules",
  registers,
});

export function countAlarmEvaluation(): void {
  alarmEvaluations.inc();
}

const webhookDeliveries = new Counter({
  name: 'reef_alarm_webhook_deliveries_total',
  help: 'Alarm webhook attempts by outcome: delivered, retry (tried again later) or dead (given up, kept as a dead letter)',
  labelNames: ['outcome'] as const,
  registers,
});

export function countWebhookAttempt(outcome: 'delivered' | 'retry' | 'dead'): void {
  webhookDeliveries.labels(outcome).inc();
}

// ---- readings taken at scrape time -------------------------------------------------------------

/** Sums the live readers of one value; a reader removed leaves its last value behind when `keep` (a counter stays monotonic). */
class Readers<T> {
  private readonly live = new Set<T>();
  /** What readers removed had counted (counters only). */
  retired: number[];

  constructor(
    private readonly width: number,
    private readonly read: (r: T, into: number[]) => void,
    private readonly keep: boolean,
  ) {
    this.retired = new Array<number>(width).fill(0);
  }

  add(r: T): () => void {
    this.live.add(r);
    return () => {
      if (!this.live.delete(r)) return;
      if (this.keep) this.read(r, this.retired);
    };
  }

  sum(): number[] {
    const out = this.keep ? this.retired.slice() : new Array<number>(this.width).fill(0);
    for (const r of this.live) this.read(r, out);
    return out;
  }
}

const streams = new Readers<() => number>(1, (r, o) => (o[0]! += r()), false);
new Gauge({
  name: 'reef_sse_streams',
  help: 'Live event streams (Server-Sent Events) open on this node',
  registers,
  collect() {
    this.set(streams.sum()[0]!);
  },
});

/** The node's open event streams, read at each scrape (src/http/sse.ts StreamRegistry.size). */
export function watchStreams(size: () => number): () => void {
  return streams.add(size);
}

const leaders = new Readers<() => boolean>(1, (r, o) => (o[0]! += r() ? 1 : 0), false);
new Gauge({
  name: 'reef_leader',
  help: 'Whether this node runs the background jobs (1) or not (0); exactly one node of a deployment reports 1',
  registers,
  collect() {
    this.set(leaders.sum()[0]!);
  },
});

/** The node's leadership (src/jobs/leader.ts), read at each scrape. */
export function watchLeadership(isLeader: () => boolean): () => void {
  return leaders.add(isLeader);
}

/** What the MQTT broker tells (src/mqtt/broker.ts: its stats and connection gate). */
export interface MqttReadings {
  connections(): number;
  accepted(): number;
  refused(): number;
}

const mqttGauges = new Readers<MqttReadings>(1, (r, o) => (o[0]! += r.connections()), false);
const mqttCounts = new Readers<MqttReadings>(
  2,
  (r, o) => {
    o[0]! += r.accepted();
    o[1]! += r.refused();
  },
  true,
);
new Gauge({
  name: 'reef_mqtt_connections',
  help: 'MQTT connections open on this node (plain and TLS), counted from accept',
  registers,
  collect() {
    this.set(mqttGauges.sum()[0]!);
  },
});
new Counter({
  name: 'reef_mqtt_connects_total',
  help: 'MQTT CONNECTs by result: accepted or refused (bad credentials, caps)',
  labelNames: ['result'] as const,
  registers,
  collect() {
    const [accepted, refused] = mqttCounts.sum();
    this.reset();
    this.labels('accepted').inc(accepted!);
    this.labels('refused').inc(refused!);
  },
});

export function watchMqtt(r: MqttReadings): () => void {
  const a = mqttGauges.add(r);
  const b = mqttCounts.add(r);
  return () => {
    a();
    b();
  };
}

/** What the CoAP gateway tells: its sessions, kits and responses by code (an array indexed by the code byte). */
export interface GatewayReadings {
  sessions(): number;
  kits(): number;
  responseCodes: ArrayLike<number>;
}

const gatewayGauges = new Readers<GatewayReadings>(
  2,
  (r, o) => {
    o[0]! += r.sessions();
    o[1]! += r.kits();
  },
  false,
);
const gatewayCodes = new Readers<GatewayReadings>(
  256,
  (r, o) => {
    for (let c = 0; c < 256; c++) o[c]! += r.responseCodes[c] ?? 0;
  },
  true,
);
new Gauge({
  name: 'reef_gateway_sessions',
  help: 'CoAP gateway sessions open on this node',
  registers,
  collect() {
    this.set(gatewayGauges.sum()[0]!);
  },
});
new Gauge({
  name: 'reef_gateway_kits',
  help: "Dev kits this node's gateway knows (announced or configured)",
  registers,
  collect() {
    this.set(gatewayGauges.sum()[1]!);
  },
});
new Counter({
  name: 'reef_gateway_requests_total',
  help: 'CoAP requests the gateway answered, by response code (2.05, 4.01, 5.04...)',
  labelNames: ['code'] as const,
  registers,
  collect() {
    const codes = gatewayCodes.sum();
    this.reset();
    for (let c = 0; c < 256; c++) if (codes[c]) this.labels(coapCode(c)).inc(codes[c]);
  },
});

/** RFC 7252 §3's "c.dd" form of a code byte. */
export function coapCode(byte: number): string {
  return `${byte >> 5}.${String(byte & 31).padStart(2, '0')}`;
}

export function watchGateway(r: GatewayReadings): () => void {
  const a = gatewayGauges.add(r);
  const b = gatewayCodes.add(r);
  return () => {
    a();
    b();
  };
}

// ---- the process and the scrape ----------------------------------------------------------------

let processMetrics = false;

/**
 * prom-client's process metrics (CPU, memory, heap, event-loop delay, GC, handles), once per process.
 * The event-loop delay is sampled every 50 ms instead of prom-client's 10: a timer wake-up fewer
 * four times in five, and a blocked loop still shows (it delays every sample after it).
 */
export function enableProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 50 });
}

/** The text exposition of every metric. */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}
