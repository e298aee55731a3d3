// The upstream leg (proxy/upstream.ts): undici dispatch with the gateway's own reply body. A real HTTP
// server plays the upstream; the body's flow control is checked against undici's controller interface.

import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../../common/errors.ts';
import type { UpstreamRequest } from '../../common/types.ts';
import { Cancellation, UpstreamBody, UpstreamClient } from '../../proxy/upstream.ts';

let server: Server;
let origin: string;
const routes = new Map<string, (res: ServerResponse) => void>();

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    const route = routes.get(req.url ?? '');
    if (route === undefined) {
      res.writeHead(404).end();
      return;
    }
    route(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const TIMEOUTS = { headersTimeoutMs: 2000, bodyTimeoutMs: 2000 };

function request(path: string): UpstreamRequest {
  return {
    method: 'POST',
    origin,
    path,
    query: new URLSearchParams(),
    headers: { 'content-type': 'application/json' },
    body: { hello: 'world' },
  };
}

test('a reply read whole: status, headers and every chunk, in order', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  routes.set('/whole', (res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-up': 'yes' });
    res.write('{"a":');
    res.end('1}');
  });
  const up = await client.send(request('/whole'), TIMEOUTS, new Cancellation());
  assert.equal(up.statusCode, 200);
  assert.equal(up.headers['x-up'], 'yes');
  assert.equal((await up.body.readAll(1024)).toString(), '{"a":1}');
});

test('a reply larger than the limit: upstream_bad_response, and the connection is dropped', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  let closed: Promise<void> | undefined;
  routes.set('/big', (res) => {
    closed = new Promise((resolve) => res.once('close', () => resolve()));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(Buffer.alloc(4096, 'a'));
    // Never ends: only the client's abort finishes this reply.
  });
  const up = await client.send(request('/big'), TIMEOUTS, new Cancellation());
  await assert.rejects(up.body.readAll(1024), (err: unknown) => {
    assert.ok(err instanceof GatewayError);
    assert.equal(err.code, 'upstream_bad_response');
    return true;
  });
  await closed;
});

test('streamed chunks arrive as they are written; an upstream that dies mid-body fails the iteration', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  let reply: ServerResponse | undefined;
  routes.set('/stream', (res) => {
    reply = res;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: 1\n\n');
  });
  const up = await client.send(request('/stream'), TIMEOUTS, new Cancellation());
  const seen: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of up.body) {
        seen.push(chunk.toString());
        if (seen.length === 1) reply?.write('data: 2\n\n');
        else reply?.destroy();
      }
    })(),
  );
  assert.deepEqual(seen, ['data: 1\n\n', 'data: 2\n\n']);
});

test('a cancellation before the head: the call rejects with the AbortError', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  routes.set('/never', () => {
    // No head at all.
  });
  const cancel = new Cancellation();
  const sent = client.send(request('/never'), TIMEOUTS, cancel);
  cancel.cancel();
  await assert.rejects(sent, (err: Error) => err.name === 'AbortError');
});

test('a request cancelled before the call: the call rejects at once with the AbortError', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  routes.set('/never', () => {});
  const cancel = new Cancellation();
  cancel.cancel();
  await assert.rejects(
    client.send(request('/never'), TIMEOUTS, cancel),
    (err: Error) => err.name === 'AbortError',
  );
});

test('a cancellation mid-body ends the body with the AbortError; after the call it does nothing', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  routes.set('/half', (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: 1\n\n');
  });
  const cancel = new Cancellation();
  const up = await client.send(request('/half'), TIMEOUTS, cancel);
  const seen: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of up.body) {
        seen.push(chunk.toString());
        cancel.cancel();
      }
    })(),
    (err: Error) => err.name === 'AbortError',
  );
  assert.deepEqual(seen, ['data: 1\n\n']);

  routes.set('/whole-again', (res: ServerResponse) => res.end('{"ok":true}'));
  const later = new Cancellation();
  const whole = await client.send(request('/whole-again'), TIMEOUTS, later);
  assert.equal((await whole.body.readAll(1024)).toString(), '{"ok":true}');
  later.cancel(); // the call is over: its listener is gone, nothing throws
  assert.equal(later.cancelled, true);
});

