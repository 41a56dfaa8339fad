// JSON schemas shared by the routes: they validate requests, drive fast serialisation of responses
// and generate the OpenAPI document (/api/openapi.json).
import { ERRORS } from '../core/errors.ts';

export const errorBody = {
  $id: 'ErrorBody',
  type: 'object',
  description: 'The one error body of every failure (docs/errors.md)',
  properties: {
    statusCode: { type: 'integer' },
    code: { type: 'string', enum: Object.keys(ERRORS) },
    error: { type: 'string' },
    message: { type: 'string' },
    requestId: { type: 'string' },
    field: { type: 'string' },
  },
  required: ['statusCode', 'code', 'error', 'message', 'requestId'],
} as const;

export const location = {
  type: 'object',
  properties: { latitude: { type: 'number' }, longitude: { type: 'number' } },
  required: ['latitude', 'longitude'],
} as const;

export const device = {
  $id: 'Device',
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    deviceType: { type: 'string' },
    domainInfo: { type: 'object', additionalProperties: true },
    provisioningInfo: {
      type: 'object',
      properties: {
        status: { type: 'string' },
        timestamp: { type: 'string' },
        ssniMacAddress: { type: 'string', description: "The kit's MAC, 16 lower-case hex (the seed's provisioningInfo.vendorMacAddress)" },
        ssniNetworkDeviceType: { type: 'string', description: "MILLI (the seed's vendorNetworkDeviceType)" },
      },
    },
  },
  required: ['id', 'deviceType', 'domainInfo'],
} as const;

export const observation = {
  $id: 'Observation',
  type: 'object',
  properties: { timestamp: { type: 'string' }, temperature: { type: 'number' } },
  required: ['timestamp'],
  additionalProperties: true,
} as const;

export const solutionParams = {
  type: 'object',
  properties: { solution: { type: 'string', maxLength: 200 } },
  required: ['solution'],
} as const;

export const deviceParams = {
  type: 'object',
  properties: { solution: { type: 'string', maxLength: 200 }, id: { type: 'string', maxLength: 200 } },
  required: ['solution', 'id'],
} as const;

/** Standard error responses for OpenAPI. */
export function errors(...statuses: number[]) {
  const out: Record<number, unknown> = {};
  for (const s of statuses) out[s] = { $ref: 'ErrorBody#' };
  return out;
}
