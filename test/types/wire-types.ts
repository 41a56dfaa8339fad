// One source for wire types: what the server sends and what the SDK (and so the CLI and the web
// app) reads are written twice, once where the server builds them and once in src/sdk/types.ts,
// because the SDK must depend on nothing. This file makes the two agree, checked by the type
// checker (`npm run typecheck` covers test/): everything the server sends is assignable to the
// SDK's type (the SDK can read it), and every field the SDK names is one the server has (the SDK
// promises nothing the server does not send). The SDK's types stay tolerant readers (extra
// fields, `| string` for values a later server may add). A difference fails the typecheck with the
// pair's name. It is not a test file: nothing in it runs, `npm run typecheck` is its check.
import type * as core from '../../src/core/types.ts';
import type { KitStatus } from '../../src/gateway/kit-status-routes.ts';
import type { DeviceCadence } from '../../src/service/cadence.ts';
import type { BridgeResponse } from '../../src/gateway/routes.ts';
import type { MqttConnectInfo } from '../../src/mqtt/routes.ts';
import type { AlarmWire, RuleWire } from '../../src/alarms/rules.ts';
import type * as sdk from '../../src/sdk/types.ts';
import type { Simulation as ServerSimulation } from '../../src/sim/simulations.ts';

/** An interface as a plain object type, deeply (so it meets the SDK's index signatures as data does). */
type Plain<T> = T extends (infer E)[] ? Plain<E>[] : T extends object ? { [K in keyof T]: Plain<T[K]> } : T;
/** The named (not index-signature) keys of T. */
type KnownKeys<T> = keyof { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] };

/** true when the SDK reads the server's type and names no field the server lacks; else a message (a compile error). */
type Same<Server, Sdk, Name extends string> = [Plain<Server>] extends [Sdk]
  ? [Exclude<KnownKeys<Sdk>, keyof Server>] extends [never]
    ? true
    : `${Name}: the SDK names fields the server does not send: ${Exclude<KnownKeys<Sdk>, keyof Server> & string}`
  : `${Name}: the server sends what the SDK does not describe`;

export const checks = {
  location: true satisfies Same<core.Location, sdk.Location, 'Location'>,
  domainInfo: true satisfies Same<core.DomainInfo, sdk.DomainInfo, 'DomainInfo'>,
  provisioningInfo: true satisfies Same<core.ProvisioningInfo, sdk.ProvisioningInfo, 'ProvisioningInfo'>,
  device: true satisfies Same<core.Device, sdk.Device, 'Device'>,
  observation: true satisfies Same<core.Observation, sdk.Observation, 'Observation'>,
  observationGroup: true satisfies Same<core.ObservationGroup, sdk.ObservationGroup, 'ObservationGroup'>,
  coapBridge: true satisfies Same<BridgeResponse, sdk.CoapResponse, 'CoapResponse (HTTP bridge)'>,
  simulation: true satisfies Same<ServerSimulation, sdk.Simulation, 'Simulation'>,
  kitStatus: true satisfies Same<KitStatus, sdk.KitStatus, 'KitStatus'>,
  mqttConnect: true satisfies Same<MqttConnectInfo, sdk.MqttConnectInfo, 'MqttConnectInfo'>,
  alarmRule: true satisfies Same<RuleWire, sdk.AlarmRule, 'AlarmRule'>,
  alarm: true satisfies Same<AlarmWire, sdk.Alarm, 'Alarm'>,
  cadence: true satisfies Same<DeviceCadence, sdk.DeviceCadence, 'DeviceCadence'>,
};
