// The HTTP bridge to dev kits (docs/coap.md "HTTP bridge"): the gateway's proxy for browsers and
// scripts, with the usual Authorization token instead of a CoAP session.
//   GET|PUT|POST|DELETE /api/solutions/{solution}/devices/{id}/coap/<path>?<query>
// sends the CoAP request to the kit (path with or without the kit's prefix; the CoAP query is the
// URL's query less `access_token`) and answers 200 with the kit's response as JSON. A GET with
// `Accept: text/event-stream` (what EventSource sends) observes the resource instead: each
// notification is one `notification` event, sharing the gateway's one upstream observation of it.
// The kit's error → 502 (X-CoAP-Code header), no answer by the deadline → 504, a kit that has not
// announced itself → 503, another group's kit or a non-kit device → 404.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Code, CoapMessage, ContentFormat, codeClass, codeToString, getUintOption, Option, uintOption, type CoapOption } from '../coap/index.ts';
import { ReefError } from '../core/errors.ts';
import { DEVICE_TYPE_DEVKIT } from '../core/types.ts';
import type { Gateway, Subscriber } from './gateway.ts';
import type { SseStream } from '../http/sse.ts';
import { upstreamFailure } from './answers.ts';
import { tryReading } from './readings.ts';
import { findDevice } from '../service/devices.ts';
import type { Store } from '../store/store.ts';
import type { Authenticator } from '../auth/accounts.ts';

/** Largest CoAP payload the bridge sends to a kit, whatever its content type. */
const MAX_PAYLOAD = 1024;
const METHODS: Record<string, number> = { GET: Code.GET, POST: Code.POST, PUT: Code.PUT, DELETE: Code.DELETE };
const TEXTUAL = new Set<number>([ContentFormat.TEXT_PLAIN, ContentFormat.LINK_FORMAT, ContentFormat.JSON, ContentFormat.XML]);
const CODE_NAMES: Record<string, string> = {
  '2.01': 'Created',
  '2.02': 'Deleted',
  '2.03': 'Valid',
  '2.04': 'Changed',
  '2.05': 'Content',
  '2.31': 'Continue',
  '4.00': 'Bad Request',
  '4.01': 'Unauthorized',
  '4.02': 'Bad Option',
  '4.03': 'Forbidden',
  '4.04': 'Not Found',
  '4.05': 'Method Not Allowed',
  '4.06': 'Not Acceptable',
  '4.08': 'Request Entity Incomplete',
  '4.12': 'Precondition Failed',
  '4.13': 'Request Entity Too Large',
  '4.15': 'Unsupported Content-Format',
  '5.00': 'Internal Server Error',
  '5.01': 'Not Implemented',
  '5.02': 'Bad Gateway',
  '5.03': 'Service Unavailable',
  '5.04': 'Gateway Timeout',
  '5.05': 'Proxying Not Supported',
};

/** The JSON form of a kit's CoAP response (docs/coap.md). */
export interface BridgeResponse {
  deviceId: string;
  mac: string;
  code: string;
  codeName: string;
  contentFormat: number | null;
  payload: string | null;
  payloadEncoding: 'text' | 'base64' | null;
  reading: { epoch: number; value: number; unit: 'C' | 'F' } | null;
  maxAge: number | null;
  observe?: number;
}

export function bridgeJson(deviceId: string, mac: string, m: CoapMessage, observe?: number): BridgeResponse {
  const cf = getUintOption(m, Option.CONTENT_FORMAT) ?? null;
  let payload: string | null = null;
  let payloadEncoding: BridgeResponse['payloadEncoding'] = null;
  if (m.payload.length > 0) {
    const s = m.payload.toString('utf8');
    const textual = (cf === null || TEXTUAL.has(cf)) && Buffer.from(s, 'utf8').equals(m.payload) && !/[\u0000-\u0008\u000e-\u001f]/.test(s);
    payload = textual ? s : m.payload.toString('base64');
    payloadEncoding = textual ? 'text' : 'base64';
  }
  const r = codeClass(m.code) === 2 ? tryReading(m.payload, cf ?? undefined) : undefined;
  const code = codeToString(m.code);
  const out: BridgeResponse = {
    deviceId,
    mac,
    code,
    codeName: CODE_NAMES[code] ?? '',
    contentFormat: cf,
    payload,
    payloadEncoding,
    reading: r ? { epoch: r.epoch, value: r.value, unit: r.unit } : null,
    maxAge: getUintOption(m, Option.MAX_AGE) ?? null,
  };
  if (observe !== undefined) out.observe = observe;
  return out;
}

