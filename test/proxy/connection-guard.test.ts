// The connection cap on real TCP connections: which connection is closed to admit a new one (the one
// idle for longest; never one with a request in flight), refusal when none is idle, and the cap fitted
// to the file-descriptor limit.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, test } from 'node:test';
import {
  ConnectionGuard,
  fitToDescriptors,
  parseNofile,
  RESERVED_DESCRIPTORS,
  readNofile,
  type ShedReason,
} from '../../proxy/connection-guard.ts';

let server: Server;
let guard: ConnectionGuard;
let shed: ShedReason[];
/** Server-side sockets in accept order, and a waiter per accept. */
let accepted: Socket[];
let onAccept: (() => void)[];
const clients: Socket[] = [];

beforeEach(async () => {
  shed = [];
  accepted = [];
  onAccept = [];
  guard = new ConnectionGuard(2, (reason) => shed.push(reason));
  server = createServer((socket) => {
    guard.admit(socket);
    accepted.push(socket);
    onAccept.shift()?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await new Promise((resolve) => server.close(resolve));
});

/** A client connection, once the server has accepted (and the guard seen) it. */
async function client(): Promise<{ socket: Socket; closed: Promise<void> }> {
  const accepted = new Promise<void>((resolve) => onAccept.push(resolve));
  const port = (server.address() as { port: number }).port;
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  clients.push(socket);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await accepted;
  return { socket, closed };
}

test('under the cap every connection is admitted', async () => {
  await client();
  await client();
  assert.equal(guard.open, 2);
  assert.deepEqual(shed, []);
});

test('at the cap the connection idle for longest is closed to admit the new one', async () => {
  const a = await client();
  const b = await client();
  const c = await client();
  await a.closed;
  assert.deepEqual(shed, ['idle']);
  assert.equal(b.socket.destroyed, false);
  assert.equal(c.socket.destroyed, false);
  assert.equal(guard.open, 2);
});

test('a connection with a request in flight is never shed', async () => {
  const a = await client();
  const b = await client();
  guard.requestStarted(accepted[0]!);
  await client();
  await b.closed;
  assert.equal(a.socket.destroyed, false);
  assert.deepEqual(shed, ['idle']);
});

test('when no connection is idle the new one is refused', async () => {
  const a = await client();
  const b = await client();
  guard.requestStarted(accepted[0]!);
  guard.requestStarted(accepted[1]!);
  const c = await client();
  await c.closed;
  assert.deepEqual(shed, ['refused']);
  assert.equal(a.socket.destroyed, false);
  assert.equal(b.socket.destroyed, false);
  assert.equal(guard.open, 2);
});

test('a connection whose request ended is idle again, and the most recently idle', async () => {
  const a = await client();
  const b = await client();
  guard.requestStarted(accepted[0]!);
  guard.requestEnded(accepted[0]!);
  await client();
  await b.closed;
  assert.equal(a.socket.destroyed, false);
});

test('pipelined requests keep a connection busy until the last one ends', async () => {
  const a = await client();
  const b = await client();
  guard.requestStarted(accepted[0]!);
  guard.requestStarted(accepted[0]!);
  guard.requestEnded(accepted[0]!);
  guard.requestStarted(accepted[1]!);
  const c = await client();
  await c.closed;
  assert.deepEqual(shed, ['refused']);
  assert.equal(a.socket.destroyed, false);
  assert.equal(b.socket.destroyed, false);
});

test('a closed connection no longer counts', async () => {
  const a = await client();
  const gone = new Promise((resolve) => accepted[0]!.once('close', resolve));
  a.socket.destroy();
  await gone;
  assert.equal(guard.open, 0);
});

test('the cap is lowered to two descriptors per connection under RLIMIT_NOFILE', () => {
  assert.equal(fitToDescriptors(20_000, 65_536), 20_000);
  assert.equal(fitToDescriptors(20_000, 20_000), (20_000 - RESERVED_DESCRIPTORS) / 2);
  assert.equal(fitToDescriptors(20_000, 1024), (1024 - RESERVED_DESCRIPTORS) / 2);
  assert.equal(fitToDescriptors(20_000, 100), 1);
  assert.equal(fitToDescriptors(20_000, undefined), 20_000);
});

test('RLIMIT_NOFILE is read from /proc/self/limits (soft limit)', () => {
  const text = readFileSync('/proc/self/limits', 'utf8');
  const soft = /^Max open files\s+(\d+)/m.exec(text)?.[1];
  assert.ok(soft !== undefined);
  assert.equal(readNofile(), Number(soft));
  assert.equal(
    parseNofile(
      'Max processes             63711                63711                processes\n' +
        'Max open files            4096                 524288               files\n',
    ),
    4096,
  );
  assert.equal(
    parseNofile('Max open files            unlimited            unlimited            files\n'),
    undefined,
  );
  assert.equal(parseNofile(''), undefined);
});
