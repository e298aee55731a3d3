// Writing replies the gateway answers itself, and writes that respect the client's back-pressure.

import type { ServerResponse } from 'node:http';
import type { GatewayError } from '../common/errors.ts';
import type { JsonValue, WireFormat } from '../common/types.ts';
import { errorBody } from '../hooks/families/index.ts';

/**
 * The request's ids on a reply the gateway writes itself. A relayed reply carries them in the head it
 * writes whole: a header set before `writeHead` makes Node take every header of that head through
 * `setHeader` one by one.
 */
export function identify(res: ServerResponse, id: string, correlationId: string | undefined): void {
  res.setHeader('x-router-request-id', id);
  if (correlationId !== undefined) res.setHeader('x-router-correlation-id', correlationId);
}

export function sendJson(res: ServerResponse, status: number, body: JsonValue): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, format: WireFormat, err: GatewayError, id: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, err.status, errorBody(format, err, id));
}

/** Writes a chunk; the promise, when there is one, resolves once the client has taken it. */
export function write(res: ServerResponse, chunk: string | Uint8Array): Promise<void> | undefined {
  if (res.write(chunk)) return undefined;
  // A response already closed (the client left, or the drain timeout closed its connection) emits
  // neither 'drain' nor 'close' again: waiting would hold the request, and its usage event, forever.
  if (res.closed || res.destroyed) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
