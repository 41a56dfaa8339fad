// The device map, loaded lazily (so the first paint stays fast): this wrapper is all the
// first bundle carries; the map itself (d3-geo, topojson-client, src/map-view.ts) and the Natural
// Earth borders (world-atlas, fetched from this server: no network beyond Reef) load when a solution
// has located devices.
import type { Device } from './api.ts';
import type { Quantity } from './fields.ts';
import type { Latest } from './table.ts';
import type { MapView } from './map-view.ts';

export interface MapContext {
  latest: Map<string, Latest>;
  selected: () => string[];
  quantity: () => Quantity;
  select: (id: string, mode: 'only' | 'toggle') => void;
}

export class DeviceMap {
  private view: MapView | null = null;
  private loading: Promise<MapView> | null = null;
  private devices: Device[] = [];

  constructor(
    private readonly host: HTMLElement,
    private readonly figure: HTMLElement,
    private readonly legend: HTMLElement,
    private readonly ctx: MapContext,
  ) {}

  setDevices(devices: Device[]): void {
    this.devices = devices.filter((d) => d.domainInfo?.location && Number.isFinite(d.domainInfo.location.latitude) && Number.isFinite(d.domainInfo.location.longitude));
    this.figure.hidden = this.devices.length === 0;
    if (this.view) this.view.setDevices(this.devices);
    else if (this.devices.length) void this.load();
  }

  private load(): Promise<MapView> {
    this.loading ??= import('./map-view.ts').then(({ MapView }) => {
      this.view = new MapView(this.host, this.legend, this.ctx);
      this.view.setDevices(this.devices);
      return this.view;
    });
    return this.loading;
  }

  /** Colours from the latest values, rings on the selection. */
  refresh(): void {
    this.view?.refresh();
  }
}
