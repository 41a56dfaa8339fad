// How request bodies are read (docs/api.md "Request bodies and content types").
// Every Reef request body is JSON, and the original clients are loose about saying so: the
// JavaScript SDK sends `Content-Type: application/json` on bodiless GETs and DELETEs, and the
// Windows client clears the header before it posts its credentials. So:
// - `application/json` (any parameters): JSON; an empty body is "no body".
// - no Content-Type at all, or the header with an empty value (`Content-Type:`, which says no
//   type either): read as JSON on every route (RFC 9110 §8.3 lets a recipient examine the data
//   when the type is missing; JSON is the only thing Reef takes).
// - `text/plain`: JSON on the token routes (acceptJsonAsText), where clients send it; 415 on the
//   other routes that take a JSON body (those with a body schema); a text payload on a route
//   without one (the CoAP bridge's PUT/POST carries a kit payload as text).
// - `application/merge-patch+json` (RFC 7396 §4): JSON, on PATCH only.
// - any other declared type: 415 UNSUPPORTED_MEDIA_TYPE. A body that is not JSON: 400 MALFORMED_JSON.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ReefError } from '../core/errors.ts';

type Done = (err: Error | null, body?: unknown) => void;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A route's own reader for the common shape of its body (the observation upload),
     * given the bytes as received: returns the body, or undefined for anything else, which then
     * takes the general JSON path below (and so gets the same answers as before, errors included).
     */
    scanBody?: (bytes: Uint8Array) => unknown;
  }
}

/**
 * Deepest JSON nesting a body may have. No Reef document nests past a handful of levels; bodies
 * nested thousands deep were answered 500 (a recursive step past them ran out of stack, issue
 * 11.7), so they are refused before parsing.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * One pass over the text, brackets outside strings only; stops as soon as the limit is passed.
 * Strings are jumped over with indexOf (native), since most of an upload's text is inside them.
 */
export function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      let j = text.indexOf('"', i + 1);
      while (j > 0 && escaped(text, j)) j = text.indexOf('"', j + 1);
      if (j < 0) return false; // unterminated: JSON.parse refuses it
      i = j;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/** Whether the quote at `j` is escaped: an odd number of backslashes before it. */
function escaped(text: string, j: number): boolean {
  let k = j - 1;
  while (text.charCodeAt(k) === 92 /* \\ */) k--;
  return (j - 1 - k) % 2 === 1;
}

/**
 * JSON body → value: a route's scanBody first (bytes), then as text: empty is "no body", nesting
 * bounded, then the default parser. Bodies are read as bytes (parseAs 'buffer') and decoded here
 * only when the scan does not take them: the same UTF-8 decoding Fastify's 'string' did.
 */
function jsonReader(app: FastifyInstance): (request: FastifyRequest, body: string | Buffer, done: Done) => void {
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  return (request, body, done) => {
    const scan = request.routeOptions.config?.scanBody;
    if (scan && typeof body !== 'string') {
      const scanned = scan(body);
      if (scanned !== undefined) return done(null, scanned);
    }
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
      return done(new ReefError('VALIDATION_FAILED', `the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`, { field: 'body' }), undefined);
    }
    return defaultJson(request, text, done);
  };
}

/**
 * Root-level parsers: application/json (empty allowed) and a missing Content-Type read as JSON.
 * An empty `Content-Type:` names no type, so it is removed before Fastify reads it (which would
 * answer 415 for an invalid media type): the request is then read as one without the header.
 */
export function installBodyParsers(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const type = request.raw.headers['content-type'];
    if (type !== undefined && type.trim() === '') delete request.raw.headers['content-type'];
    done();
  });
  const json = jsonReader(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, json);
  // '*' is Fastify's catch-all: it sees both "no Content-Type" and types no parser claims.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    if (request.headers['content-type'] === undefined) return json(request, body, done);
    return done(unsupported(request));
  });
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (request, body, done) => {
    if (request.routeOptions.schema?.body) return done(unsupported(request));
    return done(null, body);
  });
  // A JSON merge patch (RFC 7396 §4) is JSON, and only what a PATCH takes.
  app.addContentTypeParser('application/merge-patch+json', { parseAs: 'buffer' }, (request, body, done) => {
    if (request.method !== 'PATCH') return done(unsupported(request));
    return json(request, body, done);
  });
}

function unsupported(request: FastifyRequest): ReefError {
  const type = String(request.headers['content-type']).split(';')[0]!.trim().slice(0, 80);
  return new ReefError('UNSUPPORTED_MEDIA_TYPE', `a body of type ${type} is not accepted here; send JSON (application/json)`);
}

/** For one plugin's routes (its encapsulation context): text/plain bodies are JSON too. */
export function acceptJsonAsText(app: FastifyInstance): void {
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, jsonReader(app));
}
