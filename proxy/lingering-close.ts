// A lingering close (as nginx does): after a reply that ends a connection while the client may still be
// sending (an early reply to a request whose body is arriving, or an answer to a refused request head),
// the reply is sent, the write side is closed, and what the client still sends is read and discarded
// for at most LINGER_MS or LINGER_BYTES, then the connection closes. Closing with unread bytes makes the
// kernel reset the connection, and a client that sends its whole request before reading reads the reset
// instead of the reply.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export const LINGER_MS = 2000;
export const LINGER_BYTES = 1024 * 1024;

const lingering = new WeakSet<Socket>();

/** Whether `socket` is closing with lingerSocket: what it still receives is not a request. */
export function isLingering(socket: Socket): boolean {
  return lingering.has(socket);
}

/**
 * Before an early reply to `req` whose body has not been (fully) read: the reply says `connection:
 * close`, and once it has been flushed the connection lingers (lingerSocket) instead of closing.
 */
export function lingerAfterReply(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
  const socket = req.socket;
  // Node ends the socket of a `connection: close` reply with destroySoon() once the reply is out, and
  // that closes on the unread body; it also resumes the body there, which would read it all.
  socket.destroySoon = () => lingerSocket(socket);
}

/**
 * After the last reply has been written to `socket`: half-close it (the FIN follows the reply), read
 * and discard what arrives until the client closes its side or a bound is reached, then destroy it.
 * The socket is taken from Node's HTTP parser first, so nothing more is parsed as a body or a request.
 */
export function lingerSocket(socket: Socket): void {
  if (lingering.has(socket)) return;
  lingering.add(socket);
  if (socket.destroyed) return;
  const close = () => socket.destroy();
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  let left = LINGER_BYTES;
  const discard = (chunk: Buffer) => {
    left -= chunk.length;
    if (left <= 0) close();
  };
  // Node's server wraps socket.on: a 'data' listener makes its parser stop consuming the socket. The
  // server's own 'data' and 'end' listeners would then feed the parser: they go.
  socket.removeAllListeners('end');
  socket.on('data', discard);
  for (const listener of socket.listeners('data')) {
    if (listener !== discard) socket.removeListener('data', listener as (chunk: Buffer) => void);
  }
  // The client has sent everything: close once the reply is out.
  socket.once('end', () => {
    if (socket.writableFinished) close();
    else socket.once('finish', close);
  });
  socket.on('error', close);
  if (!socket.writableEnded) socket.end();
  socket.resume();
}
