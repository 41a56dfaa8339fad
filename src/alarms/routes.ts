// The alarms API (docs/alarms.md): rules CRUD, alarms with filters and keyset paging, acknowledge
// and clear, per-device counts for badges, and the webhook deliveries (the dead-letter list).
// Registered by the alarms component as an authenticated API plugin; everything is scoped to the
// caller's group, and another group's rule or alarm answers exactly like none.
import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { ACTIVE_STATUSES, type AlarmRecord, type AlarmRuleRecord, type AlarmStatus, type DeliveryStatus } from '../core/alarms.ts';
import { ReefError } from '../core/errors.ts';
import type { Account } from '../core/types.ts';
import { solutionName } from '../core/validate.ts';
import type { EventBus, ReefEvent } from '../events/bus.ts';
import { errors, solutionParams } from '../http/schemas.ts';
import { findDevice, resolveSolution } from '../service/devices.ts';
import type { QuotaService } from '../service/quotas.ts';
import { isKitModule } from '../service/kit-module.ts';
import type { Store } from '../store/store.ts';
import { Slicer } from './fair-queue.ts';
import { acknowledged, applyStep, cleared, type Actor } from './lifecycle.ts';
import { checkWebhookTarget, type EgressPolicy } from './egress.ts';
import { getSolutionWebhook, setSolutionWebhook, solutionHookId, webhookSecret, type AlarmNotifier } from './notify.ts';
import { alarmToWire, deliveryToWire, type ParsedRule, parseRule, ruleToWire, webhookUrl } from './rules.ts';

export interface AlarmRoutesDeps {
  store: Store;
  events: EventBus;
  notifier: AlarmNotifier;
  /** This node's evaluator hears its own changes at once (the in-process bus may be idle). */
  local: (e: ReefEvent) => void;
  now: () => number;
  /** Where webhooks may go (REEF_ALARM_WEBHOOK_ALLOW_PRIVATE). */
  egress: EgressPolicy;
  /** Most rules one solution may hold. */
  maxRulesPerSolution: number;
  /** The group's alarm rules quota (src/service/quotas.ts). */
  quotas: Pick<QuotaService, 'createObject'>;
}

const STATUSES: readonly AlarmStatus[] = ['raised', 'acknowledged', 'cleared-unacknowledged', 'cleared'];

const ruleSchema = {
  $id: 'AlarmRule',
  type: 'object',
  properties: {
    id: { type: 'string' },
    solution: { type: 'string' },
    deviceId: { type: ['string', 'null'], description: 'One device, or null for every device of the solution (or of templateId)' },
    templateId: { type: ['string', 'null'], description: 'Every device naming this device template (devices made later included); null: deviceId or the whole solution' },
    name: { type: 'string' },
    field: { type: 'string', description: 'Path of a numeric field: temperature, accelerometer.z...' },
    condition: { type: 'string', enum: ['above', 'below', 'outside', 'rate', 'silence'] },
    threshold: { type: 'number' },
    low: { type: 'number' },
    high: { type: 'number' },
    ratePerMinute: { type: 'number' },
    direction: { type: 'string', enum: ['rise', 'fall', 'any'] },
    silenceMs: { type: 'integer' },
    durationMs: { type: 'integer', description: 'How long the condition must hold before raising' },
    hysteresis: { type: 'number', description: 'How far back inside the normal range a reading must be to clear' },
    unit: { type: ['string', 'null'], enum: ['C', 'F', null] },
    severity: { type: 'string', enum: ['critical', 'major', 'minor', 'warning'] },
    enabled: { type: 'boolean' },
    webhook: {
      type: ['object', 'null'],
      properties: { url: { type: 'string' }, secret: { type: 'string', description: 'The signing secret: shown only when issued' } },
    },
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
  },
  required: ['id', 'solution', 'deviceId', 'name', 'field', 'condition', 'durationMs', 'hysteresis', 'unit', 'severity', 'enabled', 'webhook'],
} as const;

const readingSchema = {
  type: ['object', 'null'],
  properties: { timestamp: { type: 'string' }, value: { type: 'number' }, unit: { type: ['string', 'null'] } },
} as const;
const actorSchema = { type: ['object', 'null'], properties: { tenantId: { type: 'string' }, name: { type: 'string' } } } as const;

