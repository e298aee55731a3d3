// A lingering close (as nginx does): after an early reply to a request whose body is still arriving, the
// reply is sent, the write side is closed, and what the client still sends is read and discarded for at
// most LINGER_MS or LINGER_BYTES, then the connection closes. Closing at once would make the client read
// a reset instead of the reply while it is still sending.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export const LINGER_MS = 2000;
export const LINGER_BYTES = 1024 * 1024;

/** Before an early reply to `req`: close the connection after it, lingering as above. */
export function lingerAfterReply(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent) res.setHeader('connection', 'close');
  const socket = req.socket;
  res.once('finish', () => lingerSocket(socket));
}

/** Half-close `socket` once its pending writes are out, discard what arrives within the bounds, close. */
export function lingerSocket(socket: Socket): void {
  if (socket.destroyed) return;
  let seen = 0;
  const done = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(done, LINGER_MS);
  timer.unref();
  socket.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > LINGER_BYTES) done();
  });
  socket.once('end', done);
  socket.once('close', () => clearTimeout(timer));
  socket.on('error', () => undefined);
  socket.end();
  socket.resume();
}
