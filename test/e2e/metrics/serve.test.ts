// `reef serve` as an operator runs it: log lines for people with REEF_LOG_FORMAT=pretty, JSON lines
// when the output is a pipe and nothing is set, and the scrape listener printed in the banner and
// answering Prometheus with the token (docs/operations.md "Metrics and logs").
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, it } from 'node:test';
import { scrapeMetrics } from '../../helpers/metrics.ts';
import { serveReef, type ServingReef } from '../../helpers/reef.ts';
import { tempDir } from '../../helpers/server.ts';
import { waitFor } from '../../helpers/wait.ts';

const TOKEN = 'e2e-scrape-token-91c4d0';
const dirs: string[] = [];
const running: ServingReef[] = [];
after(async () => {
  await Promise.all(running.map((r) => r.stop()));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

async function serve(env: Record<string, string>): Promise<{ reef: ServingReef; metrics: string }> {
  const dir = tempDir('reef-metrics-e2e-');
  dirs.push(dir);
  const args = ['--port', '0', '--gateway', 'false', '--mqtt', 'false', '--demo', 'false', '--data-dir', dir, '--metrics-listen', '127.0.0.1:0'];
  const reef = await serveReef(args, { until: /Metrics:\s+\S+/, env: { REEF_LOG_LEVEL: 'info', REEF_METRICS_TOKEN: TOKEN, ...env } });
  running.push(reef);
  // JSON lines are written asynchronously: the start-up line may follow the banner.
  await waitFor('the start-up log line', () => reef.output().includes('reef is listening'));
  return { reef, metrics: /Metrics:\s+(\S+)/.exec(reef.output())![1]! };
}

/** The lines of the output that are logs (not the banner, whose lines start with "Reef is" or two spaces). */
const logLines = (out: string) => out.split('\n').filter((l) => l && !l.startsWith('Reef is running') && !l.startsWith('  '));

describe('reef serve: logs and metrics', () => {
  it('REEF_LOG_FORMAT=pretty writes lines for people; the banner names the scrape listener, which answers with the token', async () => {
    const { reef, metrics } = await serve({ REEF_LOG_FORMAT: 'pretty' });
    const lines = logLines(reef.output());
    assert.ok(lines.length > 0, reef.output());
    for (const l of lines) assert.ok(!l.startsWith('{'), `a JSON line: ${l}`);
    assert.ok(
      lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: reef is listening/.test(l)),
      reef.output(),
    );
    assert.match(metrics, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.equal((await fetch(metrics)).status, 401);
    const s = await scrapeMetrics(metrics, TOKEN);
    assert.equal(s.value('reef_leader'), 1);
    assert.ok(s.value('process_resident_memory_bytes') > 0);
    await reef.stop();
  });

  it('with standard output a pipe and no setting, every log line is JSON', async () => {
    const { reef } = await serve({});
    const lines = logLines(reef.output());
    assert.ok(lines.length > 0, reef.output());
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; level: number });
    assert.ok(parsed.some((p) => p.msg === 'reef is listening' && p.level === 30));
    await reef.stop();
  });
});
