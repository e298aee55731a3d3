// Answers to requests Node's HTTP parser refused or timed out before the gateway saw them (the server's
// clientError event): a catalogue code per failure, written to the socket as raw HTTP with a small body
// in the default family's shape (hooks/families/index.ts), since there is no request, route or client
// wire family yet.

import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { type ErrorCode, GatewayError } from '../common/errors.ts';
import { DEFAULT_FAMILY } from '../hooks/families/index.ts';

/** What clientError hands over: Node's error, with the parser's position in the packet it read. */
export interface ParserError extends Error {
  code?: string;
  bytesParsed?: number;
  rawPacket?: Buffer;
}

/**
 * The catalogue code to answer; undefined for socket failures (reset, broken pipe): nothing to say.
 * `requestLineOpen` is trackRequestLine's record for the connection, when it keeps one.
 */
export function clientErrorCode(err: ParserError, requestLineOpen?: boolean): ErrorCode | undefined {
  const code = err.code ?? '';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  if (code === 'HPE_HEADER_OVERFLOW') {
    return overflowInRequestLine(err, requestLineOpen) ? 'url_too_long' : 'header_too_large';
  }
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 'request_too_large';
  if (code.startsWith('HPE_')) return 'malformed_request';
  return undefined;
}

const REQUEST_LINE_START = /^[A-Z]+ /;

function startsRequestLine(packet: Buffer, from: number, to: number): boolean {
  return REQUEST_LINE_START.test(packet.toString('latin1', from, Math.min(to, from + 16)));
}

/**
 * llhttp reports one overflow for the request line and the headers together (max_header_bytes counts
 * both). The line being parsed where it was crossed tells them apart: a request line starts with a
 * method and a space, a header line with a name and a colon. When that line began in an earlier packet
 * (no line feed before the crossing in this one), the connection's record says whether the request line
 * was still open; without one, only this packet is known.
 */
function overflowInRequestLine(err: ParserError, requestLineOpen: boolean | undefined): boolean {
  const raw = err.rawPacket;
  if (raw === undefined) return requestLineOpen === true;
  const end = Math.min(err.bytesParsed ?? raw.length, raw.length);
  const lf = end > 0 ? raw.lastIndexOf(0x0a, end - 1) : -1;
  if (lf === -1 && requestLineOpen !== undefined) return requestLineOpen;
  return startsRequestLine(raw, lf + 1, end);
}

/** The parser Node's HTTP server gives each connection (node:_http_common), as far as used here. */
interface NodeParser {
  [slot: number]: ((...args: never[]) => unknown) | null | undefined;
  _consumed?: boolean;
  /** The request whose head was parsed last (set when a head is complete). */
  incoming?: unknown;
  getCurrentBuffer(): Buffer;
}

const PARSER_SLOTS = (
  process.getBuiltinModule('node:_http_common') as
    | { HTTPParser?: { kOnMessageBegin?: number; kOnExecute?: number } }
    | undefined
)?.HTTPParser;

const REQUEST_LINE_OPEN = Symbol('requestLineOpen');

interface TrackedSocket extends Socket {
  [REQUEST_LINE_OPEN]?: boolean;
}

/**
 * Keep, for a new connection, whether the request line of the request being read had not ended by the
 * end of the last packet the parser read, so that a URL spread over several packets is still told
 * from a header when it crosses max_header_bytes. Node's parser reads the socket natively; the record
 * costs a call when a request begins and one at the end of its packet, and watches further packets
 * (a copy of each) only while a request line stays open across them.
 */
export function trackRequestLine(socket: Socket): void {
  const parser = (socket as { parser?: NodeParser | null }).parser;
  const onBegin = PARSER_SLOTS?.kOnMessageBegin;
  const onExecute = PARSER_SLOTS?.kOnExecute;
  // Not consumed natively: Node parses from 'data' events and the packet hook below is never called.
  if (parser == null || parser._consumed !== true || onBegin === undefined || onExecute === undefined) {
    return;
  }
  const executed = parser[onExecute];
  if (typeof executed !== 'function') return;
  const tracked = socket as TrackedSocket;
  tracked[REQUEST_LINE_OPEN] = false;
  let previous: unknown;
  // Called after each packet the parser read, while it is still readable (getCurrentBuffer).
  const watch = (ret: never) => {
    if (!((ret as unknown) instanceof Error)) {
      const head = parser.incoming;
      let open = head == null || head === previous;
      if (open) {
        const packet = parser.getCurrentBuffer();
        const lf = packet.lastIndexOf(0x0a);
        // After the packet's last line feed: the next request's line (the one before ended a body) or
        // a header.
        open = lf === -1 || startsRequestLine(packet, lf + 1, packet.length);
      }
      if (!open) {
        tracked[REQUEST_LINE_OPEN] = false;
        previous = undefined;
        parser[onExecute] = executed;
      }
    }
    return executed(ret);
  };
  parser[onBegin] = () => {
    tracked[REQUEST_LINE_OPEN] = true;
    previous = parser.incoming;
    parser[onExecute] = watch;
  };
}

/** trackRequestLine's record for `socket`; undefined when it keeps none. */
export function requestLineOpen(socket: Socket): boolean | undefined {
  return (socket as TrackedSocket)[REQUEST_LINE_OPEN];
}

/** The whole HTTP response for `code`, closing the connection. */
export function rawErrorResponse(code: ErrorCode): string {
  const id = randomUUID();
  const err = new GatewayError(code);
  const body = JSON.stringify(DEFAULT_FAMILY.errorBody(err, id));
  return (
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n` +
    'connection: close\r\ncontent-type: application/json\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\nx-router-request-id: ${id}\r\n\r\n${body}`
  );
}