/** The CoAP query items of the URL, in order, without the stream's access_token. */
function coapQuery(url: string): string[] {
  const i = url.indexOf('?');
  if (i < 0) return [];
  return url
    .slice(i + 1)
    .split('&')
    .filter((s) => s.length > 0 && !s.startsWith('access_token='))
    .map((s) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, ' '));
      } catch {
        throw new ReefError('VALIDATION_FAILED', 'the query is not valid percent-encoding', { field: 'query' });
      }
    });
}

function requestPayload(request: FastifyRequest): { payload: Buffer; options: CoapOption[] } {
  const b = request.body as unknown;
  if (b === undefined || b === null || b === '') return { payload: Buffer.alloc(0), options: [] };
  if (typeof b === 'string') {
    const payload = Buffer.from(b, 'utf8');
    if (payload.length > MAX_PAYLOAD) throw new ReefError('PAYLOAD_TOO_LARGE', `a CoAP payload through the bridge is at most ${MAX_PAYLOAD} bytes`, { field: 'payload' });
    return { payload, options: [uintOption(Option.CONTENT_FORMAT, ContentFormat.TEXT_PLAIN)] };
  }
  if (typeof b !== 'object' || Array.isArray(b)) throw new ReefError('VALIDATION_FAILED', 'the body must be {"payload"|"payloadBase64", "contentFormat"}', { field: 'body' });
  const o = b as { payload?: unknown; payloadBase64?: unknown; contentFormat?: unknown };
  let payload = Buffer.alloc(0);
  if (o.payload !== undefined) {
    if (typeof o.payload !== 'string') throw new ReefError('VALIDATION_FAILED', 'payload must be a string', { field: 'payload' });
    payload = Buffer.from(o.payload, 'utf8');
  } else if (o.payloadBase64 !== undefined) {
    if (typeof o.payloadBase64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(o.payloadBase64)) throw new ReefError('VALIDATION_FAILED', 'payloadBase64 must be base64', { field: 'payloadBase64' });
    payload = Buffer.from(o.payloadBase64, 'base64');
  }
  const options: CoapOption[] = [];
  if (o.contentFormat !== undefined) {
    if (typeof o.contentFormat !== 'number' || !Number.isInteger(o.contentFormat) || o.contentFormat < 0 || o.contentFormat > 65535) {
      throw new ReefError('VALIDATION_FAILED', 'contentFormat must be an integer 0..65535', { field: 'contentFormat' });
    }
    options.push(uintOption(Option.CONTENT_FORMAT, o.contentFormat));
  } else if (payload.length > 0) options.push(uintOption(Option.CONTENT_FORMAT, o.payload !== undefined ? ContentFormat.TEXT_PLAIN : ContentFormat.OCTET_STREAM));
  // The kit's link carries at most 255 bytes per message (wire §2).
  if (payload.length > MAX_PAYLOAD) throw new ReefError('PAYLOAD_TOO_LARGE', `a CoAP payload through the bridge is at most ${MAX_PAYLOAD} bytes`, { field: 'payload' });
  return { payload, options };
}

function kitError(m: CoapMessage): ReefError {
  const diag = m.payload.length && m.payload.length < 200 ? `: ${m.payload.toString('utf8')}` : '';
  const code = codeToString(m.code);
  return new ReefError('BAD_GATEWAY', `the kit answered ${code} ${CODE_NAMES[code] ?? ''}${diag}`.trim());
}

