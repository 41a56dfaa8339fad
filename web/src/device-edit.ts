// The device panel: the selected device's location and template, changed in place (PATCH with a
// JSON merge patch, docs/api.md "Changing a device"). Empty coordinates remove the location; "No
// template" removes the template. The service checks the change as it checks a new device, and its
// message is shown beside the Save button; on success the device list reloads (and with it the
// map, the fields a template offers and the template's alarm lines).
import type { DeviceTemplate } from '../../src/sdk/index.ts';
import type { Connection, Device } from './api.ts';
import { addCollapse, el, firstSelected, nameOf, shortId } from './format.ts';
import type { PanelContext } from './panels.ts';

export class DevicePanel {
  private device: Device | null = null;
  private templates: DeviceTemplate[] = [];
  private op = 0;

  constructor(
    private readonly root: HTMLElement,
    private readonly conn: Connection,
    private readonly ctx: PanelContext,
  ) {}

  /** Shows the panel for the first selected device; follows the device as stored. */
  update(): void {
    const d = firstSelected(this.ctx);
    if (d && this.device && d.id === this.device.id) {
      // The same device, perhaps as stored after a change: its values, the messages kept.
      if (JSON.stringify(d) !== JSON.stringify(this.device)) {
        this.device = d;
        this.setValues(d);
      }
      return;
    }
    this.device = d;
    this.root.hidden = !d;
    if (!d) {
      this.root.replaceChildren();
      return;
    }
    this.render(d);
    void this.loadTemplates(d);
  }

  destroy(): void {
    this.device = null;
    this.root.hidden = true;
    this.root.replaceChildren();
  }

  private async loadTemplates(d: Device): Promise<void> {
    const op = ++this.op;
    try {
      const list = await this.conn.client.listDeviceTemplates();
      if (op !== this.op || this.device?.id !== d.id) return;
      this.templates = list.filter((t) => typeof t.id === 'string');
      this.fillTemplates(d);
    } catch {
      // Without the list the select keeps "No template" and the device's own, by id.
    }
  }

  private fillTemplates(d: Device): void {
    const select = this.root.querySelector<HTMLSelectElement>('#device-template');
    if (!select) return;
    const current = typeof d.domainInfo?.templateId === 'string' ? d.domainInfo.templateId : '';
    const options = [el('option', { value: '' }, 'No template')];
    for (const t of this.templates) options.push(el('option', { value: t.id! }, t.name));
    if (current && !this.templates.some((t) => t.id === current)) options.push(el('option', { value: current }, `${shortId(current)} (not found)`));
    select.replaceChildren(...options);
    select.value = current;
  }

  private setValues(d: Device): void {
    const loc = d.domainInfo?.location;
    const set = (id: string, v: string) => {
      const i = this.root.querySelector<HTMLInputElement>(`#${id}`);
      if (i) i.value = v;
    };
    set('device-name', nameOf(d));
    set('device-lat', loc ? String(loc.latitude) : '');
    set('device-lon', loc ? String(loc.longitude) : '');
    this.fillTemplates(d);
  }

  private render(d: Device): void {
    const loc = d.domainInfo?.location;
    const input = (id: string, label: string, value: string, attrs: Record<string, string>) =>
      el('div', { class: 'field' }, el('label', { for: id }, label), el('input', { id, type: 'number', step: 'any', value, 'aria-describedby': 'device-error', ...attrs }));
    const status = el('p', { id: 'device-status', role: 'status', 'aria-live': 'polite', class: 'muted' });
    const error = el('p', { id: 'device-error', class: 'error-text', role: 'alert' });
    const form = el(
      'form',
      // The service checks the values (its message names the field), not the browser's own bubbles.
      { class: 'device-form', novalidate: '', 'aria-label': `Location and template of device ${shortId(d.id)}` },
      el(
        'div',
        { class: 'row' },
        el(
          'div',
          { class: 'field name-field' },
          el('label', { for: 'device-name' }, 'Name'),
          el('input', { id: 'device-name', type: 'text', maxlength: '100', value: nameOf(d), placeholder: shortId(d.id), 'aria-describedby': 'device-error' }),
        ),
      ),
      el(
        'div',
        { class: 'row' },
        input('device-lat', 'Latitude', loc ? String(loc.latitude) : '', { min: '-90', max: '90' }),
        input('device-lon', 'Longitude', loc ? String(loc.longitude) : '', { min: '-180', max: '180' }),
        el('div', { class: 'field' }, el('label', { for: 'device-template' }, 'Template'), el('select', { id: 'device-template' }, el('option', { value: '' }, 'No template'))),
      ),
      el('div', { class: 'row' }, el('button', { type: 'submit', id: 'device-save', 'aria-describedby': 'device-error' }, 'Save device')),
      error,
      status,
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.save(d);
    });
    this.root.replaceChildren(el('h2', { id: 'device-h' }, `Device ${nameOf(d) || shortId(d.id)}`, el('span', { class: 'count' }, ` · ${d.deviceType}`)), form);
    this.fillTemplates(d);
    addCollapse(this.root);
  }

  private async save(d: Device): Promise<void> {
    const value = (id: string) => this.root.querySelector<HTMLInputElement | HTMLSelectElement>(`#${id}`)!.value.trim();
    const error = this.root.querySelector('#device-error')!;
    const status = this.root.querySelector('#device-status')!;
    error.textContent = '';
    status.textContent = '';
    const [name, lat, lon, template] = [value('device-name'), value('device-lat'), value('device-lon'), value('device-template')];
    if ((lat === '') !== (lon === '')) {
      error.textContent = 'Give both latitude and longitude, or neither to remove the location.';
      return;
    }
    const domainInfo: Record<string, unknown> = {
      location: lat === '' ? null : { latitude: Number(lat), longitude: Number(lon) },
      templateId: template === '' ? null : template,
      // An emptied name removes it: the id is shown again.
      name: name === '' ? null : name,
    };
    try {
      await this.conn.client.updateDevice(d.id, { domainInfo });
      status.textContent = 'Saved.';
      this.ctx.reloadDevices();
    } catch (e) {
      error.textContent = e instanceof Error ? e.message : String(e);
    }
  }
}
