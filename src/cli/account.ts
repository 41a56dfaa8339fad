// `reef account create|list|rotate-secret|disable|enable|quota`: operator commands working on the
// store directly (the same data directory or database as `reef serve`; safe while it runs: a
// changed quota reaches running nodes within seconds, QuotaService's cache).
import { loadConfig } from '../config/config.ts';
import { createAccount, findAccount, rotateSecret, setDisabled } from '../auth/accounts.ts';
import { QuotaService, type Quotas } from '../service/quotas.ts';
import { openStore } from '../app/backend.ts';
import { UsageError, parseArgs, printJson, printTable, required } from './args.ts';

const HELP = `Usage:
  reef account create --name NAME [--group NEW_GROUP | --join-group GROUP] [--json]
                                                             create an account (alone, starting a group, or
                                                             joining one); prints its client secret once
  reef account list [--json]                                 list accounts
  reef account rotate-secret --id TENANT_OR_CLIENT_ID [--json]  issue a new client secret
  reef account disable --id TENANT_OR_CLIENT_ID              refuse its logins and tokens
  reef account enable --id TENANT_OR_CLIENT_ID
  reef account quota --id TENANT_OR_CLIENT_ID [--devices N] [--observations N] [--backfill N]
      [--solutions N] [--templates N] [--alarm-rules N] [--json]
                                                             show its quotas and use; set some (N, or
                                                             "default" for the REEF_QUOTA_* value)

Common options: --data-dir DIR (REEF_DATA_DIR), --database-url URL (REEF_DATABASE_URL)
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['name', 'group', 'join-group', 'id', ...QUOTA_FLAGS, 'data-dir', 'database-url'], booleans: ['json'] });
  if (!sub || sub === '--help' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!['create', 'list', 'rotate-secret', 'disable', 'enable', 'quota'].includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
  if (sub !== 'quota' && QUOTA_FLAGS.some((k) => args.flags[k] !== undefined)) throw new UsageError(`--${QUOTA_FLAGS.join(', --')} go with reef account quota`);
  const config = loadConfig(process.env, args.flags);
  const json = args.flags.json === 'true';
  const store = await openStore(config);
  try {
    switch (sub) {
      case 'create': {
        const c = await createAccount(store, {
          name: required(args, 'name'),
          ...(args.flags.group ? { group: args.flags.group } : {}),
          ...(args.flags['join-group'] ? { joinGroup: args.flags['join-group'] } : {}),
        });
        const out = { tenantId: c.tenantId, clientId: c.clientId, clientSecret: c.clientSecret };
        if (json) printJson(out);
        else process.stdout.write(`tenant id:     ${c.tenantId}\nclient id:     ${c.clientId}\nclient secret: ${c.clientSecret}\ngroup:         ${c.groupId}\n(the secret is shown only now)\n`);
        return 0;
      }
      case 'list': {
        const rows = (await store.listAccounts()).map((a) => ({
          tenantId: a.tenantId,
          name: a.name,
          group: a.groupId,
          clientId: a.clientId,
          disabled: a.disabled,
          created: new Date(a.createdAt).toISOString(),
        }));
        if (json) printJson(rows);
        else printTable(rows, ['tenantId', 'name', 'group', 'clientId', 'disabled', 'created']);
        return 0;
      }
      case 'rotate-secret': {
        const r = await rotateSecret(store, required(args, 'id'));
        if (json) printJson(r);
        else process.stdout.write(`client id:     ${r.clientId}\nclient secret: ${r.clientSecret}\n(the old secret no longer works, nor do tokens issued with it)\n`);
        return 0;
      }
      case 'quota': {
        const changes = quotaChanges(args.flags);
        const account = await findAccount(store, required(args, 'id'));
        const quotas = new QuotaService(store, config.quotas);
        if (Object.keys(changes).length) await quotas.set(account.tenantId, changes);
        const limits = await quotas.limits(account.tenantId);
        const usage = await quotas.usage(account.tenantId);
        if (json) printJson({ tenantId: account.tenantId, limits, usage });
        else
          process.stdout.write(
            `tenant id:    ${account.tenantId}\n` +
              `devices:      ${usage.devices} of ${limits.devices}\n` +
              `observations: ${usage.observations} of ${limits.observations} stored (${usage.countedAt ? `as of the last count, ${usage.countedAt}` : 'not counted yet'})\n` +
              `backfill:     ${limits.backfill} per simulation\n` +
              `solutions:    ${limits.solutions}, device templates: ${limits.templates}, alarm rules: ${limits.alarmRules} (per group)\n`,
          );
        return 0;
      }
      default: {
        const a = await setDisabled(store, required(args, 'id'), sub === 'disable');
        if (json) printJson({ tenantId: a.tenantId, disabled: a.disabled });
        else process.stdout.write(`${a.tenantId} ${a.disabled ? 'disabled' : 'enabled'}\n`);
        return 0;
      }
    }
  } finally {
    await store.close();
  }
}

const QUOTA_FLAGS = ['devices', 'observations', 'backfill', 'solutions', 'templates', 'alarm-rules'] as const;
const QUOTA_KEY: Record<(typeof QUOTA_FLAGS)[number], keyof Quotas> = {
  devices: 'devices',
  observations: 'observations',
  backfill: 'backfill',
  solutions: 'solutions',
  templates: 'templates',
  'alarm-rules': 'alarmRules',
};

/** --devices, --observations, --backfill, --solutions, --templates, --alarm-rules: a whole number, or "default" (null: back to REEF_QUOTA_*). */
function quotaChanges(flags: Record<string, string>): { [K in keyof Quotas]?: number | null } {
  const out: { [K in keyof Quotas]?: number | null } = {};
  for (const k of QUOTA_FLAGS) {
    const v = flags[k];
    if (v === undefined) continue;
    if (v === 'default') out[QUOTA_KEY[k]] = null;
    else if (/^\d{1,15}$/.test(v)) out[QUOTA_KEY[k]] = Number(v);
    else throw new UsageError(`--${k} must be a whole number ≥ 0, or "default"`);
  }
  return out;
}
