// The shared CoAP library of Reef (device and gateway). Everything here uses node built-ins only.
export * from './codes.ts';
export * from './options.ts';
export * from './message.ts';
export * from './block.ts';
export * from './cbor.ts';
export * from './reading.ts';
export * from './time-tlv.ts';
export * from './timing.ts';
export * from './announce.ts';
export * from './endpoint.ts';
export * from './deadlines.ts';