const alarmSchema = {
  $id: 'Alarm',
  type: 'object',
  properties: {
    id: { type: 'string' },
    solution: { type: 'string' },
    deviceId: { type: 'string' },
    ruleId: { type: 'string' },
    status: { type: 'string', enum: STATUSES },
    active: { type: 'boolean' },
    severity: { type: 'string' },
    rule: { type: 'object', properties: { name: { type: 'string' }, field: { type: 'string' }, condition: { type: 'string' } } },
    raisedAt: { type: 'string' },
    reading: readingSchema,
    acknowledgedAt: { type: ['string', 'null'] },
    acknowledgedBy: actorSchema,
    clearedAt: { type: ['string', 'null'] },
    updatedAt: { type: 'string' },
    history: {
      type: 'array',
      items: {
        type: 'object',
        properties: { at: { type: 'string' }, event: { type: 'string' }, by: actorSchema, reading: readingSchema, note: { type: 'string' } },
      },
    },
  },
  required: ['id', 'deviceId', 'ruleId', 'status', 'active', 'raisedAt', 'history'],
} as const;

const deliverySchema = {
  $id: 'AlarmDelivery',
  type: 'object',
  properties: {
    id: { type: 'string' },
    ruleId: { type: 'string' },
    alarmId: { type: 'string' },
    status: { type: 'string', enum: ['pending', 'delivered', 'dead'] },
    attempts: { type: 'integer' },
    url: { type: 'string' },
    lastError: { type: ['string', 'null'] },
    nextAttemptAt: { type: ['string', 'null'] },
    createdAt: { type: 'string' },
    updatedAt: { type: 'string' },
    body: { type: 'object', additionalProperties: true },
  },
} as const;

const idParams = {
  type: 'object',
  properties: { solution: { type: 'string', maxLength: 200 }, id: { type: 'string', maxLength: 200 } },
  required: ['solution', 'id'],
} as const;

const ruleBody = { type: 'object', additionalProperties: true, description: 'An alarm rule (docs/alarms.md); unknown fields are refused' } as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids in paths are UUIDs; anything else cannot name a rule or alarm and answers 404 like an unknown one. */
function pathId(id: string): string | null {
  return UUID.test(id) ? id.toLowerCase() : null;
}

function cursor(raisedAt: number, id: string): string {
  return `${raisedAt}_${id}`;
}
function parseCursor(s: string): { at: number; id: string } {
  const m = /^(\d{1,16})_([0-9a-f-]{36})$/.exec(s);
  if (!m) throw new ReefError('INVALID_CURSOR', 'after must be the nextAfter value of the previous page', { field: 'after' });
  return { at: Number(m[1]), id: m[2]! };
}

function actor(account: Account): Actor {
  return { tenantId: account.tenantId, name: account.name };
}

