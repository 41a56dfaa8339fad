// `reef provision --client-id ID --mac MAC`: what order fulfilment does (seed §3): a NICDevKit in
// the account's sandbox. The same operation over HTTP is POST /api/admin/provision.
import { loadConfig } from '../config/config.ts';
import { findAccount } from '../auth/accounts.ts';
import { toWireDevice } from '../core/types.ts';
import { provisionKit } from '../service/devices.ts';
import { openStore } from '../store/open.ts';
import { parseArgs, printJson, required } from './args.ts';

const HELP = `Usage: reef provision --client-id ID --mac MAC [--json] [--data-dir DIR | --database-url URL]

Provisions a dev kit with the 16-hex-digit MAC to the account's sandbox solution.
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, ['client-id', 'mac', 'json', 'data-dir', 'database-url']);
  if (args.flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const clientId = required(args, 'client-id');
  const mac = required(args, 'mac');
  const config = loadConfig(process.env, argv);
  const store = await openStore(config);
  try {
    const account = await findAccount(store, clientId);
    const d = toWireDevice(await provisionKit(store, null, account, mac));
    if (args.flags.json === 'true') printJson(d);
    else process.stdout.write(`provisioned ${d.provisioningInfo!.vendorMacAddress} as device ${d.id} in sandbox of ${account.tenantId}\n`);
    return 0;
  } finally {
    await store.close();
  }
}
