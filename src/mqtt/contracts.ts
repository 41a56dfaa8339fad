// What src/mqtt needs of the running service and what it gives back, as `reef serve` components
// are put together: the shared contracts of src/app/contracts.ts (this is the one place src/mqtt
// names them).
export type { Component as ServeComponent, ComponentFactory, DemoCredentials as MqttDemo, Services as MqttServices } from '../app/contracts.ts';
