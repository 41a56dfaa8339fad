// What src/mqtt needs of the running service and what it gives back, as `reef serve` components
// are put together (src/server.ts Services and Component, mirrored structurally: nothing here
// imports the composition root). When those contracts move to a module below the features, this
// is the one file to point at it.
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/accounts.ts';
import type { Config } from '../config/config.ts';
import type { EventBus } from '../events/bus.ts';
import type { QuotaService } from '../service/quotas.ts';
import type { Store } from '../store/store.ts';

export interface MqttServices {
  config: Config;
  store: Store;
  events: EventBus;
  auth: Authenticator;
  quotas: QuotaService;
  log: Logger;
}

export interface MqttDemo {
  tenantId: string;
  clientId: string;
}

/** A part of `reef serve` (src/server.ts Component). */
export interface ServeComponent {
  name: string;
  apiPlugin?: FastifyPluginAsync;
  plugin?: FastifyPluginAsync;
  start?(): Promise<void>;
  stop?(): Promise<void>;
  banner?(url: string): string[];
}
