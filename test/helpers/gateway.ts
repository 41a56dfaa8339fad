// Shared set-up of the gateway tests: a real Reef service with the gateway on an ephemeral UDP
// port, software dev kits (src/device) announcing to it, libcoap's coap-client and a node CoAP
// client (src/coap) over real UDP on 127.0.0.1.
import { execFile } from 'node:child_process';
import { testConfig, type Config } from '../../src/config/config.ts';
import { CoapEndpoint, type Peer } from '../../src/coap/index.ts';
import type { DeviceRecord } from '../../src/core/types.ts';
import { loadDeviceConfig, type DeviceConfig } from '../../src/device/config.ts';
import { Kit } from '../../src/device/kit.ts';
import { gatewayComponent, type GatewayComponent } from '../../src/gateway/component.ts';
import type { GatewayOptions } from '../../src/gateway/gateway.ts';
import { proxyUri } from '../../src/gateway/gateway.ts';
import type { ComponentFactory } from '../../src/app/contracts.ts';
import { provisionKit } from '../../src/service/devices.ts';
import { freePort as freeLoopbackPort } from './ports.ts';
import { startTestServer, type TestServer } from './server.ts';
import { waitFor } from './wait.ts';

export const DOMAIN = 'mesh.reef.local';

export interface GatewayHarness {
  t: TestServer;
  gw: GatewayComponent;
  /** The gateway's UDP address. */
  addr: Peer;
  kits: Kit[];
  /** Provisions a kit to the account of `tenantId` and starts it, announcing to the gateway; waits until the gateway knows it. */
  kit(tenantId: string, mac: string, over?: Partial<DeviceConfig>): Promise<{ kit: Kit; device: DeviceRecord }>;
  close(): Promise<void>;
}

export async function startGateway(
  opts: {
    gateway?: Partial<Config['gateway']>;
    options?: Partial<GatewayOptions>;
    config?: Partial<Config>;
    log?: import('pino').Logger;
    /** Components started before the gateway (the MQTT broker), so they listen before the first kit reading. */
    extraComponents?: ComponentFactory[];
  } = {},
): Promise<GatewayHarness> {
  const factory = gatewayComponent(opts.options ?? {});
  const gateway = { ...testConfig({ dataDir: '/nonexistent' }).gateway, enabled: true, port: 0, deadlineMs: 500, ...(opts.gateway ?? {}) };
  const t = await startTestServer({ ...(opts.config ?? {}), gateway }, [...(opts.extraComponents ?? []), factory], opts.log ? { log: opts.log } : {});
  const gw = factory.last!;
  const addr = gw.address();
  const kits: Kit[] = [];
  const h: GatewayHarness = {
    t,
    gw,
    addr,
    kits,
    async kit(tenantId, mac, over = {}) {
      const account = (await t.services.store.getAccountByTenantId(tenantId))!;
      const { device, kitKey } = await provisionKit(t.services.store, null, account, mac);
      const kit = new Kit(
        loadDeviceConfig({ mac, host: '127.0.0.1', port: 0, gateway: { address: addr.address, port: addr.port }, monitorWindowMs: 0, logLevel: 0, periodMs: 100, key: kitKey, ...over }),
      );
      kits.push(kit);
      await kit.start();
      await until(() => gw.gateway.kits.get(mac) !== undefined, `the gateway learns kit ${mac}`);
      return { kit, device };
    },
    async close() {
      await Promise.all(kits.map((k) => k.stop().catch(() => undefined)));
      await t.close();
    },
  };
  return h;
}

/** The shared waitFor (test/helpers/wait.ts) in the argument order of the gateway tests. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, capMs = 15_000): Promise<void> {
  await waitFor(what, cond, capMs);
}

/** A UDP port that is free right now, for coap-client's fixed source port (-p): a session is bound to it. */
export function freePort(): Promise<number> {
  return freeLoopbackPort('udp');
}

export interface CoapClientResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr together: libcoap prints error responses ("4.01 ...") on stderr. */
  out: string;
}

/** Runs libcoap's coap-client (the no-TLS build) with the given arguments. */
export function coapClient(args: string[]): Promise<CoapClientResult> {
  return new Promise((resolve) => {
    execFile('coap-client-notls', args, { encoding: 'utf8', timeout: 30_000 }, (e, stdout, stderr) => {
      resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr, out: stdout + stderr });
    });
  });
}

/** coap-client through the gateway as a proxy, from local port `port`. */
export function viaGateway(h: GatewayHarness, port: number, mac: string, pathAndQuery: string, extra: string[] = []): Promise<CoapClientResult> {
  return coapClient(['-p', String(port), '-B', '5', ...extra, '-P', `coap://${h.addr.address}:${h.addr.port}`, proxyUri(mac, DOMAIN, pathAndQuery)]);
}

export function openSession(h: GatewayHarness, port: number, token: string): Promise<CoapClientResult> {
  return coapClient(['-p', String(port), '-B', '5', '-m', 'post', '-t', '0', '-e', token, `coap://${h.addr.address}:${h.addr.port}/sessions`]);
}

export function closeSession(h: GatewayHarness, port: number): Promise<CoapClientResult> {
  return coapClient(['-p', String(port), '-B', '5', '-m', 'delete', `coap://${h.addr.address}:${h.addr.port}/sessions`]);
}

/** A node CoAP client on its own UDP socket (one session address). */
export async function nodeClient(): Promise<CoapEndpoint> {
  return CoapEndpoint.create({ host: '127.0.0.1', port: 0 });
}
