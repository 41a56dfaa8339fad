// `reef alarms ...`: alarm rules, alarms and webhook dead letters of a solution, through the SDK
// against a running service (the endpoint and credentials `reef login` stored). docs/alarms.md.
import { UsageError, parseArgs, printJson, printTable } from './args.ts';
import { connect, flagInt, runClient } from './client-config.ts';
import type { Alarm, AlarmRule, NewAlarmRule } from '../sdk/index.ts';

const HELP = `Usage:
  reef alarms rules [--device ID] [--json]          the solution's rules (with --device: those watching it)
  reef alarms rule ID [--json]                      one rule
  reef alarms add --condition above|below|outside|rate|silence [rule options] [--json]
  reef alarms remove RULE_ID                        delete a rule (its active alarms are cleared)
  reef alarms list [--status active|raised,...] [--device ID] [--rule ID] [--limit N] [--json]
  reef alarms ack ALARM_ID                          acknowledge an alarm
  reef alarms clear ALARM_ID                        clear an active alarm by hand
  reef alarms dead-letters [--json]                 webhook deliveries that failed every attempt
  reef alarms retry DELIVERY_ID                     send a dead letter again
  reef alarms webhook [URL | --remove] [--json]     the solution's webhook (for rules without their own):
                                                    show it, set it (the secret is printed once) or remove it

Rule options:
  --device ID          one device (default: every device of the solution)
  --template ID        every device naming this device template (reef templates list)
  --field PATH         numeric field (default temperature), e.g. accelerometer.z
  --threshold N        above / below
  --low N --high N     outside: the normal range
  --rate N             rate: change per minute that raises; --direction rise|fall|any
  --silence DURATION   silence: no observation for this long, e.g. 15m
  --for DURATION       how long the condition must hold, e.g. 10m (default 0)
  --hysteresis N       how far back inside the normal range to clear
  --unit C|F           the unit thresholds are in (temperature)
  --severity LEVEL     critical, major (default), minor, warning
  --name TEXT          a label
  --webhook URL        POST alarm events here, signed; the secret is printed once

Common options:
  --solution NAME   solution to address (default: the one given to reef login, else sandbox)
  --endpoint URL    service to call (default: the one given to reef login; REEF_ENDPOINT)
  --json            machine-readable output

Exit codes: 0 ok, 1 failure (the service refused, or could not be reached), 2 usage.
`;

const SUBS = ['rules', 'rule', 'add', 'remove', 'list', 'ack', 'clear', 'dead-letters', 'retry', 'webhook'];
const RULE_FLAGS = ['device', 'template', 'field', 'threshold', 'low', 'high', 'rate', 'direction', 'silence', 'for', 'hysteresis', 'unit', 'severity', 'name', 'webhook', 'condition'];

