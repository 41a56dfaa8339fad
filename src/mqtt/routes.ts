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

export function mqttRoutes(where: () => { plain: Listening; tls: Listening | null }): FastifyPluginAsync {
  return async (app: FastifyInstance) => {
    app.get('/api/mqtt', {
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
    }, async (request): Promise<MqttConnectInfo> => {
      const { plain, tls } = where();
      const host = publicHost(plain.host, request);
      const tenantId = request.account.tenantId;
      return {
        url: `mqtt://${host}:${plain.port}`,
        tlsUrl: tls ? `mqtts://${host}:${tls.port}` : null,
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
    });
  };
}

/** A wildcard listen address is not somewhere to connect to: the host the caller reached HTTP on is. */
function publicHost(listen: string, request: FastifyRequest): string {
  if (listen !== '0.0.0.0' && listen !== '::') return listen.includes(':') ? `[${listen}]` : listen;
  return request.hostname.replace(/:\d+$/, '') || '127.0.0.1';
}
