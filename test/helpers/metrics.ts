// Reading a node's /metrics as Prometheus does: the text exposition format parsed into samples,
// so a test asserts on names, labels and values rather than on substrings.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  text: string;
  samples: Sample[];
  /** The `# TYPE` of each metric family. */
  types: Map<string, string>;
  /** The sum of the samples named `name` whose labels include `labels` (0 when none). */
  value(name: string, labels?: Record<string, string>): number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Scrape {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types.set(t[1]!, t[2]!);
    if (line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (!m) throw new Error(`not a sample line of the text format: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const v = m[3]!;
    samples.push({ name: m[1]!, labels, value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v) });
  }
  return {
    text,
    samples,
    types,
    value(name, want = {}) {
      let sum = 0;
      for (const s of samples) if (s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v)) sum += s.value;
      return sum;
    },
  };
}

/** GET a /metrics URL (with the bearer token when given) and parse it; throws unless 200. */
export async function scrapeMetrics(url: string, token?: string): Promise<Scrape> {
  const r = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  const text = await r.text();
  if (r.status !== 200) throw new Error(`scrape ${url}: ${r.status} ${text}`);
  return parseMetrics(text);
}
