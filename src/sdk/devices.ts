// ReefClient's calls for devices (seed §4.1, wire §1) and device templates (docs/api.md "Device
// templates"), and when each device last reported (its cadence).
import { ClientBase, seg, type CallOptions } from './transport.ts';
import type { Device, DeviceCadence, DeviceChange, DeviceTemplate, NewDevice, TemplateSensor } from './types.ts';
import { deviceMac, normalizeMac } from './types.ts';

export abstract class DeviceCalls extends ClientBase {
  async listDevices(opts: CallOptions & { deviceType?: string } = {}): Promise<Device[]> {
    const r = await this.request<{ devices: Device[] }>('GET', `${this.sol(opts)}/devices`, { query: { deviceType: opts.deviceType }, idempotent: true, signal: opts.signal });
    return r.data.devices;
  }

  async createDevice(device: NewDevice, opts: CallOptions = {}): Promise<Device> {
    const r = await this.request<Device>('POST', `${this.sol(opts)}/devices`, { body: device, idempotent: false, signal: opts.signal });
    return r.data;
  }

  async getDevice(id: string, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('GET', `${this.sol(opts)}/devices/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /**
   * Changes a device: `{deviceType}` and/or `{domainInfo}` as a JSON merge patch (null removes a
   * member), e.g. `{domainInfo: {location: {latitude, longitude}}}` or `{domainInfo: {templateId}}`.
   * Answers the device as stored.
   */
  async updateDevice(id: string, change: DeviceChange, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('PATCH', `${this.sol(opts)}/devices/${seg(id)}`, { body: change, idempotent: true, signal: opts.signal })).data;
  }

  /** Deletes the device and its observations; answers the device as it was. */
  async deleteDevice(id: string, opts: CallOptions = {}): Promise<Device> {
    return (await this.request<Device>('DELETE', `${this.sol(opts)}/devices/${seg(id)}`, { idempotent: true, signal: opts.signal })).data;
  }

  /**
   * The device of the solution with this MAC (any case, with or without `:`/`-`), matched against
   * every spelling a server may use (deviceMac), or null. The original platform did not dedupe
   * devices, so its clients looked a device up by MAC before creating one.
   */
  async findDeviceByMac(mac: string, opts: CallOptions = {}): Promise<Device | null> {
    const want = normalizeMac(mac);
    if (!want) throw new TypeError(`findDeviceByMac: ${JSON.stringify(mac)} is not a MAC of 16 hexadecimal digits`);
    return (await this.listDevices(opts)).find((d) => deviceMac(d) === want) ?? null;
  }

  // ---- device templates (wire §1) ---------------------------------------------------------------

  /** The device templates of the solution, in creation order. */
  async listDeviceTemplates(opts: CallOptions = {}): Promise<DeviceTemplate[]> {
    return (await this.request<{ deviceTemplates: DeviceTemplate[] }>('GET', `${this.sol(opts)}/devicetemplates`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  /** The static templates every tenant sees (GET /api/tenants/systemTenant/devicetemplates); they have no id. */
  async systemDeviceTemplates(opts: { signal?: AbortSignal } = {}): Promise<DeviceTemplate[]> {
    return (await this.request<{ deviceTemplates: DeviceTemplate[] }>('GET', '/api/tenants/systemTenant/devicetemplates', { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async getDeviceTemplate(id: string, opts: CallOptions = {}): Promise<DeviceTemplate> {
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('GET', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async createDeviceTemplate(t: { name: string; sensors: TemplateSensor[] }, opts: CallOptions = {}): Promise<DeviceTemplate> {
    const body = { deviceTemplate: { name: t.name, sensors: t.sensors } };
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('POST', `${this.sol(opts)}/devicetemplates`, { body, idempotent: false, signal: opts.signal })).data.deviceTemplates;
  }

  /** Replaces the template's name and sensors. */
  async updateDeviceTemplate(id: string, t: { name: string; sensors: TemplateSensor[] }, opts: CallOptions = {}): Promise<DeviceTemplate> {
    const body = { deviceTemplate: { name: t.name, sensors: t.sensors } };
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('PUT', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { body, idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  async deleteDeviceTemplate(id: string, opts: CallOptions = {}): Promise<DeviceTemplate> {
    return (await this.request<{ deviceTemplates: DeviceTemplate }>('DELETE', `${this.sol(opts)}/devicetemplates/${seg(id)}`, { idempotent: true, signal: opts.signal })).data.deviceTemplates;
  }

  /** When each device of the solution last reported and its usual interval (devices with readings). */
  async cadence(opts: CallOptions = {}): Promise<DeviceCadence[]> {
    return (await this.request<{ devices: DeviceCadence[] }>('GET', `${this.sol(opts)}/cadence`, { idempotent: true, signal: opts.signal })).data.devices;
  }
}
