// Answers to requests Node's HTTP parser refused or timed out before the gateway saw them (the server's
// clientError event): a catalogue code per failure, written to the socket as raw HTTP with a small body
// in the default family's shape (hooks/families/index.ts), since there is no request, route or client
// wire family yet.

import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { type ErrorCode, GatewayError } from '../common/errors.ts';
import { DEFAULT_FAMILY } from '../hooks/families/index.ts';

/** What clientError hands over: Node's error, with the parser's position in the packet it read. */
export interface ParserError extends Error {
  code?: string;
  bytesParsed?: number;
  rawPacket?: Buffer;
}

/** The catalogue code to answer; undefined for socket failures (reset, broken pipe): nothing to say. */
export function clientErrorCode(err: ParserError): ErrorCode | undefined {
  const code = err.code ?? '';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  if (code === 'HPE_HEADER_OVERFLOW') return overflowInRequestLine(err) ? 'url_too_long' : 'header_too_large';
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 'request_too_large';
  if (code.startsWith('HPE_')) return 'malformed_request';
  return undefined;
}

const REQUEST_LINE_START = /^[A-Z]+ /;

/**
 * llhttp reports one overflow for the request line and the headers together (max_header_bytes counts
 * both). The line being parsed where it was crossed tells them apart: a request line starts with a
 * method and a space, a header line with a name and a colon. Only the packet that crossed the limit is
 * visible, so a URL split across packets is reported as 431.
 */
function overflowInRequestLine(err: ParserError): boolean {
  const raw = err.rawPacket;
  if (raw === undefined) return false;
  const end = Math.min(err.bytesParsed ?? raw.length, raw.length);
  const lineStart = raw.lastIndexOf(0x0a, end - 1) + 1;
  return REQUEST_LINE_START.test(raw.subarray(lineStart, Math.min(end, lineStart + 16)).toString('latin1'));
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
