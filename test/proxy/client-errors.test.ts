// Limits answered to clients that send their whole request before reading: a 1 MB header (431), a 1 MB
// URL (414, also spread over several packets), a 50 MB declared body (413, also with Expect:
// 100-continue, which then gets no 100 Continue). Each answer must be readable although the client is
// still sending when it is written: the gateway closes with a lingering close (proxy/lingering-close.ts),
// tested here on its own as well. Every wait is for a socket event, bounded only so a failure is reported.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { LINGER_BYTES, lingerAfterReply } from '../../proxy/lingering-close.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

/** A failure bound, not a measurement. */
const CLOSE_WITHIN_MS = 20_000;

const MB = 1_000_000;

interface Reply {
  /** Everything received, in order (a 100 Continue included). */
  text: string;
  status: number;
  headers: string;
  json: { error?: { code?: string; type?: string; message?: string } } | undefined;
}

function parse(text: string): Reply {
  const [head = '', body = ''] = text.split('\r\n\r\n', 2);
  let json: Reply['json'];
  try {
    json = JSON.parse(body) as Reply['json'];
  } catch {
    json = undefined;
  }
  return {
    text,
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
    headers: head.toLowerCase(),
    json,
  };
}

interface Client {
  socket: Socket;
  /** What the gateway sent, once it has closed its side (the reply is whole). */
  ended: Promise<string>;
  /** Once the connection has closed both ways. */
  closed: Promise<void>;
}

function bounded<T>(what: string, promise: Promise<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    const bound = setTimeout(() => reject(new Error(`no ${what}`)), CLOSE_WITHIN_MS);
    promise.then(
      (v) => {
        clearTimeout(bound);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(bound);
        reject(err);
      },
    );
  });
}

/**
 * A raw connection, half-open: the gateway closing its side does not end the client's, which may go
 * on sending. `paused`: nothing is read until resume() (the reply waits in the kernel, as for a client
 * that reads only once its request is written); otherwise what arrives is kept as it comes.
 */
function open(port: number, paused: boolean): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    if (paused) socket.pause();
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    const received = () => Buffer.concat(chunks).toString('latin1');
    const ended = bounded(
      "end of the gateway's reply",
      new Promise<string>((done) => {
        socket.on('end', () => done(received()));
        // A reset after the reply came (the client was still sending) ends it too.
        socket.on('close', () => done(received()));
      }),
    );
    const closed = bounded('close', new Promise<void>((done) => socket.on('close', () => done())));
    // A reset while still sending is what a client that never reads sees; the reply is judged by what it got.
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve({ socket, ended, closed });
    });
    socket.once('error', reject);
  });
}

/** Resolves once `data` is handed to the kernel (false: the connection failed first). */
function write(socket: Socket, data: string | Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    if (socket.destroyed) {
      resolve(false);
      return;
    }
    socket.write(data, (err) => resolve(err == null));
  });
}

/** Writes `bytes` of body in 64 KiB pieces, stopping early when the connection fails. Returns what was written. */
async function stream(socket: Socket, bytes: number): Promise<number> {
  const piece = Buffer.alloc(64 * 1024, 0x61);
  let sent = 0;
  while (sent < bytes) {
    const n = Math.min(piece.length, bytes - sent);
    if (!(await write(socket, n === piece.length ? piece : piece.subarray(0, n)))) break;
    sent += n;
  }
  return sent;
}

const a = (n: number) => 'a'.repeat(n);

/** A piece of a request, and what the client waits for once it is sent: nothing, or the gateway to have read all sent so far, or to have answered. */
type Step = readonly [data: string, then?: 'read' | 'answered'];

