// A Server-Sent Events parser over a fetch body (WHATWG HTML, "Server-sent events", §9.2.6), so live
// streams can send the Authorization header — EventSource cannot — in browsers and in Node alike.

export interface SseMessage {
  event: string;
  data: string;
  id: string | undefined;
  /** A `retry:` field: the server's reconnection delay in ms. */
  retry: number | undefined;
}

/** Yields each dispatched message of an event stream body. Comments (`: keep-alive`) are skipped. */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let data: string[] = [];
  let id: string | undefined;
  let retry: number | undefined;
  let first = true;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      if (first && buffer.length) {
        if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
        first = false;
      }
      // Lines end in CRLF, LF or CR; a lone trailing CR may be the first half of a CRLF.
      let start = 0;
      for (;;) {
        let i = start;
        while (i < buffer.length && buffer[i] !== '\n' && buffer[i] !== '\r') i++;
        if (i >= buffer.length) break;
        if (buffer[i] === '\r' && i + 1 >= buffer.length) break;
        const line = buffer.slice(start, i);
        start = buffer[i] === '\r' && buffer[i + 1] === '\n' ? i + 2 : i + 1;
        if (line === '') {
          if (data.length) yield { event: event || 'message', data: data.join('\n'), id, retry };
          event = '';
          data = [];
          retry = undefined;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') event = val;
        else if (field === 'data') data.push(val);
        else if (field === 'id' && !val.includes('\0')) id = val;
        else if (field === 'retry' && /^\d+$/.test(val)) retry = Number(val);
      }
      buffer = buffer.slice(start);
    }
  } finally {
    // Ending the iteration early (break, abort) releases the connection.
    await reader.cancel().catch(() => {});
  }
}
