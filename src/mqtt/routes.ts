// GET /api/mqtt: how the caller connects to the MQTT broker (docs/mqtt.md), for the app and scripts:
// where the broker listens, the caller's topics, and a mosquitto_sub line to start from.
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { errors } from '../http/schemas.ts';
import type { Listening } from './broker.ts';

export interface MqttConnectInfo {
  url: string;
  tlsUrl: string | null;
  username: string;
  password: string;
  tenantId: string;
  topics: { alerts: string; ingest: string; errors: string };
  example: string;
}

export function mqttRoutes(where: () => { plain: Listening; tls: Listening | null }, http: { publicUrl: string | null; trustProxy: boolean }): FastifyPluginAsync {
  return async (app: FastifyInstance) => {
    app.get(
      '/api/mqtt',
      {
        schema: {
          tags: ['mqtt'],
          summary: "How to connect to the MQTT broker: its address, the caller's topics, an example command",
          response: {
            200: {
              type: 'object',
              properties: {
                url: { type: 'string' },
                tlsUrl: { type: ['string', 'null'] },
                username: { type: 'string' },
                password: { type: 'string' },
                tenantId: { type: 'string' },
                topics: { type: 'object', properties: { alerts: { type: 'string' }, ingest: { type: 'string' }, errors: { type: 'string' } } },
                example: { type: 'string' },
              },
            },
            ...errors(401),
          },
        },
      },
      async (request): Promise<MqttConnectInfo> => {
        const { plain, tls } = where();
        const host = publicHost(plain.host, request, http);
        const inUrl = host.includes(':') ? `[${host}]` : host;
        const tenantId = request.account.tenantId;
        return {
          url: `mqtt://${inUrl}:${plain.port}`,
          tlsUrl: tls ? `mqtts://${inUrl}:${tls.port}` : null,
          username: 'notused',
          password: 'an access token (POST /api/tokens), or your client secret with your client id as user name',
          tenantId,
          topics: {
            alerts: `${tenantId}/alert/+/+`,
            ingest: `${tenantId}/solutions/{solution}/devices/{deviceId}/observations`,
            errors: `${tenantId}/errors/{clientId}`,
          },
          example: `mosquitto_sub -h ${host} -p ${plain.port} -u notused -P "$TOKEN" -t '${tenantId}/alert/+/+' -v`,
        };
      },
    );
  };
}

/**
 * Where to connect. A specific listen address is it. A wildcard one is not: then the host of
 * REEF_PUBLIC_URL, else the forwarded host behind a trusted proxy, else the address this server
 * answered the request on; never the client's own Host header (as for next_page links).
 */
function publicHost(listen: string, request: FastifyRequest, http: { publicUrl: string | null; trustProxy: boolean }): string {
  if (listen !== '0.0.0.0' && listen !== '::') return listen;
  if (http.publicUrl) return new URL(http.publicUrl).hostname.replace(/^\[|\]$/g, '');
  if (http.trustProxy) return request.hostname.replace(/^\[|\]$/g, '').replace(/:\d+$/, '');
  const local = request.socket.localAddress ?? '127.0.0.1';
  return local.startsWith('::ffff:') ? local.slice(7) : local;
}
