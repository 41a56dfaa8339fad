// `reef serve`: the whole platform on one process. Config from REEF_* variables and flags, checked
// once; SIGTERM/SIGINT drain in-flight requests and close the store.
import { SETTINGS, loadConfig } from '../config/config.ts';
import { startServer, type ComponentFactory } from '../server.ts';
import { parseArgs } from './args.ts';

// The gateway component made for this process; the demo kit announces to it.
let gateway: import('../gateway/component.ts').GatewayFactory | undefined;

/**
 * Parts of the service beyond the HTTP API; each is optional and loaded on demand. Started in this
 * order and stopped in reverse, so the demo kit stops before the gateway it announces to.
 */
export const COMPONENTS: { name: string; load: () => Promise<ComponentFactory> }[] = [
  { name: 'web', load: async () => (await import('../web/component.ts')).webComponent },
  // Before the producers: alarms start listening first and stop after them.
  { name: 'alarms', load: async () => (await import('../alarms/component.ts')).alarmComponent },
  { name: 'simulations', load: async () => (await import('../sim/component.ts')).simulationComponent },
  // The broker before the gateway: it is listening when the first kit payload bubbles up.
  { name: 'mqtt', load: async () => (await import('../mqtt/component.ts')).mqttComponent() },
  { name: 'gateway', load: async () => (gateway = (await import('../gateway/component.ts')).gatewayComponent()) },
  { name: 'demo kit', load: async () => (await import('../demo/component.ts')).demoKitComponent(() => gateway?.last) },
];

const HELP = `Usage: reef serve [options]

Runs the Reef platform service. Every option can also be set by its environment variable.

${SETTINGS.map((s) => `  --${s.flag.padEnd(22)} ${s.env.padEnd(26)} ${s.doc} (default: ${s.def || 'unset'})`).join('\n')}
`;

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: SETTINGS.map((s) => s.flag) });
  if (args.flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const config = loadConfig(process.env, args.flags);
  const components = await Promise.all(COMPONENTS.map((c) => c.load()));
  const server = await startServer(config, { components });
  const log = server.services.log;
  log.info({ url: server.url, store: server.services.store.kind }, 'reef is listening');
  const lines = [`Reef is running at ${server.url}  (store: ${server.services.store.kind === 'sqlite' ? config.dataDir : 'postgres'})`];
  lines.push(`  API docs:  ${server.url}/api/docs`);
  // Where Prometheus scrapes this node (docs/operations.md "Metrics and logs").
  const metrics = server.metricsUrl ?? (config.metrics.token ? `${server.url}/metrics` : null);
  if (metrics) lines.push(`  Metrics:   ${metrics}${config.metrics.token ? '  (Authorization: Bearer <REEF_METRICS_TOKEN>)' : ''}`);
  if (server.tls) {
    lines.push(`  TLS certificate: ${server.tls.certFile}${server.tls.selfSigned ? ' (self-signed; give it to clients as their trusted certificate)' : ''}`);
    lines.push(`    SHA-256 fingerprint: ${server.tls.fingerprint256}, valid to ${server.tls.validTo}`);
  }
  const curlTrust = server.tls?.selfSigned ? ` --cacert ${server.tls.certFile}` : '';
  if (server.demo) {
    lines.push('  Demo account (keep the secret private; it is stored only in the data directory):');
    lines.push(`    client id:     ${server.demo.clientId}`);
    lines.push(`    client secret: ${server.demo.clientSecret}`);
    lines.push(`  Try: curl -s${curlTrust} -X POST ${server.url}/api/tokens -H 'content-type: application/json' \\`);
    lines.push(`         -d '{"clientId":"${server.demo.clientId}","clientSecret":"${server.demo.clientSecret}"}'`);
  }
  for (const c of server.components) lines.push(...(c.banner?.(server.url) ?? []));
  process.stdout.write(lines.join('\n') + '\n');

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'shutting down');
      server.close().then(resolve, (err) => {
        log.error({ err }, 'shutdown failed');
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}
