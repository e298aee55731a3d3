// Slow, idle, stalled and oversized client connections against a real gateway in front of the upstream
// simulator, with the client limits set small: each is answered with its status and closed, the
// connection cap sheds idle connections so a real request still gets through, and a long quiet stream is
// never cut by those limits. Every wait is for a socket event, bounded only so a failure is reported.

import assert from 'node:assert/strict';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { waitUntil } from '../support/billing-stack.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const LIMITS = `
limits:
  client_header_timeout_ms: 300
  client_body_timeout_ms: 300
  keepalive_timeout_ms: 300
  max_header_bytes: 4096
`;

/** A failure bound, not a measurement: the old gateway left these connections open for good. */
const CLOSE_WITHIN_MS = 15_000;

interface RawConnection {
  socket: Socket;
  /** Everything the gateway sent, once it closed the connection. */
  closed: Promise<string>;
}

function open(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      received += d;
    });
    const closed = new Promise<string>((done, fail) => {
      const bound = setTimeout(
        () => fail(new Error(`the gateway kept the connection open; received ${JSON.stringify(received)}`)),
        CLOSE_WITHIN_MS,
      );
      socket.on('close', () => {
        clearTimeout(bound);
        done(received);
      });
    });
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

interface RawReply {
  status: number;
  headers: string;
  json: { error?: { code?: string; type?: string; message?: string } } | undefined;
}

function parseReply(text: string): RawReply {
  const [head = '', body = ''] = text.split('\r\n\r\n', 2);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  let json: RawReply['json'];
  try {
    json = JSON.parse(body) as RawReply['json'];
  } catch {
    json = undefined;
  }
  return { status, headers: head.toLowerCase(), json };
}

async function metricValue(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { headers: { connection: 'close' } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const CHAT_BODY = (model: string, stream = false) =>
  JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hello' }] });

describe('client limits', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ extraYaml: LIMITS });
  });
  after(() => stack.close());

  test('headers that stop half-way are answered 408 and the connection closed', async () => {
    const before = await metricValue(stack.url, 'router_client_timeouts_total{kind="header"}');
    const c = await open(stack.url);
    c.socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: appl');
    const reply = parseReply(await c.closed);
    assert.equal(reply.status, 408);
    assert.match(reply.headers, /connection: close/);
    assert.equal(reply.json?.error?.code, 'request_timeout');
    assert.equal(reply.json?.error?.type, 'invalid_request_error');
    assert.equal(await metricValue(stack.url, 'router_client_timeouts_total{kind="header"}'), before + 1);
  });

  test('a connection that sends nothing is closed after the header timeout', async () => {
    const c = await open(stack.url);
    assert.equal(parseReply(await c.closed).status, 408);
  });

  for (const [label, body] of [
    ['stalls mid-way', '{"model":"gpt-5.4-mini","messa'],
    ['is shorter than its Content-Length', CHAT_BODY('gpt-5.4-mini')],
  ] as const) {
    test(`a request body that ${label} is answered 408 and the connection closed`, async () => {
      const before = await metricValue(stack.url, 'router_client_timeouts_total{kind="body"}');
      const c = await open(stack.url);
      const declared = Buffer.byteLength(body) + 40;
      c.socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${ACCESS_KEY}\r\n` +
          `content-type: application/json\r\ncontent-length: ${declared}\r\n\r\n${body}`,
      );
      const reply = parseReply(await c.closed);
      assert.equal(reply.status, 408);
      assert.equal(reply.json?.error?.code, 'request_timeout');
      assert.equal(await metricValue(stack.url, 'router_client_timeouts_total{kind="body"}'), before + 1);
    });
  }

  test('headers over max_header_bytes get 431, not a bare 400', async () => {
    const c = await open(stack.url);
    c.socket.write(`GET /healthz HTTP/1.1\r\nhost: gateway\r\nx-filler: ${'a'.repeat(8000)}\r\n\r\n`);
    const reply = parseReply(await c.closed);
    assert.equal(reply.status, 431);
    assert.equal(reply.json?.error?.code, 'header_too_large');
    assert.equal(await metricValue(stack.url, 'router_client_rejected_total{reason="header_too_large"}'), 1);
  });

  test('a URL longer than max_header_bytes gets 414', async () => {
    const c = await open(stack.url);
    c.socket.write(`GET /v1/models?x=${'a'.repeat(8000)} HTTP/1.1\r\nhost: gateway\r\n\r\n`);
    const reply = parseReply(await c.closed);
    assert.equal(reply.status, 414);
    assert.equal(reply.json?.error?.code, 'url_too_long');
  });

  test('malformed HTTP still gets 400, now with a JSON body', async () => {
    const c = await open(stack.url);
    c.socket.write('GET /healthz HTTP/1.1\r\nbad header line\r\n\r\n');
    const reply = parseReply(await c.closed);
    assert.equal(reply.status, 400);
    assert.equal(reply.json?.error?.code, 'malformed_request');
  });

  test('an idle keep-alive connection is closed after keepalive_timeout_ms', async () => {
    const before = await metricValue(stack.url, 'router_client_timeouts_total{kind="keepalive"}');
    const c = await open(stack.url);
    c.socket.write('GET /healthz HTTP/1.1\r\nhost: gateway\r\n\r\n');
    const text = await c.closed;
    const reply = parseReply(text);
    assert.equal(reply.status, 200);
    assert.match(reply.headers, /connection: keep-alive/);
    assert.equal(await metricValue(stack.url, 'router_client_timeouts_total{kind="keepalive"}'), before + 1);
  });

  test('a stream quieter than every client timeout is not cut', async () => {
    // 700 ms before the reply head and between events, against 300 ms header, body and keep-alive limits.
    const { hostname, port } = new URL(stack.url);
    const body = CHAT_BODY('gpt-5.4-mini-chunks-3-delay-700-latency-700', true);
    const text = await new Promise<string>((resolve, reject) => {
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
          let all = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => {
            all += d;
          });
          res.on('end', () => resolve(all));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    const deltas = text.split('\n').filter((l) => l.startsWith('data: {') && /"content":"[^"]/.test(l));
    assert.equal(deltas.length, 3, text);
    assert.match(text, /data: \[DONE\]/);
  });
});

