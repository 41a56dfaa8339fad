// Telling people: every step of an alarm's life (raised, acknowledged, cleared) goes
// - on the event bus, so /api/solutions/{s}/events carries it to the app (SSE, src/http/sse.ts);
// - to MQTT topic <tenantId>/alarms/<deviceId> through an injected publisher (the broker is its own
//   component; this module only defines what it needs of it);
// - to the rule's webhook: a delivery is stored first, then POSTed by the evaluating node with an
//   HMAC-SHA256 signature, retried with exponential backoff, and after the last attempt kept as a
//   dead letter that the API lists. Ingest never waits on any of this (docs/alarms.md).
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AlarmRecord, AlarmRuleRecord, WebhookDeliveryRecord } from '../core/alarms.ts';
import type { EventBus } from '../events/bus.ts';
import type { Store } from '../store/store.ts';
import { type EgressPolicy, postWebhook } from './egress.ts';
import { alarmToWire } from './rules.ts';

/** What alarms need of an MQTT broker or client: fire-and-forget publishing (QoS 1 where it can). */
export interface AlarmPublisher {
  publish(topic: string, payload: string): void | Promise<void>;
}

export type AlarmEventName = 'raised' | 'acknowledged' | 'cleared';

const MASTER = 'alarms/webhook-master';

/**
 * A webhook's signing secret is never stored: it is HMAC-SHA256(master, "reef-alarm-webhook|<rule>|<salt>")
 * from one master key in the store (every node derives the same) and a salt kept with the rule; a
 * new URL gets a new salt, hence a new secret. The secret is shown once, when it is issued.
 */
export async function webhookSecret(store: Store, ruleId: string, salt: string): Promise<string> {
  let m = await store.getState(MASTER);
  if (m === null) {
    await store.setState(MASTER, randomBytes(32).toString('base64url'));
    // Two nodes may both write: both then use what the store kept.
    m = (await store.getState(MASTER))!;
  }
  return createHmac('sha256', Buffer.from(m, 'base64url')).update(`reef-alarm-webhook|${ruleId}|${salt}`).digest('base64url');
}

/**
 * A solution's webhook (docs/alarms.md "Webhooks"): used for every rule of the solution without its
 * own. Kept in the store's state table under one key per group and solution; its secret is derived
 * like a rule's, from the key `solution/<group>/<solution>` and its own salt.
 */
export interface SolutionWebhook {
  url: string;
  salt: string;
  updatedAt: number;
}

const solutionHookKey = (groupId: string, solution: string) => `alarms/solution-webhook/${groupId}/${solution}`;
export const solutionHookId = (groupId: string, solution: string) => `solution/${groupId}/${solution}`;

export async function getSolutionWebhook(store: Store, groupId: string, solution: string): Promise<SolutionWebhook | null> {
  const v = await store.getState(solutionHookKey(groupId, solution));
  return v === null ? null : (JSON.parse(v) as SolutionWebhook);
}

export async function setSolutionWebhook(store: Store, groupId: string, solution: string, hook: SolutionWebhook | null): Promise<void> {
  if (hook) await store.setState(solutionHookKey(groupId, solution), JSON.stringify(hook));
  else await store.deleteState(solutionHookKey(groupId, solution));
}

/**
 * The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`. The time is
 * inside the signed text so a receiver can refuse old replays (docs/alarms.md "Webhooks").
 */
export function signature(secret: string, body: string, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex')}`;
}

export interface WebhookPolicy {
  /** Attempts before a delivery becomes a dead letter. */
  maxAttempts: number;
  /** Delay before the second attempt; doubled each time after. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** How long one attempt may take. */
  timeoutMs: number;
  /** Deliveries sent at once. */
  concurrency: number;
}

export const DEFAULT_WEBHOOK_POLICY: WebhookPolicy = { maxAttempts: 8, baseDelayMs: 10_000, maxDelayMs: 3_600_000, timeoutMs: 10_000, concurrency: 8 };

export class AlarmNotifier {
  /** Called when a delivery was stored, so the sender can go at once rather than at its next poll. */
  onDelivery: (() => void) | null = null;

