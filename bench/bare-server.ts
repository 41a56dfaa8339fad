// The baseline of bench:query: a bare Fastify route answering the same devices JSON from memory,
// with no authentication, no store and no schema — what Fastify alone costs on this machine.
import Fastify from 'fastify';

const payload = JSON.parse(process.env.BARE_PAYLOAD ?? '{"devices":[]}');
const app = Fastify({ logger: false });
app.get('/devices', async () => payload);
await app.listen({ host: '127.0.0.1', port: 0 });
const addr = app.server.address();
process.stdout.write(`listening ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
