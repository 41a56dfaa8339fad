// How to reach this account's kit payloads and alarms over MQTT (docs/mqtt.md), under the status
// line: the broker, the credentials, the topics and an example command.
import type { Connection } from './api.ts';
import { $, el } from './format.ts';

/**
 * Fills the MQTT panel for `conn`; it stays hidden when the service runs no broker, the answer does
 * not come, or `current()` is no longer `conn` when it does (the user switched or disconnected).
 */
export async function showMqtt(conn: Connection, current: () => Connection | null): Promise<void> {
  const box = $('mqtt-info') as HTMLDetailsElement;
  box.hidden = true;
  let info: Awaited<ReturnType<typeof conn.client.mqttInfo>>;
  try {
    info = await conn.client.mqttInfo();
  } catch {
    return;
  }
  if (!info || current() !== conn) return;
  const rows: [string, string][] = [
    ['Broker', info.url + (info.tlsUrl ? `  (TLS: ${info.tlsUrl})` : '')],
    ['User name', info.username],
    ['Password', info.password],
    ['Kit payloads', info.topics.alerts],
    ['Alarms', `${info.tenantId}/alarms/+`],
    ['Upload to', info.topics.ingest],
    ['Try', info.example],
  ];
  box.querySelector('dl')!.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { class: 'mono' }, v)]));
  box.hidden = false;
}

/** Hides the panel (on disconnect). */
export function hideMqtt(): void {
  $('mqtt-info').hidden = true;
}