  constructor(
    private readonly store: Store,
    private readonly events: EventBus,
    private readonly mqtt: AlarmPublisher | null,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Every channel; a channel's failure is logged and never reaches the caller (ingest, HTTP). */
  async notify(event: AlarmEventName, alarm: AlarmRecord, rule: AlarmRuleRecord | null): Promise<void> {
    const wire = alarmToWire(alarm);
    this.events.publish({ kind: 'alarm', groupId: alarm.groupId, solution: alarm.solution, deviceId: alarm.deviceId, event, alarm: wire });
    if (this.mqtt) {
      try {
        const device = await this.store.getDevice(alarm.groupId, alarm.solution, alarm.deviceId);
        const tenantId = device?.tenantId ?? rule?.tenantId;
        if (tenantId) await this.mqtt.publish(`${tenantId}/alarms/${alarm.deviceId}`, JSON.stringify({ event, alarm: wire }));
      } catch (err) {
        this.log.warn({ err, alarm: alarm.id }, 'publishing an alarm over MQTT failed');
      }
    }
    // The rule's own webhook, else the solution's (none for an alarm whose rule was deleted).
    let hook: { url: string } | null = rule?.spec.webhook ?? null;
    if (rule && !hook) {
      try {
        hook = await getSolutionWebhook(this.store, alarm.groupId, alarm.solution);
      } catch (err) {
        this.log.warn({ err, alarm: alarm.id }, "reading the solution's webhook failed");
      }
    }
    if (hook) {
      const t = this.now();
      const d: WebhookDeliveryRecord = {
        id: randomUUID(),
        groupId: alarm.groupId,
        solution: alarm.solution,
        ruleId: alarm.ruleId,
        alarmId: alarm.id,
        status: 'pending',
        attempts: 0,
        nextAt: t,
        createdAt: t,
        updatedAt: t,
        url: hook.url,
        body: JSON.stringify({ event, sentAt: new Date(t).toISOString(), alarm: wire }),
        lastError: null,
      };
      try {
        await this.store.insertDelivery(d);
        this.onDelivery?.();
      } catch (err) {
        this.log.warn({ err, alarm: alarm.id }, 'storing a webhook delivery failed');
      }
    }
  }
}

/** Sends due webhook deliveries; run by the evaluating node only, so each is sent by one node. */
export class WebhookSender {
  private readonly inFlight = new Set<string>();
  private running: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly policy: WebhookPolicy,
    private readonly egress: EgressPolicy,
  ) {}

  /** Sends everything due now; a call while a round runs makes one more round after it. */
  deliverDue(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.round();
        } while (this.again);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  private async round(): Promise<void> {
    let due: WebhookDeliveryRecord[];
    try {
      due = (await this.store.dueDeliveries(this.now(), 100)).filter((d) => !this.inFlight.has(d.id));
    } catch (err) {
      this.log.warn({ err }, 'reading due webhook deliveries failed');
      return;
    }
    let next = 0;
    const worker = async () => {
      while (next < due.length) {
        const d = due[next++]!;
        this.inFlight.add(d.id);
        try {
          await this.attempt(d);
        } finally {
          this.inFlight.delete(d.id);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.policy.concurrency, due.length) }, worker));
    if (due.length === 100) this.again = true;
  }

  /** The signing secret of a delivery: its rule's webhook's, else its solution's; null when gone. */
  private async secretFor(d: WebhookDeliveryRecord): Promise<string | null> {
    const rule = await this.store.getAlarmRule(d.groupId, d.solution, d.ruleId);
    if (!rule) return null;
    if (rule.spec.webhook) return webhookSecret(this.store, rule.id, rule.spec.webhook.salt);
    const hook = await getSolutionWebhook(this.store, d.groupId, d.solution);
    return hook ? webhookSecret(this.store, solutionHookId(d.groupId, d.solution), hook.salt) : null;
  }

  private async attempt(d: WebhookDeliveryRecord): Promise<void> {
    const secret = await this.secretFor(d).catch(() => undefined);
    let error: string | null = null;
    if (secret === undefined) error = 'the webhook could not be read from the store';
    else if (secret === null) error = 'the rule or its webhook was deleted';
    else {
      try {
        const res = await postWebhook(
          d.url,
          {
            'content-type': 'application/json',
            'user-agent': 'Reef-Alarms/1',
            'x-reef-event': (JSON.parse(d.body) as { event: string }).event,
            'x-reef-delivery': d.id,
            'x-reef-signature': signature(secret, d.body, Math.floor(this.now() / 1000)),
          },
          d.body,
          this.policy.timeoutMs,
          this.egress,
        );
        if (res.status < 200 || res.status >= 300) error = `HTTP ${res.status}`;
      } catch (err) {
        error = `${(err as Error).message}${(err as { cause?: Error }).cause ? `: ${(err as { cause: Error }).cause.message}` : ''}`;
      }
    }
    const t = this.now();
    const attempts = d.attempts + 1;
    const out: WebhookDeliveryRecord = { ...d, attempts, updatedAt: t, lastError: error };
    if (error === null) out.status = 'delivered';
    else if (attempts >= this.policy.maxAttempts || secret === null) {
      out.status = 'dead';
      this.log.info({ delivery: d.id, url: d.url, attempts, error }, 'webhook delivery given up: kept as a dead letter');
    } else out.nextAt = t + Math.min(this.policy.baseDelayMs * 2 ** (attempts - 1), this.policy.maxDelayMs);
    try {
      await this.store.updateDelivery(out);
    } catch (err) {
      this.log.warn({ err, delivery: d.id }, 'recording a webhook attempt failed; it will be tried again');
    }
  }
}
