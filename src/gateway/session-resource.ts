// The gateway's /sessions resource (seed §5; docs/coap.md): a client opens a session for its address
// and port with its token (POST or PUT, text), shows it (GET) and closes it (DELETE). The table of
// sessions itself, their expiry and account checks are sessions.ts.
import type { Logger } from 'pino';
import { Code, ContentFormat, getUintOption, Option, type CoapMessage, type Peer, type ResponseSpec } from '../coap/index.ts';
import { ReefError, isReefError } from '../core/errors.ts';
import { boundedFailure, text } from './answers.ts';
import type { SessionTable } from './sessions.ts';

export class SessionResource {
  constructor(
    private readonly sessions: SessionTable,
    private readonly log: Logger,
  ) {}

  async handle(req: CoapMessage, peer: Peer): Promise<ResponseSpec> {
    // The original Java client opens a session with POST or PUT: both carry the token.
    if (req.code === Code.POST || req.code === Code.PUT) {
      const cf = getUintOption(req, Option.CONTENT_FORMAT);
      if (cf !== undefined && cf !== ContentFormat.TEXT_PLAIN) return this.small(req, peer, new ReefError('UNSUPPORTED_MEDIA_TYPE', 'send the token as text (content-format 0)'));
      try {
        const s = await this.sessions.open(peer, req.payload.toString('utf8'));
        this.log.info({ peer: s.key, tenantId: s.tenantId }, 'gateway session opened');
        return text(Code.CREATED, `session open until ${new Date(s.expiresAt).toISOString()}`);
      } catch (e) {
        if (isReefError(e)) return this.small(req, peer, e);
        throw e;
      }
    }
    if (req.code === Code.DELETE) {
      this.sessions.close(peer);
      return { code: Code.DELETED };
    }
    if (req.code === Code.GET) {
      try {
        const s = await this.sessions.check(peer);
        return text(Code.CONTENT, `${s.tenantId} until ${new Date(s.expiresAt).toISOString()}`);
      } catch (e) {
        if (isReefError(e)) return this.small(req, peer, e);
        throw e;
      }
    }
    return this.small(req, peer, new ReefError('METHOD_NOT_ALLOWED', 'POST or PUT, GET or DELETE'));
  }

  /** A refusal no larger than the request for a peer without a session (answers.ts). */
  private small(req: CoapMessage, peer: Peer, e: ReefError): ResponseSpec {
    return boundedFailure(req, e, this.sessions.peek(peer) !== undefined);
  }
}
