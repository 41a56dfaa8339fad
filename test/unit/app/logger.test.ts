// The logger's format (src/app/logger.ts): pretty for a person at a terminal, JSON for collectors,
// REEF_LOG_FORMAT forcing either; secrets redacted in both. Written to an in-memory stream that
// says whether it is a terminal, as process.stdout does.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { it } from 'node:test';
import { createLogger, logFormat } from '../../../src/app/logger.ts';

it('auto is pretty exactly at a terminal; json and pretty are what they say', () => {
  assert.equal(logFormat('auto', true), 'pretty');
  assert.equal(logFormat('auto', false), 'json');
  assert.equal(logFormat('json', true), 'json');
  assert.equal(logFormat('pretty', false), 'pretty');
});

/** What one info line with a secret looks like on a stream that is, or is not, a terminal. */
async function line(format: 'auto' | 'json' | 'pretty', isTTY: boolean): Promise<string> {
  const out = Object.assign(new PassThrough(), { isTTY });
  let text = '';
  out.on('data', (c: Buffer) => (text += c.toString('utf8')));
  const log = await createLogger({ logLevel: 'info', logFormat: format }, out);
  log.info({ account: { clientSecret: 'shh-secret-value' }, port: 8080 }, 'reef is listening');
  log.flush();
  await new Promise((r) => setImmediate(r));
  return text;
}

it('writes JSON lines when the output is no terminal, lines for people when it is', async () => {
  const json = await line('auto', false);
  const parsed = JSON.parse(json.trim()) as Record<string, unknown>;
  assert.equal(parsed.msg, 'reef is listening');
  assert.equal(parsed.level, 30);
  assert.deepEqual(parsed.account, { clientSecret: '[redacted]' });

  const pretty = await line('auto', true);
  assert.throws(() => JSON.parse(pretty.trim()), 'not JSON');
  // Colours at a terminal: strip the escape sequences to read the words.
  const plain = pretty.replace(/\x1b\[[0-9;]*m/g, '');
  assert.match(plain, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: reef is listening$/m);
  assert.match(plain, /port: 8080/);
  assert.ok(!plain.includes('shh-secret-value'), 'the secret is redacted');
  assert.notEqual(pretty, plain, 'coloured at a terminal');
});

it('REEF_LOG_FORMAT forces either, whatever the output', async () => {
  const json = await line('json', true);
  assert.equal((JSON.parse(json.trim()) as { msg: string }).msg, 'reef is listening');
  const pretty = await line('pretty', false);
  assert.match(pretty, /INFO: reef is listening/);
  assert.ok(!pretty.includes('\x1b['), 'no colours when the output is no terminal');
});
