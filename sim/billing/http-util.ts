// Small node:http helpers for the simulator: bounded body reading and JSON / HTML answers.

import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export class BodyTooLargeError extends Error {}

/**
 * Reads the whole request body. Past `limit` bytes it rejects with BodyTooLargeError: at once with the
 * connection destroyed mid-upload (`oversize: 'reset'`), or after the rest of the body was read and
 * discarded, so the caller can answer 413 (`oversize: '413'`).
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  oversize: 'reset' | '413' = 'reset',
): Promise<Buffer> {
  return new Promise(function collect(resolve, reject) {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', function onData(chunk: Buffer) {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      if (oversize === 'reset') {
        reject(new BodyTooLargeError(`body larger than ${limit} bytes`));
        req.destroy();
      }
    });
    req.on('end', function onEnd() {
      if (size > limit) reject(new BodyTooLargeError(`body larger than ${limit} bytes`));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.on('error', reject);
  });
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

export function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  sendJson(res, status, { error: { code, message } });
}

export function sendHtml(res: ServerResponse, status: number, html: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
  });
  res.end(html);
}

export function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise(function start(resolve, reject) {
    server.once('error', reject);
    server.listen(port, host, function onListening() {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** Closes a server and drops its open (keep-alive or held) connections so close never waits on clients. */
export function closeServer(server: Server): Promise<void> {
  return new Promise(function stop(resolve) {
    if (!server.listening) {
      resolve();
      return;
    }
    server.close(function onClosed() {
      resolve();
    });
    server.closeAllConnections();
  });
}

export function baseUrl(host: string, address: AddressInfo): string {
  const wildcard = host === '0.0.0.0' || host === '::' || host === '';
  const name = wildcard ? '127.0.0.1' : host;
  return `http://${name.includes(':') ? `[${name}]` : name}:${address.port}`;
}
