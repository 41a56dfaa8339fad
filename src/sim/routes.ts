// Studio simulations (seed §1, §3: "simulated devices are provisioned when a simulation runs"):
// create, list, read and stop the simulations of the caller's account. Registered by the
// simulation component as an authenticated API plugin; request and response shapes are in
// docs/simulation.md.
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { ReefError } from '../core/errors.ts';
import { STUDIO_SIMULATION } from '../core/types.ts';
import { solutionName } from '../core/validate.ts';
import type { SimulationManager } from './simulations.ts';
import { errors, solutionParams } from '../http/schemas.ts';

const simulation = {
  $id: 'Simulation',
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: ['string', 'null'] },
    status: { type: 'string', enum: ['running', 'backfilling', 'stopped', 'completed', 'failed'] },
    solution: { type: 'string' },
    devices: { type: 'integer' },
    deviceIds: { type: 'array', items: { type: 'string' } },
    params: {
      type: 'object',
      properties: {
        devices: { type: 'integer' },
        intervalMs: { type: 'integer' },
        durationMs: { type: ['integer', 'null'] },
        backfillMs: { type: 'integer' },
        area: { type: 'object', additionalProperties: true },
        seed: { type: 'string' },
        profile: { type: 'object', additionalProperties: true },
      },
    },
    observationsProduced: { type: 'integer' },
    createdAt: { type: 'string' },
    startedAt: { type: 'string' },
    endsAt: { type: ['string', 'null'] },
    stoppedAt: { type: ['string', 'null'] },
    backfill: { anyOf: [{ type: 'null' }, { type: 'object', properties: { done: { type: 'integer' }, total: { type: 'integer' } } }] },
    error: { type: ['string', 'null'] },
  },
  required: ['id', 'status', 'devices', 'params', 'observationsProduced', 'startedAt'],
} as const;

const simParams = {
  type: 'object',
  properties: { solution: { type: 'string', maxLength: 200 }, id: { type: 'string', maxLength: 200 } },
  required: ['solution', 'id'],
} as const;

// Types are checked by the simulation's own parser (src/sim/params.ts) so every bad value gets a
// message naming its field; the schema documents the shape for OpenAPI.
const createBody = {
  type: 'object',
  additionalProperties: true,
  properties: {
    name: { description: 'A label, at most 100 characters' },
    devices: { description: 'Number of virtual devices (1..10000)' },
    interval: { description: 'Reporting interval: "10s", "5m"... or milliseconds (at least 1 s)' },
    duration: { description: 'Live run time ("1h", "7d"...); absent runs until stopped' },
    backfill: { description: 'History to write in bulk before the start ("7d"...)' },
    area: { description: '{"center": {"latitude", "longitude"}, "radiusKm"} or {"south", "west", "north", "east"}; default Lisbon, 20 km' },
    seed: { description: 'Same seed, same devices and readings; default random' },
    profile: { description: '"outdoor" (default), "indoor", or {"kind", "offsetC", "dailySwingC", "driftC", "noiseC"}' },
  },
} as const;

function studio(solution: string): void {
  solutionName(solution);
  if (solution !== STUDIO_SIMULATION) {
    throw new ReefError('VALIDATION_FAILED', `simulations run only in the ${STUDIO_SIMULATION} solution`, { field: 'solution' });
  }
}

export function simulationRoutes(manager: SimulationManager): FastifyPluginAsync {
  return async (app: FastifyInstance) => {
    app.addSchema(simulation);
    const base = '/api/solutions/:solution/simulations';

    app.post(
      base,
      {
        schema: {
          tags: ['simulations'],
          summary: 'Start a simulation: virtual devices in an area reporting temperatures',
          params: solutionParams,
          body: createBody,
          response: { 201: { $ref: 'Simulation#' }, ...errors(400, 401, 403, 409, 415) },
        },
        bodyLimit: 16 * 1024,
      },
      async (request, reply) => {
        const { solution } = request.params as { solution: string };
        studio(solution);
        const sim = await manager.create(request.account, request.body ?? {});
        return reply.code(201).header('location', `/api/solutions/${STUDIO_SIMULATION}/simulations/${sim.id}`).send(sim);
      },
    );

    app.get(
      base,
      {
        schema: {
          tags: ['simulations'],
          summary: "The account's simulations, newest first",
          params: solutionParams,
          response: { 200: { type: 'object', properties: { simulations: { type: 'array', items: { $ref: 'Simulation#' } } } }, ...errors(400, 401) },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        studio(solution);
        return { simulations: await manager.list(request.account) };
      },
    );

    app.get(
      `${base}/:id`,
      {
        schema: { tags: ['simulations'], summary: 'One simulation with its device ids and progress', params: simParams, response: { 200: { $ref: 'Simulation#' }, ...errors(400, 401, 404) } },
      },
      async (request) => {
        const { solution, id } = request.params as { solution: string; id: string };
        studio(solution);
        return manager.get(request.account, id);
      },
    );

    const stop = async (request: { params: unknown; account: import('../core/types.ts').Account }) => {
      const { solution, id } = request.params as { solution: string; id: string };
      studio(solution);
      return manager.stop(request.account, id);
    };
    app.delete(
      `${base}/:id`,
      {
        schema: {
          tags: ['simulations'],
          summary: 'Stop a simulation (its devices and readings stay); answers the stopped simulation',
          params: simParams,
          response: { 200: { $ref: 'Simulation#' }, ...errors(400, 401, 404) },
        },
      },
      stop,
    );
    app.post(
      `${base}/:id/stop`,
      {
        schema: { tags: ['simulations'], summary: 'Stop a simulation (same as DELETE)', params: simParams, response: { 200: { $ref: 'Simulation#' }, ...errors(400, 401, 404) } },
      },
      stop,
    );
  };
}
