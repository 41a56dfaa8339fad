// ReefClient's calls for alarms (docs/alarms.md): rules, alarms and their steps, per-device
// counts, webhook deliveries and the solution's webhook.
import { SimulationCalls } from './simulations.ts';
import { seg, type CallOptions } from './transport.ts';
import type { Alarm, AlarmDelivery, AlarmQuery, AlarmRule, NewAlarmRule, SolutionWebhook } from './types.ts';

export abstract class AlarmCalls extends SimulationCalls {
  /** The solution's alarm rules; with deviceId, those that watch that device. */
  async listAlarmRules(opts: CallOptions & { deviceId?: string } = {}): Promise<AlarmRule[]> {
    return (await this.request<{ rules: AlarmRule[] }>('GET', `${this.sol(opts)}/alarm-rules`, { query: { deviceId: opts.deviceId }, idempotent: true, signal: opts.signal })).data.rules;
  }

  /** Creates a rule; a webhook's signing secret is in this answer only (`webhook.secret`). */
  async createAlarmRule(rule: NewAlarmRule, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('POST', `${this.sol(opts)}/alarm-rules`, { body: rule, idempotent: false, signal: opts.signal })).data;
  }

  async getAlarmRule(id: string, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('GET', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Replaces a rule (a rule read with getAlarmRule may be sent back changed). */
  async updateAlarmRule(id: string, rule: NewAlarmRule | AlarmRule, opts: CallOptions = {}): Promise<AlarmRule> {
    return (await this.request<AlarmRule>('PUT', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { body: rule, idempotent: true, signal: opts.signal })).data;
  }

  /** Deletes a rule; its active alarms are cleared. */
  async deleteAlarmRule(id: string, opts: CallOptions = {}): Promise<void> {
    await this.request('DELETE', `${this.sol(opts)}/alarm-rules/${seg(id)}`, { idempotent: true, signal: opts.signal });
  }

  /** One page of alarms, newest raised first; pass nextAfter back as `after` for the next. */
  async listAlarms(q: AlarmQuery & CallOptions = {}): Promise<{ alarms: Alarm[]; nextAfter: string | null }> {
    const status = Array.isArray(q.status) ? q.status.join(',') : q.status;
    return (
      await this.request<{ alarms: Alarm[]; nextAfter: string | null }>('GET', `${this.sol(q)}/alarms`, {
        query: { status, deviceId: q.deviceId, ruleId: q.ruleId, limit: q.limit, after: q.after },
        idempotent: true,
        signal: q.signal,
      })
    ).data;
  }

  /** Every alarm matching the query, across pages. */
  async *alarms(q: Omit<AlarmQuery, 'after'> & CallOptions = {}): AsyncGenerator<Alarm> {
    let after: string | undefined;
    for (;;) {
      const page = await this.listAlarms({ ...q, ...(after ? { after } : {}) });
      yield* page.alarms;
      if (!page.nextAfter) return;
      after = page.nextAfter;
    }
  }

  async getAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('GET', `${this.sol(opts)}/alarms/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Acknowledges an alarm (again: no change). Idempotent. */
  async acknowledgeAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('POST', `${this.sol(opts)}/alarms/${seg(id)}/acknowledge`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Clears an active alarm by hand. Idempotent. */
  async clearAlarm(id: string, opts: CallOptions = {}): Promise<Alarm> {
    return (await this.request<Alarm>('POST', `${this.sol(opts)}/alarms/${seg(id)}/clear`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Active alarms per device (devices without any are left out). */
  async alarmCounts(opts: CallOptions = {}): Promise<{ deviceId: string; active: number }[]> {
    return (await this.request<{ devices: { deviceId: string; active: number }[] }>('GET', `${this.sol(opts)}/alarm-counts`, { idempotent: true, signal: opts.signal })).data.devices;
  }

  /** Webhook deliveries in one status (default dead: the dead-letter list), newest first. */
  async listAlarmDeliveries(q: CallOptions & { status?: 'pending' | 'delivered' | 'dead'; limit?: number; after?: string } = {}): Promise<{ deliveries: AlarmDelivery[]; nextAfter: string | null }> {
    return (
      await this.request<{ deliveries: AlarmDelivery[]; nextAfter: string | null }>('GET', `${this.sol(q)}/alarm-deliveries`, {
        query: { status: q.status, limit: q.limit, after: q.after },
        idempotent: true,
        signal: q.signal,
      })
    ).data;
  }

  /** The solution's webhook (null: none), used for every rule without its own. */
  async getAlarmWebhook(opts: CallOptions = {}): Promise<SolutionWebhook | null> {
    return (await this.request<{ webhook: SolutionWebhook | null }>('GET', `${this.sol(opts)}/alarm-webhook`, { idempotent: true, signal: opts.signal })).data.webhook;
  }

  /** Sets the solution's webhook; a new URL's signing secret is in this answer only (`secret`). */
  async setAlarmWebhook(url: string, opts: CallOptions = {}): Promise<SolutionWebhook> {
    return (await this.request<{ webhook: SolutionWebhook }>('PUT', `${this.sol(opts)}/alarm-webhook`, { body: { url }, idempotent: true, signal: opts.signal })).data.webhook;
  }

  /** Removes the solution's webhook (rules with their own keep theirs). */
  async deleteAlarmWebhook(opts: CallOptions = {}): Promise<void> {
    await this.request('DELETE', `${this.sol(opts)}/alarm-webhook`, { idempotent: true, signal: opts.signal });
  }

  /** Sends a dead letter again. */
  async retryAlarmDelivery(id: string, opts: CallOptions = {}): Promise<AlarmDelivery> {
    return (await this.request<AlarmDelivery>('POST', `${this.sol(opts)}/alarm-deliveries/${seg(id)}/retry`, { idempotent: false, signal: opts.signal })).data;
  }
}
