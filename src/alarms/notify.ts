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
import { countWebhookAttempt } from '../metrics/metrics.ts';

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
  /** How long one attempt may take, connecting included. */
  timeoutMs: number;
  /** Deliveries sent at once by the node. */
  concurrency: number;
  /** Deliveries of one group (tenant) sent at once: a tenant's slow receivers leave the others' slots free. */
  perTenant: number;
  /** Deliveries to one target (scheme, host and port) sent at once. */
  perTarget: number;
}

export const DEFAULT_WEBHOOK_POLICY: WebhookPolicy = {
  maxAttempts: 8,
  baseDelayMs: 10_000,
  maxDelayMs: 3_600_000,
  timeoutMs: 5_000,
  concurrency: 16,
  perTenant: 4,
  perTarget: 2,
};

export class AlarmNotifier {
  /** Called when a delivery was stored, so the sender can go at once rather than at its next poll. */
  onDelivery: ((d: WebhookDeliveryRecord) => void) | null = null;

  constructor(
    private readonly store: Store,
    private readonly events: EventBus,
    private readonly mqtt: AlarmPublisher | null,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Every channel; a channel's failure is logged and never reaches the caller (ingest, HTTP). */
  async notify(event: AlarmEventName, alarm: AlarmRecord, rule: AlarmRuleRecord | null): Promise<void> {
    await this.announce(event, alarm, rule);
    const d = await this.delivery(event, alarm, rule);
    if (!d) return;
    try {
      await this.store.insertDelivery(d);
      this.delivered(d);
    } catch (err) {
      this.log.warn({ err, alarm: alarm.id }, 'storing a webhook delivery failed');
    }
  }

  /** The live stream and MQTT: what needs nothing stored. */
  async announce(event: AlarmEventName, alarm: AlarmRecord, rule: AlarmRuleRecord | null): Promise<void> {
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
  }

  /**
   * The webhook delivery of this step, not yet stored: the evaluator stores a raise's delivery in
   * the alarm's own transaction (Store.raiseAlarms), then hands it to `delivered`.
   */
  async delivery(event: AlarmEventName, alarm: AlarmRecord, rule: AlarmRuleRecord | null): Promise<WebhookDeliveryRecord | null> {
    // The rule's own webhook, else the solution's (none for an alarm whose rule was deleted).
    let hook: { url: string } | null = rule?.spec.webhook ?? null;
    if (rule && !hook) {
      try {
        hook = await getSolutionWebhook(this.store, alarm.groupId, alarm.solution);
      } catch (err) {
        this.log.warn({ err, alarm: alarm.id }, "reading the solution's webhook failed");
      }
    }
    if (!hook) return null;
    const t = this.now();
    return {
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
      body: JSON.stringify({ event, sentAt: new Date(t).toISOString(), alarm: alarmToWire(alarm) }),
      lastError: null,
    };
  }

  /** A delivery was stored: the sender can go at once rather than at its next poll. */
  delivered(d: WebhookDeliveryRecord): void {
    this.onDelivery?.(d);
  }
}

/** Deliveries of one group kept in memory at once; more wait in the store for a later poll. */
const MAX_QUEUED_PER_TENANT = 1000;
/** Due deliveries read from the store per poll. */
const POLL_BATCH = 500;

/**
 * A delivery's target (scheme, host and port), parsed once per delivery: pick() looks at every
 * queued delivery of a group on each turn, and 200 queued to one busy target made that 200 URL
 * parses per turn (docs/alarms.md "Delivery fairness").
 */
const targets = new WeakMap<WebhookDeliveryRecord, string>();
const targetOf = (d: WebhookDeliveryRecord) => {
  let t = targets.get(d);
  if (t === undefined) {
    const u = new URL(d.url);
    t = `${u.protocol}//${u.host}`;
    targets.set(d, t);
  }
  return t;
};

/**
 * Sends due webhook deliveries; run by the evaluating node only, so each is sent by one node.
 * Fair across tenants (docs/alarms.md "Delivery fairness"): groups take turns (round-robin), each
 * group has at most `perTenant` deliveries in flight and each target at most `perTarget`, and a
 * target that timed out is left alone until its backoff ends (its queued deliveries are put back
 * in the store for then, untried), so receivers that never answer cost their own tenant slots and
 * no one else's.
 */
export class WebhookSender {
  /** Queued or in flight, by delivery id, with the promise of its attempt's end. */
  private readonly known = new Map<string, { done: Promise<void>; settle: () => void }>();
  private readonly queues = new Map<string, WebhookDeliveryRecord[]>();
  /** Groups in turn order; `turn` is the next to be served. */
  private ring: string[] = [];
  private turn = 0;
  private active = 0;
  private readonly byTenant = new Map<string, number>();
  private readonly byTarget = new Map<string, number>();
  /** Targets that timed out: not tried again before `until`; `fails` doubles the wait. */
  private readonly cooling = new Map<string, { until: number; fails: number }>();

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    private readonly now: () => number,
    private readonly policy: WebhookPolicy,
    private readonly egress: EgressPolicy,
  ) {}

