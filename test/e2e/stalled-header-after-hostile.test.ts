// With billing on, after a hostile sequence (model names steering the upstream path, a 2 MB model name,
// deep JSON, a malformed "%" path, a streamed 150 KB space-less prompt cut after its first chunk), a new
// connection whose head stalls is still answered 408 and closed on time. Where this failed (8115171),
// the check itself was sound: counting the cut stream's prompt at once, for its usage, held the event
// loop about a minute, and Node checks stalled heads on a timer of that loop.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const HEADER_TIMEOUT_MS = 2000;
/** proxy/server.ts checks stalled heads every quarter of the header timeout (at most every second). */
const CHECK_INTERVAL_MS = Math.min(1000, HEADER_TIMEOUT_MS / 4);
const MARGIN_MS = 1000;

let stack: BillingStack;
before(async () => {
  stack = await startBillingStack({
    extraYaml: `limits:\n  client_header_timeout_ms: ${HEADER_TIMEOUT_MS}\n`,
  });
});
after(() => stack.close());

function send(method: string, path: string, body?: string): Promise<number> {
  const { hostname, port } = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        method,
        path,
        agent: false,
        headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A streamed request whose client goes away once the first chunk of the reply has arrived. */
function streamCutAfterFirstChunk(body: string): Promise<void> {
  const { hostname, port } = new URL(stack.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: hostname,
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      },
      (res) => {
        assert.equal(res.statusCode, 200);
        res.once('data', () => req.destroy());
      },
    );
    req.on('close', () => resolve());
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.end(body);
  });
}

const chat = (model: string, content = 'hi', stream = false) =>
  JSON.stringify({ model, stream, messages: [{ role: 'user', content }] });

test('after a hostile sequence a stalled head is still answered 408 and closed in time', async () => {
  for (const model of ['../../v1/files', 'gpt-4o-mini?x=1', 'gpt-4o-mini#frag', 'a%2Fb'])
    assert.equal(await send('POST', '/v1/chat/completions', chat(model)), 400, model);
  assert.equal(await send('POST', '/v1/chat/completions', chat('m'.repeat(2 * 1024 * 1024))), 400);
  const deep = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
  assert.equal(await send('POST', '/v1/chat/completions', deep), 400);
  assert.equal(await send('GET', '/v1/models/%ZZ'), 400);
  await streamCutAfterFirstChunk(chat('gpt-4o-mini-chunks-20-delay-50', 'x'.repeat(150 * 1024), true));

  const { hostname, port } = new URL(stack.url);
  const socket = connect(Number(port), hostname);
  socket.setEncoding('latin1');
  let received = '';
  socket.on('data', (d: string) => {
    received += d;
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const sent = performance.now();
  socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le');
  const bound = HEADER_TIMEOUT_MS + CHECK_INTERVAL_MS + MARGIN_MS;
  const closedAfter = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after ${bound} ms; received ${JSON.stringify(received)}`));
    }, bound);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(performance.now() - sent);
    });
  });
  assert.match(received, /^HTTP\/1\.1 408 /);
  assert.ok(closedAfter >= HEADER_TIMEOUT_MS - 50, `closed after ${closedAfter} ms, before the timeout`);
});