test('no head within headersTimeout: upstream_timeout; refused connection: upstream_unreachable', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  routes.set('/slow', () => {});
  await assert.rejects(
    client.send(request('/slow'), { headersTimeoutMs: 50, bodyTimeoutMs: 50 }, new Cancellation()),
    (err: unknown) => err instanceof GatewayError && err.code === 'upstream_timeout',
  );
  const closedPort = createServer();
  await new Promise<void>((resolve) => closedPort.listen(0, '127.0.0.1', resolve));
  const port = (closedPort.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closedPort.close(() => resolve()));
  await assert.rejects(
    client.send({ ...request('/x'), origin: `http://127.0.0.1:${port}` }, TIMEOUTS, new Cancellation()),
    (err: unknown) => err instanceof GatewayError && err.code === 'upstream_unreachable',
  );
});

/** undici's controller interface, recording what the body asks of the connection. */
function recordingController(): Dispatcher.DispatchController & { calls: string[] } {
  const calls: string[] = [];
  let paused = false;
  let aborted: Error | null = null;
  return {
    calls,
    get aborted() {
      return aborted !== null;
    },
    get paused() {
      return paused;
    },
    get reason() {
      return aborted;
    },
    abort(reason: Error) {
      aborted = reason;
      calls.push('abort');
    },
    pause() {
      paused = true;
      calls.push('pause');
    },
    resume() {
      if (paused) calls.push('resume');
      paused = false;
    },
  };
}

test('flow control: a stream pauses the connection past HIGH_WATER queued bytes and resumes once read', async () => {
  const controller = recordingController();
  const body = new UpstreamBody(controller);
  const chunk = Buffer.alloc(16 * 1024);
  for (let i = 0; i * chunk.length <= UpstreamBody.HIGH_WATER; i++) body.push(chunk);
  assert.deepEqual(controller.calls, ['pause']);
  const it = body[Symbol.asyncIterator]();
  await it.next();
  assert.deepEqual(controller.calls, ['pause', 'resume']);
  body.end();
  let rest = 0;
  for (let r = await it.next(); !r.done; r = await it.next()) rest++;
  assert.equal(rest, Math.floor(UpstreamBody.HIGH_WATER / chunk.length));
});

test('flow control: readAll collects without pausing; an abandoned iteration aborts the call', async () => {
  const collect = recordingController();
  const whole = new UpstreamBody(collect);
  const read = whole.readAll(1024 * 1024);
  for (let i = 0; i < 10; i++) whole.push(Buffer.alloc(16 * 1024, i));
  whole.end();
  const all = await read;
  assert.equal(all.length, 160 * 1024);
  assert.equal(all[all.length - 1], 9);
  assert.deepEqual(collect.calls, []);

  const abandon = recordingController();
  const body = new UpstreamBody(abandon);
  body.push(Buffer.from('first'));
  for await (const _ of body) break;
  assert.deepEqual(abandon.calls, ['abort']);
});

test('a deferred cancellation runs its stand-in and leaves the body flowing until end(); then it ends the call', async (t) => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  t.after(() => client.close());
  let upstream: ServerResponse | undefined;
  routes.set('/read-on', (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: 1\n\n');
    upstream = res;
  });
  const cancel = new Cancellation();
  const up = await client.send(request('/read-on'), TIMEOUTS, cancel);
  let stoodIn = 0;
  cancel.defer(() => stoodIn++);
  const seen: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of up.body) {
        seen.push(chunk.toString());
        if (seen.length === 1) {
          cancel.cancel();
          assert.equal(stoodIn, 1);
          assert.equal(cancel.cancelled, true);
          upstream?.write('data: 2\n\n');
        } else {
          cancel.end();
        }
      }
    })(),
    (err: Error) => err.name === 'AbortError',
  );
  assert.deepEqual(seen, ['data: 1\n\n', 'data: 2\n\n'], 'the body went on after the cancel');
  cancel.cancel();
  assert.equal(stoodIn, 1, 'a cancellation runs once');
});

test('calls read on after their client left: stopOrphans stops them, and any adopted later at once', () => {
  const client = new UpstreamClient({ connectTimeoutMs: 1000 });
  const stopped: string[] = [];
  const forgetA = client.adopt(() => stopped.push('a'));
  client.adopt(() => stopped.push('b'));
  forgetA();
  client.stopOrphans();
  assert.deepEqual(stopped, ['b'], 'a forgotten call is not stopped');
  client.adopt(() => stopped.push('c'));
  assert.deepEqual(stopped, ['b', 'c'], 'a call adopted during the shutdown stops at once');
  client.stopOrphans();
  assert.deepEqual(stopped, ['b', 'c']);
  return client.close();
});
