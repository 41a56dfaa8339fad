// `reef account create|list|rotate-secret|disable|enable`: operator commands working on the store
// directly (the same data directory or database as `reef serve`; safe while it runs).
import { loadConfig } from '../config/config.ts';
import { createAccount, rotateSecret, setDisabled } from '../auth/accounts.ts';
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

Common options: --data-dir DIR (REEF_DATA_DIR), --database-url URL (REEF_DATABASE_URL)
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, { values: ['name', 'group', 'join-group', 'id', 'data-dir', 'database-url'], booleans: ['json'] });
  if (!sub || sub === '--help' || args.flags.help) {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (!['create', 'list', 'rotate-secret', 'disable', 'enable'].includes(sub)) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}\n${HELP}`);
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