  /** Queues one delivery just stored (it goes out as soon as its tenant and target have a free slot). */
  enqueue(d: WebhookDeliveryRecord): Promise<void> {
    const k = this.known.get(d.id);
    if (k) return k.done;
    const q = this.queues.get(d.groupId);
    if (q && q.length >= MAX_QUEUED_PER_TENANT) return Promise.resolve();
    let settle!: () => void;
    const done = new Promise<void>((r) => (settle = r));
    this.known.set(d.id, { done, settle });
    if (q) q.push(d);
    else {
      this.queues.set(d.groupId, [d]);
      this.ring.push(d.groupId);
    }
    this.pump();
    return done;
  }

  /** Sends everything due now (read from the store); resolves once each of those has been tried. */
  async deliverDue(): Promise<void> {
    for (;;) {
      let due: WebhookDeliveryRecord[];
      try {
        due = await this.store.dueDeliveries(this.now(), POLL_BATCH);
      } catch (err) {
        this.log.warn({ err }, 'reading due webhook deliveries failed');
        return;
      }
      const fresh = due.filter((d) => !this.known.has(d.id));
      await Promise.all(due.map((d) => this.enqueue(d)));
      if (due.length < POLL_BATCH || !fresh.length) return;
    }
  }

  /** Starts deliveries while slots are free, tenants in turn. */
  private pump(): void {
    while (this.active < this.policy.concurrency) {
      const d = this.pick();
      if (!d) return;
      const target = targetOf(d);
      this.active++;
      this.byTenant.set(d.groupId, (this.byTenant.get(d.groupId) ?? 0) + 1);
      this.byTarget.set(target, (this.byTarget.get(target) ?? 0) + 1);
      void this.run(d, target).finally(() => {
        this.active--;
        const t = this.byTenant.get(d.groupId)! - 1;
        if (t) this.byTenant.set(d.groupId, t);
        else this.byTenant.delete(d.groupId);
        const g = this.byTarget.get(target)! - 1;
        if (g) this.byTarget.set(target, g);
        else this.byTarget.delete(target);
        const k = this.known.get(d.id);
        this.known.delete(d.id);
        k?.settle();
        this.pump();
      });
    }
  }

  /** The next delivery whose tenant and target have a free slot, the tenant after the last served first. */
  private pick(): WebhookDeliveryRecord | null {
    for (let i = 0; i < this.ring.length; i++) {
      const at = (this.turn + i) % this.ring.length;
      const group = this.ring[at]!;
      const q = this.queues.get(group)!;
      if ((this.byTenant.get(group) ?? 0) >= this.policy.perTenant) continue;
      const j = q.findIndex((d) => (this.byTarget.get(targetOf(d)) ?? 0) < this.policy.perTarget);
      if (j < 0) continue;
      const [d] = q.splice(j, 1);
      if (q.length) this.turn = (at + 1) % this.ring.length;
      else {
        this.queues.delete(group);
        this.ring.splice(at, 1);
        this.turn = this.ring.length ? at % this.ring.length : 0;
      }
      return d!;
    }
    return null;
  }

  private async run(d: WebhookDeliveryRecord, target: string): Promise<void> {
    const cool = this.cooling.get(target);
    if (cool && cool.until > this.now()) {
      // Untried: back in the store for when the target may be tried again (no attempt counted).
      try {
        await this.store.updateDelivery({ ...d, nextAt: Math.max(d.nextAt, cool.until), updatedAt: this.now() });
      } catch (err) {
        this.log.warn({ err, delivery: d.id }, 'postponing a webhook delivery failed');
      }
      return;
    }
    const timedOut = await this.attempt(d);
    if (timedOut) {
      const fails = (cool?.fails ?? 0) + 1;
      this.cooling.set(target, { until: this.now() + Math.min(this.policy.baseDelayMs * 2 ** (fails - 1), this.policy.maxDelayMs), fails });
      if (this.cooling.size > 10_000) for (const [t, c] of this.cooling) if (c.until <= this.now()) this.cooling.delete(t);
    } else if (cool) this.cooling.delete(target);
  }

  /** The signing secret of a delivery: its rule's webhook's, else its solution's; null when gone. */
  private async secretFor(d: WebhookDeliveryRecord): Promise<string | null> {
    const rule = await this.store.getAlarmRule(d.groupId, d.solution, d.ruleId);
    if (!rule) return null;
    if (rule.spec.webhook) return webhookSecret(this.store, rule.id, rule.spec.webhook.salt);
    const hook = await getSolutionWebhook(this.store, d.groupId, d.solution);
    return hook ? webhookSecret(this.store, solutionHookId(d.groupId, d.solution), hook.salt) : null;
  }

  /** One attempt, recorded in the store; true when the target did not answer in time. */
  private async attempt(d: WebhookDeliveryRecord): Promise<boolean> {
    const secret = await this.secretFor(d).catch(() => undefined);
    let error: string | null = null;
    let timedOut = false;
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
        timedOut = (err as Error).name === 'TimeoutError';
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
    countWebhookAttempt(out.status === 'delivered' ? 'delivered' : out.status === 'dead' ? 'dead' : 'retry');
    try {
      await this.store.updateDelivery(out);
    } catch (err) {
      this.log.warn({ err, delivery: d.id }, 'recording a webhook attempt failed; it will be tried again');
    }
    return timedOut;
  }
}