function number(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v === 'true' || v.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number`);
  return n;
}

function text(v: string | undefined, name: string): string | undefined {
  if (v === 'true') throw new UsageError(`--${name} needs a value`);
  return v;
}

/** The rule from flags; the service validates the combination and names any bad field. */
function ruleFromFlags(f: Record<string, string>): NewAlarmRule {
  const condition = text(f.condition, 'condition');
  if (!condition) throw new UsageError('--condition is required: above, below, outside, rate or silence');
  const out: Record<string, unknown> = { condition };
  const put = (k: string, v: unknown) => {
    if (v !== undefined) out[k] = v;
  };
  put('deviceId', text(f.device, 'device'));
  put('templateId', text(f.template, 'template'));
  put('field', text(f.field, 'field'));
  put('threshold', number(f.threshold, 'threshold'));
  put('low', number(f.low, 'low'));
  put('high', number(f.high, 'high'));
  put('ratePerMinute', number(f.rate, 'rate'));
  put('direction', text(f.direction, 'direction'));
  put('silence', text(f.silence, 'silence'));
  put('duration', text(f.for, 'for'));
  put('hysteresis', number(f.hysteresis, 'hysteresis'));
  put('unit', text(f.unit, 'unit'));
  put('severity', text(f.severity, 'severity'));
  put('name', text(f.name, 'name'));
  const hook = text(f.webhook, 'webhook');
  if (hook) out.webhook = { url: hook };
  return out as unknown as NewAlarmRule;
}

function condition(r: AlarmRule): string {
  const u = r.unit ? ` °${r.unit}` : '';
  switch (r.condition) {
    case 'above':
    case 'below':
      return `${r.condition} ${r.threshold}${u}`;
    case 'outside':
      return `outside ${r.low}..${r.high}${u}`;
    case 'rate':
      return `rate ${r.direction} ${r.ratePerMinute}${u}/min`;
    default:
      return `silence ${Math.round((r.silenceMs ?? 0) / 1000)} s`;
  }
}

const ruleRow = (r: AlarmRule) => ({
  id: r.id,
  name: r.name,
  device: r.deviceId ?? (r.templateId ? `(template ${r.templateId})` : '(all)'),
  condition: condition(r),
  for: r.durationMs ? `${r.durationMs / 1000} s` : '',
  hysteresis: r.hysteresis || '',
  severity: r.severity,
  enabled: r.enabled ? 'yes' : 'no',
  webhook: r.webhook?.url ?? '',
});
const RULE_COLS = ['id', 'name', 'device', 'condition', 'for', 'hysteresis', 'severity', 'enabled', 'webhook'];

const alarmRow = (a: Alarm) => ({
  id: a.id,
  status: a.status,
  severity: a.severity,
  device: a.deviceId,
  rule: a.rule.name,
  raised: a.raisedAt,
  reading: a.reading ? `${a.reading.value}${a.reading.unit ? ` °${a.reading.unit}` : ''}` : '',
  acknowledged: a.acknowledgedBy ? `${a.acknowledgedBy.name} ${a.acknowledgedAt}` : '',
});
const ALARM_COLS = ['id', 'status', 'severity', 'device', 'rule', 'raised', 'reading', 'acknowledged'];

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: [...RULE_FLAGS, 'status', 'rule', 'limit', 'solution', 'endpoint'], booleans: ['json', 'remove'] });
  if (!sub || sub === '--help' || sub === '-h' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!SUBS.includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  const json = args.flags.json === 'true';
  const needsId = ['rule', 'remove', 'ack', 'clear', 'retry'].includes(sub);
  if (needsId && args.positional.length !== 1) throw new UsageError(`${sub} needs one id`);
  if (sub === 'webhook' && (args.positional.length > 1 || (args.positional.length && args.flags.remove === 'true'))) throw new UsageError('webhook takes one URL, or --remove');
  if (!needsId && sub !== 'webhook' && args.positional.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positional[0])}`);
  const id = args.positional[0]!;
  const rule = sub === 'add' ? ruleFromFlags(args.flags) : null;
  const limit = flagInt(args, 'limit', 1, 1000);

  return runClient('alarms', async () => {
    const { client, conn } = connect(process.env, args);
    switch (sub) {
      case 'rules': {
        const list = await client.listAlarmRules(args.flags.device ? { deviceId: args.flags.device } : {});
        if (json) printJson(list);
        else if (!list.length) process.stdout.write(`no alarm rules in solution ${conn.solution}\n`);
        else printTable(list.map(ruleRow), RULE_COLS);
        return 0;
      }
      case 'rule': {
        const r = await client.getAlarmRule(id);
        if (json) printJson(r);
        else printTable([ruleRow(r)], RULE_COLS);
        return 0;
      }
      case 'add': {
        const r = await client.createAlarmRule(rule!);
        if (json) printJson(r);
        else {
          process.stdout.write(`${r.id}\n`);
          if (r.webhook?.secret) process.stdout.write(`webhook signing secret (shown once): ${r.webhook.secret}\n`);
        }
        return 0;
      }
      case 'remove': {
        await client.deleteAlarmRule(id);
        if (json) printJson({ deleted: id.toLowerCase() });
        else process.stdout.write(`deleted ${id.toLowerCase()}\n`);
        return 0;
      }
      case 'list': {
        const status = args.flags.status && args.flags.status !== 'true' ? (args.flags.status.split(',') as Alarm['status'][]) : undefined;
        const page = await client.listAlarms({
          ...(status ? { status } : {}),
          ...(args.flags.device ? { deviceId: args.flags.device } : {}),
          ...(args.flags.rule ? { ruleId: args.flags.rule } : {}),
          ...(limit ? { limit } : {}),
        });
        if (json) printJson(page);
        else if (!page.alarms.length) process.stdout.write(`no alarms in solution ${conn.solution}\n`);
        else printTable(page.alarms.map(alarmRow), ALARM_COLS);
        return 0;
      }
      case 'ack':
      case 'clear': {
        const a = sub === 'ack' ? await client.acknowledgeAlarm(id) : await client.clearAlarm(id);
        if (json) printJson(a);
        else process.stdout.write(`${a.id} ${a.status}\n`);
        return 0;
      }
      case 'dead-letters': {
        const page = await client.listAlarmDeliveries({ status: 'dead', ...(limit ? { limit } : {}) });
        if (json) printJson(page);
        else if (!page.deliveries.length) process.stdout.write('no dead letters\n');
        else
          printTable(
            page.deliveries.map((d) => ({ id: d.id, alarm: d.alarmId, url: d.url, attempts: d.attempts, error: d.lastError ?? '', at: d.updatedAt })),
            ['id', 'alarm', 'url', 'attempts', 'error', 'at'],
          );
        return 0;
      }
      case 'webhook': {
        if (args.flags.remove === 'true') {
          await client.deleteAlarmWebhook();
          if (json) printJson({ webhook: null });
          else process.stdout.write('solution webhook removed\n');
          return 0;
        }
        const url = args.positional[0];
        const w = url ? await client.setAlarmWebhook(url) : await client.getAlarmWebhook();
        if (json) printJson({ webhook: w });
        else if (!w) process.stdout.write(`no solution webhook in solution ${conn.solution}\n`);
        else {
          process.stdout.write(`${w.url}\n`);
          if (w.secret) process.stdout.write(`webhook signing secret (shown once): ${w.secret}\n`);
        }
        return 0;
      }
      default: {
        const d = await client.retryAlarmDelivery(id);
        if (json) printJson(d);
        else process.stdout.write(`${d.id} ${d.status}\n`);
        return 0;
      }
    }
  });
}
