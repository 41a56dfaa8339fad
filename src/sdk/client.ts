// ReefClient: a typed client for the whole Reef HTTP API, for Node and browsers alike (docs/sdk.md).
// It needs only `fetch`. The plumbing (options, tokens, requests, retries) is transport.ts; the calls
// are added by resource, one file each: devices.ts, observations.ts, simulations.ts, alarms.ts,
// kits.ts (the CoAP bridge), live.ts (the event stream, MQTT).
import { LiveCalls } from './live.ts';

export { parseRetryAfter, type CallOptions, type ReefClientOptions } from './transport.ts';
export type { RangeOptions, UploadOptions, UploadProgress, UploadResult } from './observations.ts';
export type { CoapOptions, ObserveOptions } from './kits.ts';
export type { StreamOptions } from './live.ts';

export class ReefClient extends LiveCalls {
  /** The same client (sharing its token) addressing another solution, e.g. `StudioSimulation`. */
  inSolution(solution: string): ReefClient {
    return new ReefClient({ ...this.options, solution }, { tokens: this.tokens });
  }
}
