// The view in the page's address (solution, devices, field, range or Live, zoom, map view), so a
// reload, a bookmark or a link shows the same (docs/web.md "Reload and share"). The address is
// replaced, not pushed: Back leaves the app.
import type { Connection, Device } from './api.ts';
import type { Range } from './range.ts';
import { readView, type View, writeView } from './session.ts';

export interface ViewHost {
  conn(): Connection | null;
  selected(): string[];
  field(): string;
  range(): Range;
  zoom(): [number, number] | null;
  live(): boolean;
  map(): View['map'];
  /** Shows the devices the address named (still listed), zoomed as it said. */
  show(ids: string[], zoom: [number, number] | null): void;
  /** The address named none of the devices: the freshest is shown. */
  selectFirst(devices: Device[]): void;
}

export class AddressView {
  /** The view the address asked for when the page opened. */
  readonly initial: View | null = readView(location.search);
  /** The asked-for view, until the solution's devices are known; meanwhile the address is kept as it is. */
  pending: View | null = this.initial;

  constructor(private readonly host: ViewHost) {}

  /** The current view into the address. */
  save(): void {
    const { host } = this;
    const conn = host.conn();
    if (!conn || this.pending) return;
    const search = writeView({ solution: conn.solution, devices: host.selected(), field: host.field(), range: host.range(), zoom: host.zoom(), live: host.live(), map: host.map() });
    if (search !== location.search) history.replaceState(null, '', `${location.pathname}${search}`);
  }

  /** The devices the address named (those still listed), or the freshest device. */
  apply(devices: Device[]): void {
    const want = this.pending?.devices?.filter((id) => devices.some((d) => d.id === id)) ?? [];
    const zoom = this.pending?.zoom ?? null;
    this.pending = null;
    if (want.length) this.host.show(want, zoom);
    else if (devices.length) this.host.selectFirst(devices);
  }

  /** The bare address (disconnected). */
  clear(): void {
    history.replaceState(null, '', location.pathname);
  }
}