describe('limits answered to a client that sends everything first', () => {
  let stack: Stack;
  let port: number;
  /** The gateway's side of each connection. */
  const accepted: Socket[] = [];
  before(async () => {
    stack = await startStack();
    port = Number(new URL(stack.url).port);
    stack.gateway.gateway.server.on('connection', (s: Socket) => accepted.push(s));
  });
  after(() => stack.close());

  async function gatewaySide(c: Client): Promise<Socket> {
    let side: Socket | undefined;
    await waitUntil(() => {
      side = accepted.find((s) => s.remotePort === c.socket.localPort);
      return side !== undefined;
    }, 'the gateway accepting the connection');
    return side as Socket;
  }

  /**
   * Sends `steps` on `c` (paused: nothing read meanwhile), then reads the reply. A step that waits for
   * the answer sends the rest to a gateway that has answered already, as happens to a client whose
   * request is larger than what the connection buffers.
   */
  async function sendThenRead(c: Client, steps: readonly Step[], alreadySent = 0): Promise<Reply> {
    const side = await gatewaySide(c);
    let sent = alreadySent;
    for (const [data, then] of steps) {
      assert.ok(await write(c.socket, data), 'the gateway reset the connection while the request was sent');
      sent += Buffer.byteLength(data);
      if (then === 'read') await waitUntil(() => side.bytesRead >= sent, `the gateway reading ${sent} bytes`);
      if (then === 'answered') {
        await waitUntil(() => side.writableFinished || side.destroyed, 'the gateway answering');
      }
    }
    c.socket.resume();
    const text = await c.ended;
    c.socket.end();
    await c.closed;
    return parse(text.slice(text.lastIndexOf('HTTP/1.1 ')));
  }

  function assertError(reply: Reply, status: number, code: string): void {
    assert.equal(reply.status, status, reply.text.slice(0, 300));
    assert.match(reply.headers, /connection: close/);
    assert.equal(reply.json?.error?.code, code);
    assert.equal(reply.json?.error?.type, 'invalid_request_error');
    assert.equal(typeof reply.json?.error?.message, 'string');
  }

  // 1 MB in all; the part sent after the answer stays under the lingering close's 1 MiB.
  test('a 1 MB header gets 431', async () => {
    const reply = await sendThenRead(await open(port, true), [
      [`GET /v1/models HTTP/1.1\r\nhost: gateway\r\nx-filler: ${a(100_000)}`, 'answered'],
      [`${a(MB - 100_000)}\r\n\r\n`],
    ]);
    assertError(reply, 431, 'header_too_large');
  });

  test('a 1 MB URL gets 414', async () => {
    const reply = await sendThenRead(await open(port, true), [
      [`GET /v1/models?x=${a(100_000)}`, 'answered'],
      [`${a(MB - 100_000)} HTTP/1.1\r\nhost: gateway\r\n\r\n`],
    ]);
    assertError(reply, 414, 'url_too_long');
  });

  // Each piece is under max_header_bytes (16 KiB) and read by the gateway before the next is sent.
  test('a 1 MB URL spread over several packets gets 414', async () => {
    const reply = await sendThenRead(await open(port, true), [
      ['GET /v1/models?x=', 'read'],
      [a(8000), 'read'],
      [a(8000), 'read'],
      [a(8000), 'answered'],
      [`${a(MB - 24_000)} HTTP/1.1\r\nhost: gateway\r\n\r\n`],
    ]);
    assertError(reply, 414, 'url_too_long');
  });

  test('a header spread over several packets still gets 431', async () => {
    const reply = await sendThenRead(await open(port, true), [
      [`GET /v1/models?x=${a(100)} HTTP/1.1\r\nhost: gateway\r\nx-filler: `, 'read'],
      [a(8000), 'read'],
      [a(8000), 'read'],
      [a(8000), 'answered'],
      [`${a(MB - 24_000)}\r\n\r\n`],
    ]);
    assertError(reply, 431, 'header_too_large');
  });

  test('on a kept-alive connection the next request line is told apart again', async () => {
    for (const [label, head, rest, status] of [
      ['URL', 'GET /v1/models?x=', ` HTTP/1.1\r\nhost: gateway\r\n\r\n`, 414],
      ['header', 'GET /healthz HTTP/1.1\r\nx-filler: ', '\r\n\r\n', 431],
    ] as const) {
      const c = await open(port, false);
      const got: Buffer[] = [];
      c.socket.on('data', (d: Buffer) => got.push(d));
      const first = 'GET /healthz HTTP/1.1\r\nhost: gateway\r\n\r\n';
      assert.ok(await write(c.socket, first));
      await waitUntil(
        () => /\r\n\r\n\{"status":"ok"\}$/.test(Buffer.concat(got).toString()),
        'the first reply',
      );
      c.socket.pause();
      const reply = await sendThenRead(
        c,
        [[head, 'read'], [a(8000), 'read'], [a(10_000), 'answered'], [`${a(MB - 18_000)}${rest}`]],
        first.length,
      );
      assert.equal(reply.status, status, label);
    }
  });

  const bodyHead = (extra = '') =>
    'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n' +
    `authorization: Bearer ${ACCESS_KEY}\r\ncontent-type: application/json\r\n${extra}` +
    `content-length: ${50 * MB}\r\n\r\n`;

  for (const [label, extra] of [
    ['', ''],
    [' with Expect: 100-continue', 'expect: 100-continue\r\n'],
  ] as const) {
    test(`a 50 MB declared body${label} gets 413 (and no 100 Continue)`, async () => {
      // Not paused: no connection buffers 50 MB, and a client stopped by a reset can read only what its
      // kernel already took in (Node drops it with the socket).
      const c = await open(port, false);
      const side = await gatewaySide(c);
      assert.ok(await write(c.socket, bodyHead(extra)));
      // The whole body, or until the gateway closes; what arrived is looked at after.
      const sent = await stream(c.socket, 50 * MB);
      c.socket.end();
      const reply = parse(await c.ended);
      await c.closed;
      assert.doesNotMatch(reply.text, /100 Continue/);
      assertError(reply, 413, 'request_too_large');
      assert.ok(sent < 50 * MB, 'the gateway closed before the whole body was read');
      // It read on after its answer (no reset at once), within the lingering close's bound.
      assert.ok(side.bytesRead > LINGER_BYTES, `read ${side.bytesRead}`);
      assert.ok(side.bytesRead < 4 * LINGER_BYTES, `read ${side.bytesRead}`);
    });
  }

  test('Expect: 100-continue with a body within max_body_bytes gets 100 Continue, then its reply', async () => {
    const body = JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hello' }] });
    const c = await open(port, false);
    const got: Buffer[] = [];
    c.socket.on('data', (d: Buffer) => got.push(d));
    assert.ok(
      await write(
        c.socket,
        'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\nconnection: close\r\n' +
          `authorization: Bearer ${ACCESS_KEY}\r\ncontent-type: application/json\r\n` +
          `expect: 100-continue\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
      ),
    );
    await waitUntil(() => Buffer.concat(got).toString().includes('\r\n\r\n'), 'the interim reply');
    assert.match(Buffer.concat(got).toString(), /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    assert.ok(await write(c.socket, body));
    const text = await c.ended;
    c.socket.end();
    assert.match(text.slice(text.indexOf('HTTP/1.1', 1)), /^HTTP\/1\.1 200 /);
  });
});

describe('lingerAfterReply', () => {
  let server: Server;
  let port: number;
  let gatewaySide: Socket | undefined;
  before(async () => {
    // An early refusal that never reads the body, as the gateway's 401 or 413.
    server = createServer((req, res) => {
      gatewaySide = req.socket;
      lingerAfterReply(req, res);
      const body = '{"error":{"code":"invalid_api_key"}}';
      res.writeHead(401, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const head = (length: number) => `POST /x HTTP/1.1\r\nhost: s\r\ncontent-length: ${length}\r\n\r\n`;

  test('the reply is readable while the client keeps sending; the connection closes after the byte bound', async () => {
    const declared = 100 * MB;
    const c = await open(port, false);
    assert.ok(await write(c.socket, head(declared)));
    const sent = await stream(c.socket, declared);
    const reply = parse(await c.ended);
    await c.closed;
    assert.equal(reply.status, 401);
    assert.match(reply.headers, /connection: close/);
    assert.deepEqual(reply.json, { error: { code: 'invalid_api_key' } });
    assert.ok(sent < declared, 'the server closed while the body was still coming');
    // Node would otherwise read (dump) the whole body after the reply.
    const read = gatewaySide?.bytesRead ?? 0;
    assert.ok(read >= LINGER_BYTES, `read ${read}`);
    assert.ok(read < 4 * LINGER_BYTES, `read ${read}`);
  });

  test('a client that goes quiet and never closes is closed after the time bound, its reply delivered', async () => {
    const c = await open(port, false);
    assert.ok(await write(c.socket, `${head(1000)}${a(10)}`));
    assert.equal(parse(await c.ended).status, 401);
    const side = gatewaySide;
    assert.ok(side !== undefined);
    if (!side.destroyed) await bounded('close by the gateway', once(side, 'close'));
    c.socket.destroy();
  });

  test('a client that ends its side is closed once the rest is read, the reply delivered', async () => {
    const c = await open(port, true);
    assert.ok(await write(c.socket, `${head(5 * MB)}${a(500_000)}`));
    c.socket.end();
    c.socket.resume();
    assert.equal(parse(await c.ended).status, 401);
    await c.closed;
  });
});