export function alarmRoutes(deps: AlarmRoutesDeps): FastifyPluginAsync {
  const { store, events, notifier, now } = deps;
  const changed = (e: ReefEvent) => {
    events.publish(e);
    deps.local(e);
  };

  /** The rule's device or template must be one of the caller's solution. */
  async function checkTarget(account: Account, solution: string, parsed: ParsedRule): Promise<void> {
    if (parsed.deviceId) {
      const d = await findDevice(store, account, solution, parsed.deviceId);
      // Its readings are stored on its kit (docs/api.md "A kit's network module"): a rule on it would never fire.
      if (isKitModule(d)) {
        throw new ReefError('VALIDATION_FAILED', `device ${d.id} is a kit's network module, whose readings are dev kit ${String(d.domainInfo.kitId)}'s: name the kit`, { field: 'deviceId' });
      }
    }
    if (parsed.newWebhook && parsed.spec.webhook) await checkWebhookTarget(parsed.spec.webhook.url, deps.egress);
    const t = parsed.spec.templateId;
    if (t && !(await store.getTemplate(account.groupId, solution, t))) {
      throw new ReefError('TEMPLATE_NOT_FOUND', `no device template ${t} in solution ${JSON.stringify(solution)}`, { field: 'templateId' });
    }
  }

  async function getRule(account: Account, solution: string, id: string): Promise<AlarmRuleRecord> {
    const pid = pathId(id);
    const r = pid ? await store.getAlarmRule(account.groupId, solution, pid) : null;
    if (!r) throw new ReefError('ALARM_RULE_NOT_FOUND', `no alarm rule ${id} in solution ${JSON.stringify(solution)}`);
    return r;
  }

  return async (app: FastifyInstance) => {
    app.addSchema(ruleSchema);
    app.addSchema(alarmSchema);
    app.addSchema(deliverySchema);
    const rules = '/api/solutions/:solution/alarm-rules';
    const tags = ['alarms'];

    app.get(
      rules,
      {
        schema: {
          tags,
          summary: "The solution's alarm rules, oldest first",
          params: solutionParams,
          querystring: {
            type: 'object',
            properties: { deviceId: { type: 'string', maxLength: 64, description: "Only rules that watch this device (its own, its template's and the solution-wide ones)" } },
          },
          response: { 200: { type: 'object', properties: { rules: { type: 'array', items: { $ref: 'AlarmRule#' } } } }, ...errors(400, 401, 404) },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        const { deviceId } = request.query as { deviceId?: string };
        await resolveSolution(store, request.account, solution);
        let list = await store.listAlarmRules(request.account.groupId, solution);
        if (deviceId !== undefined) {
          const d = deviceId.toLowerCase();
          const t = list.some((r) => r.spec.templateId) ? (await store.getDevice(request.account.groupId, solution, d))?.domainInfo.templateId : undefined;
          list = list.filter((r) => r.deviceId === d || (r.deviceId === null && (!r.spec.templateId || r.spec.templateId === t)));
        }
        return { rules: list.map((r) => ruleToWire(r)) };
      },
    );

    app.post(
      rules,
      {
        schema: {
          tags,
          summary: 'Create an alarm rule; a webhook gets its signing secret in this answer only',
          params: solutionParams,
          body: ruleBody,
          response: { 201: { $ref: 'AlarmRule#' }, ...errors(400, 401, 403, 404, 415) },
        },
        bodyLimit: 16 * 1024,
      },
      async (request, reply) => {
        const { solution } = request.params as { solution: string };
        await resolveSolution(store, request.account, solution);
        const parsed = parseRule(request.body);
        await checkTarget(request.account, solution, parsed);
        const have = await store.countAlarmRules(request.account.groupId, solution);
        if (have >= deps.maxRulesPerSolution) {
          throw new ReefError('QUOTA_EXCEEDED', `a solution holds at most ${deps.maxRulesPerSolution} alarm rules; this one has ${have}`);
        }
        const t = now();
        const rec: AlarmRuleRecord = {
          id: randomUUID(),
          groupId: request.account.groupId,
          tenantId: request.account.tenantId,
          solution,
          deviceId: parsed.deviceId,
          spec: parsed.spec,
          createdAt: t,
          updatedAt: t,
        };
        await deps.quotas.createObject(request.account, 'alarmRules', false, () => store.createAlarmRule(rec));
        changed({ kind: 'alarm-rule', groupId: rec.groupId, solution, ruleId: rec.id, action: 'created' });
        const secret = rec.spec.webhook ? await webhookSecret(store, rec.id, rec.spec.webhook.salt) : undefined;
        return reply.code(201).header('location', `/api/solutions/${solution}/alarm-rules/${rec.id}`).send(ruleToWire(rec, secret));
      },
    );

    app.get(
      `${rules}/:id`,
      {
        schema: { tags, summary: 'One alarm rule', params: idParams, response: { 200: { $ref: 'AlarmRule#' }, ...errors(400, 401, 404) } },
      },
      async (request) => {
        const { solution, id } = request.params as { solution: string; id: string };
        solutionName(solution);
        return ruleToWire(await getRule(request.account, solution, id));
      },
    );

    app.put(
      `${rules}/:id`,
      {
        schema: {
          tags,
          summary: 'Replace an alarm rule (a GET answer may be sent back changed); a new webhook URL gets a new secret, shown in this answer only',
          params: idParams,
          body: ruleBody,
          response: { 200: { $ref: 'AlarmRule#' }, ...errors(400, 401, 404, 415) },
        },
        bodyLimit: 16 * 1024,
      },
      async (request) => {
        const { solution, id } = request.params as { solution: string; id: string };
        solutionName(solution);
        const old = await getRule(request.account, solution, id);
        const parsed = parseRule(request.body, old.spec);
        await checkTarget(request.account, solution, parsed);
        const rec: AlarmRuleRecord = { ...old, deviceId: parsed.deviceId, spec: parsed.spec, updatedAt: now() };
        if (!(await store.updateAlarmRule(rec))) throw new ReefError('ALARM_RULE_NOT_FOUND', `no alarm rule ${id} in solution ${JSON.stringify(solution)}`);
        changed({ kind: 'alarm-rule', groupId: rec.groupId, solution, ruleId: rec.id, action: 'updated' });
        const secret = parsed.newWebhook && rec.spec.webhook ? await webhookSecret(store, rec.id, rec.spec.webhook.salt) : undefined;
        return ruleToWire(rec, secret);
      },
    );

    app.delete(
      `${rules}/:id`,
      {
        schema: { tags, summary: 'Delete an alarm rule; its active alarms are cleared (they stay in the history)', params: idParams, response: { 204: { type: 'null' }, ...errors(400, 401, 404) } },
      },
      async (request, reply) => {
        const { solution, id } = request.params as { solution: string; id: string };
        solutionName(solution);
        const rule = await getRule(request.account, solution, id);
        if (!(await store.deleteAlarmRule(request.account.groupId, solution, rule.id))) throw new ReefError('ALARM_RULE_NOT_FOUND');
        changed({ kind: 'alarm-rule', groupId: rule.groupId, solution, ruleId: rule.id, action: 'deleted' });
        // An alarm nothing can clear any more would stay active for ever.
        const slicer = new Slicer();
        const clear = (x: AlarmRecord) => cleared(x, now(), { by: actor(request.account), note: 'the rule was deleted' });
        for (;;) {
          // Other requests get turns while a rule with many active alarms is cleared; each page is
          // written in one transaction (on SQLite one commit, one fsync, per page: docs/security.md "Limits").
          await slicer.tick();
          const active = await store.listAlarms(rule.groupId, solution, { ruleId: rule.id, statuses: [...ACTIVE_STATUSES], limit: 50 });
          if (!active.length) break;
          const steps = active.flatMap((a) => {
            const next = clear(a);
            return next ? [{ alarm: next, expect: a.status }] : [];
          });
          const written = await store.updateAlarms(steps);
          for (const [i, { alarm }] of steps.entries()) {
            if (written[i]) await notifier.notify('cleared', alarm, null);
            else {
              // Changed meanwhile (acknowledged, cleared by hand): compare-and-set again, one by one.
              const { alarm: fresh, changed: did } = await applyStep(store, rule.groupId, solution, alarm.id, clear);
              if (did) await notifier.notify('cleared', fresh, null);
            }
          }
        }
        return reply.code(204).send();
      },
    );

    // The solution's webhook: used for every rule without its own (docs/alarms.md "Webhooks").
    const hookPath = '/api/solutions/:solution/alarm-webhook';
    const hookSchema = {
      type: 'object',
      properties: {
        webhook: {
          type: ['object', 'null'],
          properties: {
            url: { type: 'string' },
            secret: { type: 'string', description: 'The signing secret: shown only when issued' },
            updatedAt: { type: 'string' },
          },
        },
      },
    } as const;
    app.get(
      hookPath,
      { schema: { tags, summary: "The solution's webhook (null: none), used for every rule without its own", params: solutionParams, response: { 200: hookSchema, ...errors(400, 401, 404) } } },
      async (request) => {
        const { solution } = request.params as { solution: string };
        await resolveSolution(store, request.account, solution);
        const h = await getSolutionWebhook(store, request.account.groupId, solution);
        return { webhook: h ? { url: h.url, updatedAt: new Date(h.updatedAt).toISOString() } : null };
      },
    );
    app.put(
      hookPath,
      {
        schema: {
          tags,
          summary: "Set the solution's webhook; a new URL gets a new signing secret, shown in this answer only",
          params: solutionParams,
          body: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'], additionalProperties: false },
          response: { 200: hookSchema, ...errors(400, 401, 404, 415) },
        },
        bodyLimit: 16 * 1024,
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        await resolveSolution(store, request.account, solution);
        const url = webhookUrl((request.body as { url: unknown }).url, 'url');
        const { groupId } = request.account;
        const old = await getSolutionWebhook(store, groupId, solution);
        const same = old?.url === url;
        if (!same) await checkWebhookTarget(url, deps.egress, 'url');
        const hook = { url, salt: same ? old.salt : randomBytes(12).toString('base64url'), updatedAt: now() };
        await setSolutionWebhook(store, groupId, solution, hook);
        const secret = same ? undefined : await webhookSecret(store, solutionHookId(groupId, solution), hook.salt);
        return { webhook: { url, ...(secret ? { secret } : {}), updatedAt: new Date(hook.updatedAt).toISOString() } };
      },
    );
    app.delete(
      hookPath,
      { schema: { tags, summary: "Remove the solution's webhook (rules with their own keep theirs)", params: solutionParams, response: { 204: { type: 'null' }, ...errors(400, 401, 404) } } },
      async (request, reply) => {
        const { solution } = request.params as { solution: string };
        await resolveSolution(store, request.account, solution);
        await setSolutionWebhook(store, request.account.groupId, solution, null);
        return reply.code(204).send();
      },
    );

    const alarms = '/api/solutions/:solution/alarms';
    app.get(
      alarms,
      {
        schema: {
          tags,
          summary: 'Alarms, newest raised first, keyset-paged: pass nextAfter back as after',
          params: solutionParams,
          querystring: {
            type: 'object',
            properties: {
              status: { type: 'string', maxLength: 100, description: 'active, or a comma list of raised, acknowledged, cleared-unacknowledged, cleared' },
              deviceId: { type: 'string', maxLength: 64 },
              ruleId: { type: 'string', maxLength: 64 },
              limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
              after: { type: 'string', maxLength: 80 },
            },
          },
          response: { 200: { type: 'object', properties: { alarms: { type: 'array', items: { $ref: 'Alarm#' } }, nextAfter: { type: ['string', 'null'] } } }, ...errors(400, 401, 404) },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        const q = request.query as { status?: string; deviceId?: string; ruleId?: string; limit: number; after?: string };
        await resolveSolution(store, request.account, solution);
        let statuses: AlarmStatus[] | undefined;
        if (q.status !== undefined) {
          statuses = [];
          for (const s of q.status
            .split(',')
            .map((x) => x.trim())
            .filter(Boolean)) {
            if (s === 'active') statuses.push(...ACTIVE_STATUSES);
            else if (STATUSES.includes(s as AlarmStatus)) statuses.push(s as AlarmStatus);
            else throw new ReefError('VALIDATION_FAILED', `status must be active or a comma list of ${STATUSES.join(', ')}`, { field: 'status' });
          }
        }
        const after = q.after === undefined ? undefined : parseCursor(q.after);
        const page = await store.listAlarms(request.account.groupId, solution, {
          limit: q.limit + 1,
          ...(statuses ? { statuses } : {}),
          ...(q.deviceId !== undefined ? { deviceId: q.deviceId.toLowerCase() } : {}),
          ...(q.ruleId !== undefined ? { ruleId: q.ruleId.toLowerCase() } : {}),
          ...(after ? { after: { raisedAt: after.at, id: after.id } } : {}),
        });
        const more = page.length > q.limit;
        if (more) page.pop();
        const last = page[page.length - 1];
        return { alarms: page.map(alarmToWire), nextAfter: more && last ? cursor(last.raisedAt, last.id) : null };
      },
    );

    app.get(
      '/api/solutions/:solution/alarm-counts',
      {
        schema: {
          tags,
          summary: 'Active alarms per device (devices without any are left out): the badges of the device table and tiles',
          params: solutionParams,
          response: {
            200: { type: 'object', properties: { devices: { type: 'array', items: { type: 'object', properties: { deviceId: { type: 'string' }, active: { type: 'integer' } } } } } },
            ...errors(400, 401, 404),
          },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        await resolveSolution(store, request.account, solution);
        return { devices: (await store.activeAlarmCounts(request.account.groupId, solution)).map((c) => ({ deviceId: c.deviceId, active: c.count })) };
      },
    );

    const oneAlarm = async (account: Account, solution: string, id: string) => {
      solutionName(solution);
      const pid = pathId(id);
      const a = pid ? await store.getAlarm(account.groupId, solution, pid) : null;
      if (!a) throw new ReefError('ALARM_NOT_FOUND', `no alarm ${id} in solution ${JSON.stringify(solution)}`);
      return a;
    };

    app.get(
      `${alarms}/:id`,
      {
        schema: { tags, summary: 'One alarm with its history', params: idParams, response: { 200: { $ref: 'Alarm#' }, ...errors(400, 401, 404) } },
      },
      async (request) => {
        const { solution, id } = request.params as { solution: string; id: string };
        return alarmToWire(await oneAlarm(request.account, solution, id));
      },
    );

    const step = (name: 'acknowledge' | 'clear') => async (request: { params: unknown; account: Account }) => {
      const { solution, id } = request.params as { solution: string; id: string };
      const a = await oneAlarm(request.account, solution, id);
      const by = actor(request.account);
      const { alarm, changed: did } = await applyStep(store, a.groupId, solution, a.id, (x) =>
        name === 'acknowledge' ? acknowledged(x, by, now()) : cleared(x, now(), { by, note: 'cleared by hand' }),
      );
      if (did) {
        const rule = await store.getAlarmRule(a.groupId, solution, a.ruleId);
        await notifier.notify(name === 'acknowledge' ? 'acknowledged' : 'cleared', alarm, rule);
        // The evaluator starts afresh for this device: a condition that still holds raises again.
        if (name === 'clear') deps.local({ kind: 'alarm', groupId: a.groupId, solution, deviceId: a.deviceId, event: 'cleared', alarm: alarmToWire(alarm) });
      }
      return alarmToWire(alarm);
    };
    app.post(
      `${alarms}/:id/acknowledge`,
      {
        schema: { tags, summary: 'Acknowledge an alarm (again: no change); records who and when', params: idParams, response: { 200: { $ref: 'Alarm#' }, ...errors(400, 401, 404, 409) } },
      },
      step('acknowledge'),
    );
    app.post(
      `${alarms}/:id/clear`,
      {
        schema: { tags, summary: 'Clear an active alarm by hand (a cleared one: no change)', params: idParams, response: { 200: { $ref: 'Alarm#' }, ...errors(400, 401, 404, 409) } },
      },
      step('clear'),
    );

    const deliveries = '/api/solutions/:solution/alarm-deliveries';
    app.get(
      deliveries,
      {
        schema: {
          tags,
          summary: 'Webhook deliveries by status, newest first: status=dead (the default) is the dead-letter list',
          params: solutionParams,
          querystring: {
            type: 'object',
            properties: {
              status: { type: 'string', enum: ['pending', 'delivered', 'dead'], default: 'dead' },
              limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
              after: { type: 'string', maxLength: 80 },
            },
          },
          response: { 200: { type: 'object', properties: { deliveries: { type: 'array', items: { $ref: 'AlarmDelivery#' } }, nextAfter: { type: ['string', 'null'] } } }, ...errors(400, 401, 404) },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        const q = request.query as { status: DeliveryStatus; limit: number; after?: string };
        await resolveSolution(store, request.account, solution);
        const after = q.after === undefined ? undefined : parseCursor(q.after);
        const page = await store.listDeliveries(request.account.groupId, solution, q.status, q.limit + 1, after ? { createdAt: after.at, id: after.id } : undefined);
        const more = page.length > q.limit;
        if (more) page.pop();
        const last = page[page.length - 1];
        return { deliveries: page.map(deliveryToWire), nextAfter: more && last ? cursor(last.createdAt, last.id) : null };
      },
    );

    app.post(
      `${deliveries}/:id/retry`,
      {
        schema: { tags, summary: 'Send a dead letter again (attempts start over)', params: idParams, response: { 200: { $ref: 'AlarmDelivery#' }, ...errors(400, 401, 404, 409) } },
      },
      async (request) => {
        const { solution, id } = request.params as { solution: string; id: string };
        solutionName(solution);
        const pid = pathId(id);
        const d = pid ? await store.getDelivery(request.account.groupId, solution, pid) : null;
        if (!d) throw new ReefError('ALARM_NOT_FOUND', `no webhook delivery ${id} in solution ${JSON.stringify(solution)}`);
        if (d.status !== 'dead') throw new ReefError('CONFLICT', `only a dead delivery can be retried; this one is ${d.status}`);
        const t = now();
        const next = { ...d, status: 'pending' as const, attempts: 0, nextAt: t, updatedAt: t };
        await store.updateDelivery(next);
        notifier.onDelivery?.(next);
        return deliveryToWire(next);
      },
    );
  };
}
