// ReefClient's live updates: the solution's Server-Sent Events stream (docs/sdk.md "Live stream"),
// and where the MQTT broker listens for those who would rather subscribe there (docs/mqtt.md).
import { ApiError, NetworkError } from './errors.ts';
import { KitCalls } from './kits.ts';
import { parseSse } from './sse.ts';
import { sleep, type CallOptions } from './transport.ts';
import type { MqttConnectInfo, StreamEvent } from './types.ts';

export interface StreamOptions {
  /** Only this device's events. */
  deviceId?: string;
  solution?: string;
  /** Ends the stream. Breaking out of `for await` ends it too. */
  signal?: AbortSignal;
  /** Reconnect when the connection drops (default true); failures to connect are thrown. */
  reconnect?: boolean;
  /** Called each time the stream is connected (the service is then subscribed). */
  onOpen?: () => void;
}

export abstract class LiveCalls extends KitCalls {
  /**
   * New observations (and device changes) of the solution as they are stored, from the Server-Sent
   * Events endpoint. Read with fetch so the Authorization header is sent, in browsers too.
   */
  async *stream(opts: StreamOptions = {}): AsyncGenerator<StreamEvent> {
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(opts.signal?.reason);
    if (opts.signal?.aborted) return;
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const path = `${this.sol(opts)}/events`;
    let retryMs = 1000;
    try {
      for (;;) {
        let res: Response;
        try {
          res = (await this.request<null>('GET', path, { query: { deviceId: opts.deviceId }, idempotent: true, signal: ctrl.signal, raw: true, accept: 'text/event-stream' })).response;
        } catch (e) {
          if (ctrl.signal.aborted) return;
          throw e;
        }
        opts.onOpen?.();
        try {
          for await (const m of parseSse(res.body!)) {
            if (m.retry !== undefined) retryMs = m.retry;
            yield toStreamEvent(m.event, m.data);
          }
        } catch (e) {
          if (ctrl.signal.aborted) return;
          if (opts.reconnect === false) throw new NetworkError({ method: 'GET', url: this.endpoint + path, message: `the event stream broke: ${(e as Error)?.message ?? e}`, cause: e });
        }
        if (opts.reconnect === false || ctrl.signal.aborted) return;
        await sleep(retryMs, ctrl.signal).catch(() => {});
        if (ctrl.signal.aborted) return;
      }
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ctrl.abort();
    }
  }

  /** GET /api/mqtt: where the MQTT broker listens and the caller's topics; null when the service runs none. */
  async mqttInfo(opts: CallOptions = {}): Promise<MqttConnectInfo | null> {
    try {
      return (await this.request<MqttConnectInfo>('GET', '/api/mqtt', { idempotent: true, signal: opts.signal })).data;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }
}

function toStreamEvent(event: string, data: string): StreamEvent {
  let parsed: unknown = data;
  try {
    parsed = JSON.parse(data);
  } catch {
    // Plain text data stays a string.
  }
  if ((event === 'observations' || event === 'device' || event === 'alarm' || event === 'alarm-rule') && parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    return { type: event, ...(parsed as Record<string, unknown>) } as StreamEvent;
  }
  return { type: event, data: parsed };
}
