// Transmission parameters (RFC 7252 §4.8) and the times derived from them (§4.8.2). All in
// milliseconds here. Seed §8: the mesh needs application deadlines longer than these; callers pass
// their own via the endpoint's request timeout rather than by stretching the retransmission timers.

export interface TransmissionParams {
  ackTimeoutMs: number;
  ackRandomFactor: number;
  maxRetransmit: number;
  nstart: number;
  defaultLeisureMs: number;
  probingRateBytesPerSec: number;
  /** MAX_LATENCY: the longest a datagram is expected to be in flight. */
  maxLatencyMs: number;
}

export const DEFAULT_TRANSMISSION: Readonly<TransmissionParams> = Object.freeze({
  ackTimeoutMs: 2000,
  ackRandomFactor: 1.5,
  maxRetransmit: 4,
  nstart: 1,
  defaultLeisureMs: 5000,
  probingRateBytesPerSec: 1,
  maxLatencyMs: 100_000,
});

export interface DerivedTimes {
  maxTransmitSpanMs: number;
  maxTransmitWaitMs: number;
  processingDelayMs: number;
  maxRttMs: number;
  exchangeLifetimeMs: number;
  nonLifetimeMs: number;
}

export function derivedTimes(p: TransmissionParams): DerivedTimes {
  const maxTransmitSpanMs = p.ackTimeoutMs * (2 ** p.maxRetransmit - 1) * p.ackRandomFactor;
  const maxTransmitWaitMs = p.ackTimeoutMs * (2 ** (p.maxRetransmit + 1) - 1) * p.ackRandomFactor;
  const processingDelayMs = p.ackTimeoutMs;
  const maxRttMs = 2 * p.maxLatencyMs + processingDelayMs;
  return {
    maxTransmitSpanMs,
    maxTransmitWaitMs,
    processingDelayMs,
    maxRttMs,
    exchangeLifetimeMs: maxTransmitSpanMs + 2 * p.maxLatencyMs + processingDelayMs,
    nonLifetimeMs: maxTransmitSpanMs + p.maxLatencyMs,
  };
}

/** The first retransmission timeout: random in [ACK_TIMEOUT, ACK_TIMEOUT * ACK_RANDOM_FACTOR] (§4.2). */
export function initialTimeout(p: TransmissionParams, random: () => number = Math.random): number {
  return p.ackTimeoutMs * (1 + random() * (p.ackRandomFactor - 1));
}

export function transmissionParams(over: Partial<TransmissionParams> = {}): TransmissionParams {
  return { ...DEFAULT_TRANSMISSION, ...over };
}
