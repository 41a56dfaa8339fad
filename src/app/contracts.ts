// What the composition root (src/server.ts) hands to the parts it plugs in, and what a part gives
// back. It lives below the features so that a feature (gateway, sim, web...) can name these types
// without importing the composition root: dependencies point inward (docs/architecture.md).
import type { QuotaService } from '../service/quotas.ts';
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/accounts.ts';
import type { TokenService } from '../auth/tokens.ts';
import type { Config } from '../config/config.ts';
import type { EventBus } from '../events/bus.ts';
import type { Leadership } from '../jobs/leader.ts';
import type { Store } from '../store/store.ts';

export interface Services {
  config: Config;
  store: Store;
  events: EventBus;
  auth: Authenticator;
  tokens: TokenService;
  /** Background jobs run where this says (one node at a time on PostgreSQL). */
  leadership: Leadership;
  /** Per-account quotas (devices, stored observations, simulation backfill). */
  quotas: QuotaService;
  log: Logger;
}

/** A part of the running service (gateway, simulations...) with its own start and stop. */
export interface Component {
  name: string;
  /** HTTP routes needing an authenticated caller. */
  apiPlugin?: FastifyPluginAsync;
  /** HTTP routes outside authentication. */
  plugin?: FastifyPluginAsync;
  start?(): Promise<void>;
  stop?(): Promise<void>;
  /** Lines for the start-up banner of `reef serve` (after start), e.g. how to reach the demo kit. */
  banner?(url: string): string[];
}

export interface DemoCredentials {
  tenantId: string;
  clientId: string;
  clientSecret: string;
}

export type ComponentFactory = (s: Services, demo: DemoCredentials | null) => Promise<Component | null>;
