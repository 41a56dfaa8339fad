// The topic tree of Reef's MQTT broker (docs/mqtt.md "Topics"). Every topic starts with a tenant id,
// so authorization is a question about its first level (MQTT 3.1.1 §4.7: levels split on '/').
//   <tenantId>/alert/<mac>/<sensorType>                               kit payloads (the broker publishes)
//   <tenantId>/solutions/<solution>/devices/<deviceId>/observations   ingest (clients publish)
//   <tenantId>/errors/<clientId>                                      why a client's message was refused
//   <tenantId>/alarms/<deviceId>                                      an alarm raised, acknowledged or cleared

/** A tenant id as a topic level: no wildcard, separator or '$' (tenant ids are TN + 20 hex digits). */
const TENANT_LEVEL = /^[A-Za-z0-9_-]{1,64}$/;

export function alertTopic(tenantId: string, mac: string, sensorType: string): string {
  return `${tenantId}/alert/${mac}/${sensorType}`;
}

/** Alarms of a device (docs/alarms.md): the tenant is the device's owner. */
export function alarmTopic(tenantId: string, deviceId: string): string {
  return `${tenantId}/alarms/${deviceId}`;
}

/** A client id as one topic level: '/', '+', '#' and control characters become '_'. */
export function errorsTopic(tenantId: string, clientId: string): string {
  return `${tenantId}/errors/${(clientId || 'anonymous').replace(/[/+#\u0000-\u001f]/g, '_').slice(0, 128)}`;
}

/**
 * The literal tenant id a topic or topic filter starts with, or null when its first level is a
 * wildcard, empty, or a '$' topic: such filters span tenants and are refused, never widened.
 */
export function topicTenant(topic: string): string | null {
  const i = topic.indexOf('/');
  const first = i < 0 ? topic : topic.slice(0, i);
  return TENANT_LEVEL.test(first) ? first : null;
}

export interface IngestTarget {
  tenantId: string;
  solution: string;
  deviceId: string;
}

/** `<tenantId>/solutions/<solution>/devices/<deviceId>/observations`, or null for any other topic. */
export function ingestTarget(topic: string): IngestTarget | null {
  const l = topic.split('/');
  if (l.length !== 6 || l[1] !== 'solutions' || l[3] !== 'devices' || l[5] !== 'observations') return null;
  const tenantId = topicTenant(topic);
  if (!tenantId || !l[2] || !l[4]) return null;
  return { tenantId, solution: l[2], deviceId: l[4] };
}