describe('connection cap', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ extraYaml: 'limits:\n  max_connections: 3\n' });
  });
  after(() => stack.close());

  test('at max_connections the oldest idle connection is shed and a real request succeeds', async () => {
    const idle: RawConnection[] = [];
    for (let i = 0; i < 3; i++) {
      idle.push(await open(stack.url));
      await waitUntil(() => stack.gateway.gateway.connections() === i + 1, `connection ${i + 1} accepted`);
    }
    // One keep-alive connection for the real request and the metrics read that follows it.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const call = (method: string, path: string, body?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const { hostname, port } = new URL(stack.url);
        const req = httpRequest(
          {
            host: hostname,
            port,
            method,
            path,
            agent,
            headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => {
              text += d;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      const reply = await call('POST', '/v1/chat/completions', CHAT_BODY('gpt-5.4-mini'));
      assert.equal(reply.status, 200, reply.text);
      const [oldest, second, third] = idle;
      assert.ok(oldest && second && third);
      assert.equal(await oldest.closed, '', 'the oldest idle connection is closed without a reply');
      assert.equal(second.socket.destroyed, false);
      assert.equal(third.socket.destroyed, false);
      const metrics = await call('GET', '/metrics');
      assert.match(metrics.text, /^router_connections_shed_total\{reason="idle"\} 1$/m);
      assert.match(metrics.text, /^router_client_connections 3$/m);
      assert.match(metrics.text, /^router_client_connections_max 3$/m);
    } finally {
      agent.destroy();
      for (const c of idle) c.socket.destroy();
    }
  });
});