export function coapBridgeRoutes(deps: { gateway: () => Gateway; store: Store; auth: Authenticator; deadlineMs: number }): FastifyPluginAsync {
  const { store, deadlineMs } = deps;
  return async (app: FastifyInstance) => {
    // Any body type reaches the handler: text/plain is sent as a text payload, JSON as described.
    app.route({
      method: ['GET', 'PUT', 'POST', 'DELETE'],
      url: '/api/solutions/:solution/devices/:id/coap/*',
      config: { tokenInQuery: true },
      // A body longer than any payload the bridge forwards (JSON-wrapped base64 of MAX_PAYLOAD
      // bytes included) is refused 413 while it arrives, before it is read to the end.
      bodyLimit: 4 * MAX_PAYLOAD,
      schema: {
        tags: ['coap'],
        summary: 'Send a CoAP request to a dev kit through the gateway; Accept: text/event-stream observes it (docs/coap.md)',
        params: {
          type: 'object',
          properties: { solution: { type: 'string' }, id: { type: 'string' }, '*': { type: 'string', description: 'The kit resource path, e.g. snsr/arduino/temp' } },
        },
      },
      handler: async (request: FastifyRequest, reply: FastifyReply) => {
        const { solution, id } = request.params as { solution: string; id: string; '*': string };
        const rest = (request.params as Record<string, string>)['*'] ?? '';
        const device = await findDevice(store, request.account, solution, id);
        if (device.deviceType !== DEVICE_TYPE_DEVKIT || !device.mac) throw new ReefError('DEVICE_NOT_FOUND', 'this device is not a dev kit: only kits are reached over CoAP');
        const gateway = deps.gateway();
        const kit = await gateway.authorize(request.account.groupId, device.mac);
        const path = rest.split('/').filter((s) => s.length > 0);
        if (path.length > 16 || path.some((s) => s.length > 255)) throw new ReefError('VALIDATION_FAILED', 'the kit path is too long', { field: '*' });
        const query = coapQuery(request.url);
        const method = METHODS[request.method]!;
        const wantsStream = method === Code.GET && /text\/event-stream/i.test(String(request.headers.accept ?? ''));
        if (wantsStream) return stream(request, reply, gateway, device.id, kit.mac, kit, path, query, deadlineMs);
        const { payload, options } = method === Code.GET || method === Code.DELETE ? { payload: Buffer.alloc(0), options: [] } : requestPayload(request);
        let m: CoapMessage;
        try {
          m = await gateway.forward(kit, { method, path, query, options, payload });
        } catch (e) {
          throw upstreamFailure(e, deadlineMs);
        }
        if (codeClass(m.code) !== 2) {
          reply.header('x-coap-code', codeToString(m.code));
          throw kitError(m);
        }
        reply.header('x-coap-code', codeToString(m.code));
        return bridgeJson(device.id, kit.mac, m);
      },
    });
  };
}

async function stream(
  request: FastifyRequest,
  reply: FastifyReply,
  gateway: Gateway,
  deviceId: string,
  mac: string,
  kit: Parameters<Gateway['subscribe']>[0],
  path: string[],
  query: string[],
  deadlineMs: number,
): Promise<void> {
  let live: SseStream | undefined;
  let ended: string | undefined;
  const sub: Subscriber = {
    notify: (m, seq) => {
      const isLive = codeClass(m.code) === 2 && getUintOption(m, Option.OBSERVE) !== undefined;
      live?.send('notification', bridgeJson(deviceId, mac, m, isLive ? seq : undefined));
    },
    ended: (why) => {
      if (live) live.end(why);
      else ended = why;
    },
  };
  let first: { msg: CoapMessage; seq: number | undefined };
  try {
    first = await gateway.subscribe(kit, path, query, undefined, sub);
  } catch (e) {
    gateway.release(sub);
    throw upstreamFailure(e, deadlineMs);
  }
  if (codeClass(first.msg.code) !== 2) {
    gateway.release(sub);
    reply.header('x-coap-code', codeToString(first.msg.code));
    throw kitError(first.msg);
  }
  const origin = request.headers.origin;
  let s: SseStream;
  try {
    // The registry bounds streams per account and node and ends this one when the caller's token
    // expires, the account is disabled or its secret rotated (src/http/sse.ts).
    s = request.server.streams.start(request, reply, request.caller, {
      'x-coap-code': codeToString(first.msg.code),
      ...(origin ? { 'access-control-allow-origin': origin, vary: 'Origin' } : {}),
    });
  } catch (e) {
    gateway.release(sub);
    throw e;
  }
  live = s;
  s.onClose(() => gateway.release(sub));
  s.send('notification', bridgeJson(deviceId, mac, first.msg, first.seq));
  if (ended !== undefined) return s.end(ended);
  if (first.seq === undefined) return s.end('the resource is not observable');
}
