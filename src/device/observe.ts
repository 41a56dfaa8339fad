// Observers of the kit's observable resource (RFC 7641). The kit keeps one observer per resource
// by default (wire §2: a new registration replaces the old); `limit` allows more, replacing the
// oldest. An observer is identified by its token (every request reaches the application processor
// from the one network module, RFC 7641 §4.1 then reduces to the token). Notifications carry a
// 24-bit sequence number (RFC 7641 §4.4); every `conEvery`-th is CON so that an observer that has
// gone away is noticed (RFC 7641 §4.5: at least every 24 hours; here every few), and an observer
// is dropped when a notification is answered RST or a CON one is not acknowledged in time.

export interface Observer {
  token: Buffer;
  resource: string;
  /** Accept/Block2 and other request details a notification repeats. */
  cbor: boolean;
  registeredAt: number;
  sent: number;
}

export class ObserverRegistry {
  private readonly byResource = new Map<string, Observer[]>();
  private seq = 0;

  constructor(
    private readonly limit = 1,
    private readonly conEvery = 5,
  ) {}

  /** Registers (or re-registers, RFC 7641 §4.1) an observer; returns those it displaced. */
  add(o: Observer): Observer[] {
    const list = (this.byResource.get(o.resource) ?? []).filter((x) => !x.token.equals(o.token));
    list.push(o);
    const displaced = list.length > this.limit ? list.splice(0, list.length - this.limit) : [];
    this.byResource.set(o.resource, list);
    return displaced;
  }

  remove(token: Buffer, resource?: string): Observer | undefined {
    for (const [res, list] of this.byResource) {
      if (resource !== undefined && res !== resource) continue;
      const i = list.findIndex((x) => x.token.equals(token));
      if (i >= 0) {
        const [o] = list.splice(i, 1);
        if (list.length === 0) this.byResource.delete(res);
        return o;
      }
    }
    return undefined;
  }

  list(resource?: string): Observer[] {
    if (resource !== undefined) return [...(this.byResource.get(resource) ?? [])];
    return [...this.byResource.values()].flat();
  }

  get size(): number {
    let n = 0;
    for (const l of this.byResource.values()) n += l.length;
    return n;
  }

  /** The next 24-bit Observe value (RFC 7641 §4.4); one counter per kit keeps values increasing. */
  nextSeq(): number {
    this.seq = (this.seq + 1) & 0xffffff;
    return this.seq;
  }

  get currentSeq(): number {
    return this.seq;
  }

  /** Whether this observer's next notification should be CON. */
  confirmable(o: Observer): boolean {
    o.sent++;
    return this.conEvery > 0 && o.sent % this.conEvery === 0;
  }

  clear(): void {
    this.byResource.clear();
  }
}
