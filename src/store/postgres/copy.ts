// COPY ... FROM STDIN on a pg connection, without another package: pg runs any object with a
// submit() method as a query (its "Submittable" protocol) and hands it the COPY messages. Used by
// the ingest benchmark to measure PostgreSQL's own bulk-load rate, the storage limit.
import type pg from 'pg';

interface Connection {
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
}

class CopyIn {
  rowCount = 0;
  private error: Error | null = null;
  private settle!: { resolve: (n: number) => void; reject: (e: Error) => void };
  readonly done = new Promise<number>((resolve, reject) => (this.settle = { resolve, reject }));

  constructor(readonly text: string, private readonly chunks: Buffer[]) {}

  submit(connection: Connection): void {
    connection.query(this.text);
  }
  handleCopyInResponse(connection: Connection): void {
    for (const c of this.chunks) connection.sendCopyFromChunk(c);
    connection.endCopyFrom();
  }
  handleCommandComplete(msg: { text?: string }): void {
    const m = /COPY (\d+)/.exec(msg.text ?? '');
    if (m) this.rowCount = Number(m[1]);
  }
  handleReadyForQuery(): void {
    if (this.error) this.settle.reject(this.error);
    else this.settle.resolve(this.rowCount);
  }
  handleError(e: Error): void {
    this.error = e;
    // A broken connection sends no ReadyForQuery: settle now.
    this.settle.reject(e);
  }
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
}

/** Runs `COPY <target> FROM STDIN` with the given text-format data; resolves to the row count. */
export async function copyFrom(client: pg.ClientBase, sql: string, chunks: Buffer[]): Promise<number> {
  const q = new CopyIn(sql, chunks);
  void q.done.catch(() => undefined);
  (client as unknown as { query(q: unknown): unknown }).query(q);
  return q.done;
}
