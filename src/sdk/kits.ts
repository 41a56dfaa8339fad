// ReefClient's calls for the HTTP bridge to dev kits (docs/coap.md "HTTP bridge"): the solution's
// kits as the gateway sees them, one CoAP request, and an observation read as Server-Sent Events.
import { AlarmCalls } from './alarms.ts';
import { NetworkError } from './errors.ts';
import { parseSse } from './sse.ts';
import { seg, type CallOptions } from './transport.ts';
import type { CoapRequestBody, CoapResponse, KitStatus } from './types.ts';

export interface CoapOptions extends CallOptions {
  /** Wait this long for the kit (default: the client's timeoutMs, at least 35 s, beyond the gateway's 30 s deadline). */
  timeoutMs?: number;
}

export interface ObserveOptions {
  solution?: string;
  /** Ends the observation. Breaking out of `for await` ends it too. */
  signal?: AbortSignal;
  /** Called once the observation is established (before the first notification is yielded). */
  onOpen?: () => void;
  /** Called with the service's reason when it ends the observation (kit error, account disabled...). */
  onEnd?: (reason: string) => void;
}

export abstract class KitCalls extends AlarmCalls {
  /** The solution's dev kits as the gateway sees them: reachable now, and when each was last heard. */
  async listKits(opts: CallOptions = {}): Promise<KitStatus[]> {
    return (await this.request<{ kits: KitStatus[] }>('GET', `${this.sol(opts)}/kits`, { idempotent: true, signal: opts.signal })).data.kits;
  }

  /**
   * One CoAP request to a dev kit through the gateway, e.g. `coap(id, 'GET', 'snsr/arduino/temp?sens')`.
   * The resource is the kit path (with or without its `snsr`/`sensor` prefix) and its CoAP query.
   * A kit's 4.xx/5.xx is an ApiError 502 (BAD_GATEWAY); no answer by the deadline is 504. Not
   * retried: an offline kit (503 KIT_OFFLINE) stays offline for longer than a retry waits.
   */
  async coap(deviceId: string, method: 'GET' | 'PUT' | 'POST' | 'DELETE', resource: string, body?: CoapRequestBody, opts: CoapOptions = {}): Promise<CoapResponse> {
    const r = await this.request<CoapResponse>(method, this.coapPath(deviceId, resource, opts), {
      ...(body !== undefined && (method === 'PUT' || method === 'POST') ? { body } : {}),
      idempotent: false,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs ?? (this.opts.timeoutMs === 0 ? 0 : Math.max(this.opts.timeoutMs, 35_000)),
    });
    return r.data;
  }

  coapGet(deviceId: string, resource: string, opts: CoapOptions = {}): Promise<CoapResponse> {
    return this.coap(deviceId, 'GET', resource, undefined, opts);
  }

  /** PUT, e.g. `coapPut(id, 'snsr/arduino/temp?cfg=C')` to switch the kit to Celsius. */
  coapPut(deviceId: string, resource: string, body?: CoapRequestBody, opts: CoapOptions = {}): Promise<CoapResponse> {
    return this.coap(deviceId, 'PUT', resource, body, opts);
  }

  /**
   * CoAP observe through the bridge: the current state, then a notification per change, as an
   * async iterator (Server-Sent Events read with fetch). It ends when the caller stops (break,
   * signal) or the service ends the observation (`onEnd` gets the reason).
   */
  async *coapObserve(deviceId: string, resource: string, opts: ObserveOptions = {}): AsyncGenerator<CoapResponse> {
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(opts.signal?.reason);
    if (opts.signal?.aborted) return;
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let res: Response;
      try {
        res = (
          await this.request<null>('GET', this.coapPath(deviceId, resource, opts), {
            idempotent: false,
            signal: ctrl.signal,
            raw: true,
            accept: 'text/event-stream',
            timeoutMs: this.opts.timeoutMs === 0 ? 0 : Math.max(this.opts.timeoutMs, 35_000),
          })
        ).response;
      } catch (e) {
        if (ctrl.signal.aborted) return;
        throw e;
      }
      opts.onOpen?.();
      try {
        for await (const m of parseSse(res.body!)) {
          if (m.event === 'notification') yield JSON.parse(m.data) as CoapResponse;
          else if (m.event === 'end') {
            let reason = m.data;
            try {
              reason = String((JSON.parse(m.data) as { reason?: unknown }).reason ?? m.data);
            } catch {
              // plain text reason
            }
            opts.onEnd?.(reason);
            return;
          }
        }
      } catch (e) {
        if (ctrl.signal.aborted) return;
        throw new NetworkError({ method: 'GET', url: this.endpoint + this.coapPath(deviceId, resource, opts), message: `the observation broke: ${(e as Error)?.message ?? e}`, cause: e });
      }
      opts.onEnd?.('the service closed the stream');
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      ctrl.abort();
    }
  }

  private coapPath(deviceId: string, resource: string, opts: { solution?: string | undefined }): string {
    const q = resource.indexOf('?');
    const path = (q < 0 ? resource : resource.slice(0, q))
      .split('/')
      .filter((x) => x.length > 0)
      .map(seg)
      .join('/');
    const query =
      q < 0
        ? ''
        : resource
            .slice(q + 1)
            .split('&')
            .filter((x) => x.length > 0)
            .map(seg)
            .join('&');
    return `${this.sol(opts)}/devices/${seg(deviceId)}/coap/${path}${query ? `?${query}` : ''}`;
  }
}
