// What the gateway knows of a solution's dev kits, for the browser app's table and tiles (an
// offline kit must not look normal until "Read now" fails):
//   GET /api/solutions/{solution}/kits → {kits: [{deviceId, mac, reachable, lastHeard, announcePeriodSeconds, firmware}]}
// `reachable` is the gateway's own rule (a current announcement, src/gateway/kits.ts: forgotten after
// three missed periods) — the same one that answers 503 KIT_OFFLINE on the bridge. `lastHeard` is
// the last announcement (ISO 8601), kept after the kit went quiet; null when it never announced to
// this gateway process. Only the caller's group's kits are listed (seed §1: groups see only their
// own devices); a solution without kits lists none.
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { DEVICE_TYPE_DEVKIT } from '../core/types.ts';
import { resolveSolution } from '../service/devices.ts';
import type { Store } from '../store/store.ts';
import type { Gateway } from './gateway.ts';

export interface KitStatus {
  deviceId: string;
  mac: string;
  reachable: boolean;
  lastHeard: string | null;
  announcePeriodSeconds: number | null;
  firmware: string | null;
}

export function kitStatusRoutes(deps: { gateway: () => Gateway; store: Store }): FastifyPluginAsync {
  return async (app: FastifyInstance) => {
    app.get(
      '/api/solutions/:solution/kits',
      {
        schema: {
          tags: ['coap'],
          summary: "The solution's dev kits as the gateway sees them: reachable now, and when each was last heard",
          params: { type: 'object', properties: { solution: { type: 'string' } }, required: ['solution'] },
          response: {
            200: {
              type: 'object',
              properties: {
                kits: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      deviceId: { type: 'string' },
                      mac: { type: 'string' },
                      reachable: { type: 'boolean', description: 'A current announcement: the bridge would forward to it' },
                      lastHeard: { type: ['string', 'null'], format: 'date-time', description: 'The last announcement this gateway received' },
                      announcePeriodSeconds: { type: ['number', 'null'] },
                      firmware: { type: ['string', 'null'] },
                    },
                  },
                },
              },
            },
          },
        },
      },
      async (request) => {
        const { solution } = request.params as { solution: string };
        const name = await resolveSolution(deps.store, request.account, solution);
        const devices = await deps.store.listDevices(request.account.groupId, name, DEVICE_TYPE_DEVKIT);
        const kits = deps.gateway().kits;
        const now = Date.now();
        const out: KitStatus[] = [];
        for (const d of devices) {
          if (!d.mac) continue;
          const entry = kits.get(d.mac, now);
          const heard = kits.lastHeard(d.mac);
          out.push({
            deviceId: d.id,
            mac: d.mac,
            reachable: entry !== undefined,
            // A static kit (REEF_GATEWAY_KITS) is never announced: it counts as heard when configured.
            lastHeard: heard !== null ? new Date(heard).toISOString() : entry ? new Date(entry.lastSeen).toISOString() : null,
            announcePeriodSeconds: entry && Number.isFinite(entry.periodMs) ? entry.periodMs / 1000 : null,
            firmware: entry?.fw || null,
          });
        }
        return { kits: out };
      },
    );
  };
}
