// CON retransmission (RFC 7252 §4.2, §4.8): a confirmable message is sent again after a timeout
// that doubles each time, from a random start in [ACK_TIMEOUT, ACK_TIMEOUT × ACK_RANDOM_FACTOR],
// until an ACK or RST for its Message ID arrives or MAX_RETRANSMIT is exhausted.
import type { CoapMessage } from './message.ts';
import type { Peer } from './peers.ts';
import { initialTimeout, type TransmissionParams } from './timing.ts';

export type DeliveryResult = 'ack' | 'reset' | 'timeout';

interface Transaction {
  peer: Peer;
  data: Buffer;
  timer: NodeJS.Timeout | undefined;
  timeout: number;
  tries: number;
  done: (r: DeliveryResult, ack?: CoapMessage) => void;
}

export interface RetransmitDeps {
  params: TransmissionParams;
  random: () => number;
  /** Writes a datagram; `msg` is given for the first transmission only (traces). */
  write(peer: Peer, data: Buffer, msg?: CoapMessage): void;
  stats: { retransmitted: number };
  closed(): boolean;
}

export class Retransmissions {
  /** CON messages awaiting their ACK or RST, by `peerKey|MID`. */
  private readonly transactions = new Map<string, Transaction>();

  constructor(private readonly d: RetransmitDeps) {}

  /** Sends a serialized CON (`key`: `peerKey|MID`) and retransmits it; resolves 'ack', 'reset' or 'timeout'. */
  send(peer: Peer, key: string, msg: CoapMessage, data: Buffer, maxRetransmit: number): Promise<{ result: DeliveryResult; ack?: CoapMessage }> {
    return new Promise((resolve) => {
      const t: Transaction = {
        peer,
        data,
        timer: undefined,
        timeout: initialTimeout(this.d.params, this.d.random),
        tries: 0,
        done: (result, ack) => {
          if (t.timer) clearTimeout(t.timer);
          this.transactions.delete(key);
          resolve(ack ? { result, ack } : { result });
        },
      };
      this.transactions.get(key)?.done('timeout');
      this.transactions.set(key, t);
      const fire = (): void => {
        if (this.d.closed()) return t.done('timeout');
        if (t.tries > maxRetransmit) return t.done('timeout');
        if (t.tries > 0) this.d.stats.retransmitted++;
        this.d.write(peer, t.data, t.tries === 0 ? msg : undefined);
        t.tries++;
        // After the last retransmission one more (doubled) timeout is waited for the ACK, which
        // makes the whole span MAX_TRANSMIT_WAIT (§4.8.2).
        t.timer = setTimeout(fire, t.timeout);
        t.timeout *= 2;
      };
      fire();
    });
  }

  /** An ACK or RST for `peerKey|MID`: ends its transaction; false when none waits for it. */
  settle(key: string, result: DeliveryResult, m: CoapMessage): boolean {
    const t = this.transactions.get(key);
    if (!t) return false;
    t.done(result, m);
    return true;
  }

  /** Ends every transaction as 'timeout' (the endpoint closes). */
  closeAll(): void {
    for (const t of this.transactions.values()) t.done('timeout');
  }
}
