// The dev kit and simulation panels, shown when they apply (a NICDevKit selected in sandbox; the
// StudioSimulation solution).
import type { Connection, Device } from './api.ts';
import type { Unit } from './format.ts';

export interface PanelContext {
  devices: () => Device[];
  selected: () => string[];
  unit: () => Unit;
  message: (text: string, kind?: 'error' | 'info') => void;
  reloadDevices: () => void;
}

export interface Panels {
  update(): void;
  event(type: string, data: unknown): void;
  destroy(): void;
}

export function mountPanels(_conn: Connection, _ctx: PanelContext): Panels {
  return { update() {}, event() {}, destroy() {} };
}
