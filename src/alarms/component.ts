// The alarms part of `reef serve` (docs/alarms.md): the alarms API on every node; the
// evaluator and the webhook sender as one leadership job, so on several nodes one node evaluates
// each rule and sends each delivery.
import type { Component, ComponentFactory, Services } from '../app/contracts.ts';
import { allowList } from './egress.ts';
import { AlarmEngine } from './engine.ts';
import { AlarmNotifier, DEFAULT_WEBHOOK_POLICY, WebhookSender, type AlarmPublisher, type WebhookPolicy } from './notify.ts';
import { alarmRoutes } from './routes.ts';

export interface AlarmComponentOptions {
  now?: () => number;
  /** Publishes alarm events to MQTT topic <tenantId>/alarms/<deviceId>; absent: no MQTT. */
  mqtt?: AlarmPublisher | null;
  webhook?: Partial<WebhookPolicy>;
  /** Readings older than this on arrival are not evaluated (backfill); default 1 h. */
  lateMs?: number;
  /** Period of the silence check and the webhook retry poll; 0 disables the timers (tests drive them). */
  silenceCheckMs?: number;
  deliveryPollMs?: number;
  maxRulesPerSolution?: number;
  /** Alarms one silence check may raise per group (tenant); default 200. */
  maxRaisesPerCheck?: number;
  /** Receives the running parts (tests, benchmarks). */
  onReady?: (parts: AlarmParts) => void;
}

export interface AlarmParts {
  engine: AlarmEngine;
  sender: WebhookSender;
  notifier: AlarmNotifier;
}

export function createAlarmComponent(opts: AlarmComponentOptions = {}): ComponentFactory {
  return async (s: Services): Promise<Component> => {
    const now = opts.now ?? Date.now;
    const log = s.log.child({ component: 'alarms' });
    const notifier = new AlarmNotifier(s.store, s.events, opts.mqtt ?? null, log, now);
    const egress = { allowPrivate: s.config.alarms.webhookAllowPrivate, allowed: allowList(s.config.alarms.webhookAllowCidrs) };
    const sender = new WebhookSender(s.store, log, now, { ...DEFAULT_WEBHOOK_POLICY, ...opts.webhook }, egress);
    const engine = new AlarmEngine({ store: s.store, events: s.events, log, notifier, now, lateMs: opts.lateMs ?? 3_600_000, maxRaisesPerCheck: opts.maxRaisesPerCheck ?? 200 });
    opts.onReady?.({ engine, sender, notifier });

    const silenceMs = opts.silenceCheckMs ?? 5000;
    const pollMs = opts.deliveryPollMs ?? 1000;
    const timers: NodeJS.Timeout[] = [];
    // A delivery stored on this node goes out at once when this node is the one sending.
    notifier.onDelivery = (d) => {
      if (engine.running) void sender.enqueue(d);
    };
    let unregister: (() => Promise<void>) | null = null;

    return {
      name: 'alarms',
      apiPlugin: alarmRoutes({
        store: s.store,
        events: s.events,
        notifier,
        local: (e) => engine.handle(e),
        now,
        egress,
        maxRulesPerSolution: opts.maxRulesPerSolution ?? 20_000,
        quotas: s.quotas,
      }),
      async start() {
        unregister = s.leadership.run({
          name: 'alarms',
          start: async () => {
            await engine.start();
            if (silenceMs > 0) timers.push(setInterval(() => void engine.checkSilence(), silenceMs).unref());
            if (pollMs > 0) timers.push(setInterval(() => void sender.deliverDue(), pollMs).unref());
            void sender.deliverDue();
          },
          stop: async () => {
            for (const t of timers.splice(0)) clearInterval(t);
            await engine.stop();
          },
        });
      },
      async stop() {
        await unregister?.();
      },
    };
  };
}

export const alarmComponent: ComponentFactory = createAlarmComponent();
