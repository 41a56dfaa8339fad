// Tests read event streams with the SDK's own parser (src/sdk/sse.ts), as clients do: no
// hand-split "data:" lines. The stream stays open until the test closes or aborts it.
import { parseSse, type SseMessage } from '../../src/sdk/sse.ts';

export interface EventReader {
  /** The next message, or null when the stream ended. */
  next(): Promise<SseMessage | null>;
  /** Messages in order until `want` of event `name` arrived (or the stream ended). */
  take(want: number, name: string): Promise<SseMessage[]>;
  close(): Promise<void>;
}

/**
 * Reads a fetch response as an event stream. `subscribed: true` first waits for the server's
 * opening bytes (its ": connected" comment), so the caller knows the subscription is in place
 * before it makes the events happen.
 */
export async function readSse(res: Response, opts: { subscribed?: boolean } = {}): Promise<EventReader> {
  let body: ReadableStream<Uint8Array> = res.body!;
  if (opts.subscribed) {
    const reader = body.getReader();
    const first = await reader.read();
    body = new ReadableStream<Uint8Array>({
      start(c) {
        if (first.done) c.close();
        else c.enqueue(first.value);
      },
      async pull(c) {
        const r = await reader.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
  }
  const gen = parseSse(body);
  const next = async () => {
    const r = await gen.next();
    return r.done ? null : r.value;
  };
  return {
    next,
    async take(want, name) {
      const out: SseMessage[] = [];
      while (out.filter((m) => m.event === name).length < want) {
        const m = await next();
        if (!m) break;
        out.push(m);
      }
      return out;
    },
    async close() {
      await gen.return(undefined);
    },
  };
}
