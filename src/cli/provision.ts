// `reef provision --client-id ID --mac MAC`: what order fulfilment does (seed §3): a NICDevKit in
// the account's sandbox, and its kit key, printed once (the kit proves itself with it when it
// announces itself to the gateway: docs/security.md "Kits"). `reef provision --rekey --mac MAC`
// issues a new key for a provisioned kit (the old one stops working). The same operations over
// HTTP are POST /api/admin/provision and POST /api/admin/kits/{mac}/key.
import { loadConfig } from '../config/config.ts';
import { findAccount } from '../auth/accounts.ts';
import { ReefError } from '../core/errors.ts';
import { toWireDevice } from '../core/types.ts';
import { macAddress } from '../core/validate.ts';
import { provisionKit } from '../service/devices.ts';
import { QuotaService } from '../service/quotas.ts';
import { issueKitKey } from '../service/kit-keys.ts';
import { openStore } from '../app/backend.ts';
import { parseArgs, printJson, required } from './args.ts';

const HELP = `Usage: reef provision --client-id ID --mac MAC [--json] [--data-dir DIR | --database-url URL]
       reef provision --rekey --mac MAC [--json] [--data-dir DIR | --database-url URL]

Provisions a dev kit with the 16-hex-digit MAC to the account's sandbox solution and prints its kit
key once: give it to the kit (reef device --key KEY). Reef keeps no copy it could print again;
--rekey issues a new key for a provisioned kit, and the previous one stops working.
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['client-id', 'mac', 'data-dir', 'database-url'], booleans: ['json', 'rekey'] });
  if (args.flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const rekey = args.flags.rekey === 'true';
  const clientId = rekey ? '' : required(args, 'client-id');
  const mac = macAddress(required(args, 'mac'), 'mac');
  const config = loadConfig(process.env, args.flags);
  const store = await openStore(config);
  try {
    if (rekey) {
      if (!(await store.getDeviceByMac(mac))) throw new ReefError('DEVICE_NOT_FOUND', `no dev kit with MAC ${mac} is provisioned`, { field: 'mac' });
      const kitKey = await issueKitKey(store, mac);
      if (args.flags.json === 'true') printJson({ mac, kitKey });
      else process.stdout.write(`new kit key for ${mac} (the previous one no longer works):\n  ${kitKey}\nrun the kit with: reef device --mac ${mac} --key ${kitKey}\n`);
      return 0;
    }
    const account = await findAccount(store, clientId);
    // The account's device quota holds here as on the admin API (raise it with reef account quota).
    const { devices: maxDevices } = await new QuotaService(store, config.quotas).limits(account.tenantId);
    const { device, kitKey } = await provisionKit(store, null, account, mac, maxDevices);
    const d = toWireDevice(device);
    if (args.flags.json === 'true') printJson({ ...d, kitKey });
    else
      process.stdout.write(
        `provisioned ${d.provisioningInfo!.ssniMacAddress} as device ${d.id} in sandbox of ${account.tenantId}\n` +
          `kit key (shown once; reef provision --rekey issues a new one):\n  ${kitKey}\n` +
          `run the kit with: reef device --mac ${mac} --key ${kitKey} --gateway 127.0.0.1:${config.gateway.port}\n`,
      );
    return 0;
  } finally {
    await store.close();
  }
}
