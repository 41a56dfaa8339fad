// Settings of a solution. Retention (issue "PostgreSQL store": per-solution retention): how many
// days observations are kept; null keeps them forever (the default). Expired observations are
// removed by the store upkeep job on the leader node (docs/operations.md).
import type { FastifyInstance } from 'fastify';
import { resolveSolution, resolveSolutionVersion } from '../../service/devices.ts';
import type { Store } from '../../store/store.ts';
import { RETENTION_MAX_DAYS, RETENTION_MIN_DAYS } from '../../store/retention.ts';
import { errors, solutionParams } from '../schemas.ts';

const retentionBody = {
  type: 'object',
  properties: {
    solution: { type: 'string' },
    retentionDays: { type: ['integer', 'null'], description: 'Days observations are kept; null keeps them forever' },
  },
} as const;

export async function solutionRoutes(app: FastifyInstance, opts: { store: Store }) {
  const { store } = opts;

  app.get(
    '/api/solutions/:solution/retention',
    {
      schema: { tags: ['solutions'], summary: "The solution's retention", params: solutionParams, response: { 200: retentionBody, ...errors(400, 401, 404) } },
    },
    async (request) => {
      const { solution } = request.params as { solution: string };
      const version = await resolveSolutionVersion(store, request.account, solution);
      return { solution, retentionDays: version === null ? null : await store.getRetention(request.account.groupId, solution) };
    },
  );

  app.put(
    '/api/solutions/:solution/retention',
    {
      schema: {
        tags: ['solutions'],
        summary: 'Keep observations of this solution for N days (null: forever)',
        params: solutionParams,
        body: { type: 'object', properties: { retentionDays: { type: ['integer', 'null'], minimum: RETENTION_MIN_DAYS, maximum: RETENTION_MAX_DAYS } }, required: ['retentionDays'] },
        response: { 200: retentionBody, ...errors(400, 401, 404, 415) },
      },
    },
    async (request) => {
      const { solution } = request.params as { solution: string };
      const { retentionDays } = request.body as { retentionDays: number | null };
      await resolveSolution(store, request.account, solution);
      await store.ensureSolution(request.account.groupId, solution);
      await store.setRetention(request.account.groupId, solution, retentionDays);
      return { solution, retentionDays };
    },
  );
}
