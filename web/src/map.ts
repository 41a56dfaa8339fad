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
  /** True when the device is stale or its kit offline: its mark says so. */
  stale?: (id: string) => boolean;
  /** The device's name or short id. */
  label?: (id: string) => string;
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

  private pendingView: { lon: number; lat: number; scale: number } | null = null;
  /** Called after the map's view moved. */
  onView: () => void = () => {};

  /** The map's middle and scale (null before it is shown). */
  viewState(): { lon: number; lat: number; scale: number } | null {
    return this.view?.viewState() ?? this.pendingView;
  }

  /** A view to show instead of fitting the devices (from the page's address). */
  setViewState(v: { lon: number; lat: number; scale: number }): void {
    if (this.view) this.view.setViewState(v);
    else this.pendingView = v;
  }

  private load(): Promise<MapView> {
    this.loading ??= import('./map-view.ts').then(({ MapView }) => {
      this.view = new MapView(this.host, this.legend, this.ctx);
      this.view.onView = () => this.onView();
      if (this.pendingView) this.view.setViewState(this.pendingView);
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
