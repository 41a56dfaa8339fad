// An MQTT ingest message (docs/mqtt.md "Ingest"): handled exactly as the HTTP upload of the same body,
// and the reason of a refusal, on the publisher's errors topic.
import { randomUUID } from 'node:crypto';
import type { Aedes, PublishPacket } from 'aedes';
import type { Logger } from 'pino';
import type { Account } from '../core/types.ts';
import { ReefError, isReefError } from '../core/errors.ts';
import type { EventBus } from '../events/bus.ts';
import { errorBody } from '../http/errors.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../http/content-types.ts';
import { findUploadDevice } from '../service/devices.ts';
import { parseBatch, storeObservations } from '../service/observations.ts';
import type { QuotaService } from '../service/quotas.ts';
import type { Store } from '../store/store.ts';
import { errorsTopic } from './topics.ts';

export interface IngestDeps {
  store: Store;
  events: EventBus | null;
  quotas: QuotaService;
}

export interface IngestLimits {
  maxPayloadBytes: number;
  maxObservations: number;
  maxObservationExtraBytes: number;
}

/** Stores one message's observations for `account`'s group; the number stored, or the ReefError HTTP would answer. */
export async function ingest(deps: IngestDeps, o: IngestLimits, account: Account, solution: string, deviceId: string, payload: Buffer): Promise<number> {
  if (payload.length > o.maxPayloadBytes) throw new ReefError('PAYLOAD_TOO_LARGE', `the message is larger than ${o.maxPayloadBytes} bytes`);
  const text = payload.toString('utf8');
  // The HTTP body rule (src/http/content-types.ts): no Reef document nests deeper.
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) throw new ReefError('VALIDATION_FAILED', `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, { field: 'body' });
  let body: unknown;
  try {
    // As Fastify does for HTTP bodies: a __proto__ key is refused, not merged into an object's prototype.
    body = JSON.parse(text, (k, v: unknown) => {
      if (k === '__proto__') throw new ReefError('VALIDATION_FAILED', 'the property __proto__ is not allowed');
      return v;
    });
  } catch (e) {
    if (isReefError(e)) throw e;
    throw new ReefError('MALFORMED_JSON', 'the message is not valid JSON: send {"observations":[...]}');
  }
  const device = await findUploadDevice(deps.store, account, solution, deviceId);
  const batch = parseBatch(body, o.maxObservations, o.maxObservationExtraBytes);
  // Reserved against the device owner's quota before the store commits (src/service/quotas.ts).
  return storeObservations(deps.store, deps.events, device, batch, deps.quotas, 'mqtt');
}

/**
 * Why a message was refused, on the publisher's errors topic: the HTTP error body plus the topic.
 * Resolves once it is written to the topic's subscribers (Aedes calls back after delivery), so a
 * publisher subscribed to its errors topic receives the reason before the PUBACK.
 */
export function report(aedes: Aedes, log: Logger, tenantId: string, clientId: string, topic: string, e: ReefError): Promise<void> {
  const requestId = randomUUID();
  const level = e.status >= 500 ? 'error' : 'info';
  log[level]({ clientId, tenantId, code: e.code, requestId, ...(e.status >= 500 ? { err: e.cause ?? e } : {}) }, `mqtt message refused: ${e.message}`);
  const payload = Buffer.from(JSON.stringify({ ...errorBody(e, requestId), topic: topic.slice(0, 512) }));
  return new Promise((resolve) => {
    aedes.publish({ cmd: 'publish', topic: errorsTopic(tenantId, clientId), payload, qos: 1, retain: false, dup: false } as PublishPacket, () => resolve());
  });
}
