// The one way tests and benches find a free loopback port, for what cannot take port 0 itself:
// redis-server and PostgreSQL (--port 0 turns TCP off), influxd, coap-client's fixed source port.
import dgram from 'node:dgram';
import net from 'node:net';

/** A port nobody uses on 127.0.0.1 right now (also one that refuses connections): TCP, or UDP. */
export function freePort(kind: 'tcp' | 'udp' = 'tcp'): Promise<number> {
  if (kind === 'udp') {
    return new Promise((resolve, reject) => {
      const s = dgram.createSocket('udp4');
      s.on('error', reject);
      s.bind(0, '127.0.0.1', () => {
        const port = s.address().port;
        s.close(() => resolve(port));
      });
    });
  }
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
