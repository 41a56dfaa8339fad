// The Reef SDK: `import { ReefClient } from '.../src/sdk/index.ts'`. Runs in Node ≥ 20 and in
// browsers; depends on nothing but fetch. docs/sdk.md describes it.
export { ReefClient, parseRetryAfter } from './client.ts';
export type { ReefClientOptions, CallOptions, RangeOptions, UploadOptions, UploadProgress, UploadResult, StreamOptions, CoapOptions, ObserveOptions } from './client.ts';
export { ApiError, NetworkError, isApiError } from './errors.ts';
export { decodeJwtClaims } from './token.ts';
export { uploadBody } from './upload-body.ts';
export type { Credentials } from './token.ts';
export * from './types.ts';
