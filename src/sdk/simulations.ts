// ReefClient's calls for Studio simulations (docs/simulation.md), always in StudioSimulation.
import { ObservationCalls } from './observations.ts';
import { seg } from './transport.ts';
import type { NewSimulation, Simulation } from './types.ts';

const SIMULATIONS = '/api/solutions/StudioSimulation/simulations';

export abstract class SimulationCalls extends ObservationCalls {
  /** Starts a simulation: virtual devices in an area reporting temperatures. */
  async createSimulation(params: NewSimulation, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('POST', SIMULATIONS, { body: params, idempotent: false, signal: opts.signal })).data;
  }

  /** The account's simulations, newest first (without deviceIds). */
  async listSimulations(opts: { signal?: AbortSignal } = {}): Promise<Simulation[]> {
    return (await this.request<{ simulations: Simulation[] }>('GET', SIMULATIONS, { idempotent: true, signal: opts.signal })).data.simulations;
  }

  /** One simulation, with its device ids and progress. */
  async getSimulation(id: string, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('GET', `${SIMULATIONS}/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /** Stops a simulation (its devices and readings stay); answers it, now stopped. Idempotent. */
  async stopSimulation(id: string, opts: { signal?: AbortSignal } = {}): Promise<Simulation> {
    return (await this.request<Simulation>('DELETE', `${SIMULATIONS}/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }
}
