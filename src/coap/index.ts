// The shared CoAP library of Reef (device and gateway). Everything here uses node built-ins only,
// and the gateway's batched socket the project's own addon (native/udp-batch.c, src/coap/datagrams.ts).
export * from './codes.ts';
export * from './options.ts';
export * from './message.ts';
export * from './block.ts';
export * from './cbor.ts';
export * from './reading.ts';
export * from './time-tlv.ts';
export * from './timing.ts';
export * from './announce.ts';
export * from './datagrams.ts';
export * from './endpoint.ts';
export * from './peer-token-map.ts';
export * from './deadlines.ts';
