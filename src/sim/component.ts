// The simulation part of `reef serve`: the simulations API, the runs of this node, and on the
// first start a small live simulation for the demo account so a new user sees devices at once.
import type { Component, ComponentFactory, DemoCredentials, Services } from '../app/contracts.ts';
import { simulationRoutes } from './routes.ts';
import type { Leadership } from '../jobs/leader.ts';
import type { SimLimits } from './params.ts';
import { SimulationManager } from './simulations.ts';

export interface SimulationComponentOptions {
  limits?: Partial<SimLimits>;
  /** Defaults to the service's leadership (always this node on SQLite; an advisory lock on PostgreSQL). */
  leadership?: Leadership;
  now?: () => number;
  reconcileMs?: number;
  maxCatchUpMs?: number;
  /** The demo simulation's request (tests shrink it); null disables it. */
  demo?: Record<string, unknown> | null;
  /** Receives the manager once made (tests, embedding). */
  onManager?: (m: SimulationManager) => void;
}

/** The demo: five outdoor devices around Lisbon, every 10 s, with a day of history. */
export const DEMO_SIMULATION = {
  name: 'Demo: Lisbon',
  devices: 5,
  interval: '10s',
  backfill: '1d',
  area: { center: { latitude: 38.7223, longitude: -9.1393 }, radiusKm: 15 },
  seed: 'reef-demo',
  profile: 'outdoor',
};

async function startDemo(s: Services, manager: SimulationManager, demo: DemoCredentials, request: Record<string, unknown>): Promise<void> {
  const account = await s.store.getAccountByTenantId(demo.tenantId);
  if (!account || account.disabled) return;
  // First start only: once the demo account has any simulation (even a stopped one), leave it be.
  if ((await manager.countForGroup(account.groupId)) > 0) return;
  const sim = await manager.create(account, request);
  s.log.info({ simulation: sim.id, devices: sim.devices }, 'demo simulation started');
}

export function createSimulationComponent(opts: SimulationComponentOptions = {}): ComponentFactory {
  return async (s: Services, demo: DemoCredentials | null): Promise<Component> => {
    const leadership = opts.leadership ?? s.leadership;
    const manager = new SimulationManager({
      store: s.store,
      events: s.events,
      log: s.log.child({ component: 'sim' }),
      quotas: s.quotas,
      ...(opts.limits ? { limits: opts.limits } : {}),
      leadership,
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.reconcileMs ? { reconcileMs: opts.reconcileMs } : {}),
      ...(opts.maxCatchUpMs ? { maxCatchUpMs: opts.maxCatchUpMs } : {}),
    });
    opts.onManager?.(manager);
    const demoRequest = opts.demo === undefined ? DEMO_SIMULATION : opts.demo;
    return {
      name: 'simulations',
      apiPlugin: simulationRoutes(manager),
      async start() {
        await manager.start();
        if (demo && demoRequest) {
          await startDemo(s, manager, demo, demoRequest).catch((err) => s.log.warn({ err }, 'the demo simulation could not be started'));
        }
      },
      async stop() {
        await manager.close();
      },
    };
  };
}

export const simulationComponent: ComponentFactory = createSimulationComponent();
