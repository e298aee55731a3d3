// deploy/nginx/router.conf agrees with the gateway's configuration defaults (body limits, webhook path,
// timeouts, keep-alive ordering), upgrades the realtime paths only, and nginx accepts it (`nginx -t` on
// the rendered file, when installed).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { realtimeDialectOf } from '../../hooks/families/index.ts';
import { findNginx, ROUTER_CONF, renderRouterConf } from '../support/nginx.ts';
import { ROOT } from '../support/stack.ts';

type SchemaNode = { properties?: Record<string, SchemaNode>; default?: unknown };

async function schemaDefault(path: string): Promise<unknown> {
  const schema = JSON.parse(await readFile(join(ROOT, 'config/schema.json'), 'utf8')) as SchemaNode;
  const node = path.split('.').reduce<SchemaNode | undefined>((n, k) => n?.properties?.[k], schema);
  assert.ok(node, `schema has ${path}`);
  return node.default;
}

function bytes(size: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(size);
  assert.ok(m, size);
  return Number(m[1]) * ({ '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase()] ?? 1);
}

function seconds(value: string): number {
  const m = /^(\d+)(ms|s|m)?$/.exec(value);
  assert.ok(m, value);
  return Number(m[1]) * ({ ms: 0.001, s: 1, m: 60 }[m[2] ?? 's'] ?? 1);
}

/** Directive values of a block: the server block, or one location inside it. */
function block(conf: string, opener: RegExp): string {
  const start = conf.search(opener);
  assert.ok(start >= 0, `no block ${opener}`);
  let depth = 0;
  for (let i = conf.indexOf('{', start); i < conf.length; i++) {
    if (conf[i] === '{') depth++;
    else if (conf[i] === '}' && --depth === 0) return conf.slice(start, i + 1);
  }
  throw new Error('unbalanced braces');
}

const directive = (text: string, name: string): string | undefined =>
  new RegExp(`^\\s*${name}\\s+([^;]+);`, 'm').exec(text)?.[1]?.trim();

test('router.conf body limits, webhook path and timeouts match the gateway defaults', async () => {
  const conf = await readFile(ROUTER_CONF, 'utf8');
  const server = block(conf, /^server \{/m);
  const bodyLimit = directive(server, 'client_max_body_size');
  assert.ok(bodyLimit);
  assert.equal(bytes(bodyLimit), await schemaDefault('limits.max_body_bytes'));

  const webhookPath = await schemaDefault('billing.balance_enforcement.webhook_path');
  const webhook = block(server, new RegExp(`location = ${String(webhookPath).replaceAll('/', '\\/')} \\{`));
  assert.equal(directive(webhook, 'proxy_pass'), 'http://router_billing');
  const webhookLimit = directive(webhook, 'client_max_body_size');
  assert.ok(webhookLimit);
  assert.equal(
    bytes(webhookLimit),
    await schemaDefault('billing.balance_enforcement.webhook_max_body_bytes'),
  );

  // nginx waits longer than the gateway, which reports a stalled upstream in the client's format.
  const bodyTimeoutS = Number(await schemaDefault('limits.upstream_body_timeout_ms')) / 1000;
  const headersTimeoutS = Number(await schemaDefault('limits.upstream_headers_timeout_ms')) / 1000;
  const readTimeout = seconds(directive(server, 'proxy_read_timeout') ?? '60s');
  assert.ok(readTimeout > bodyTimeoutS && readTimeout > headersTimeoutS);
  assert.ok(seconds(directive(server, 'send_timeout') ?? '60s') >= bodyTimeoutS);

  // Streaming and keep-alive settings.
  assert.equal(directive(server, 'proxy_buffering'), 'off');
  assert.equal(directive(server, 'gzip'), 'off');
  assert.equal(directive(server, 'proxy_http_version'), '1.1');
  assert.match(server, /proxy_set_header Connection "";/);
  assert.match(server, /proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/);
  assert.match(server, /proxy_set_header X-Router-Request-Id \$request_id;/);
  assert.match(server, /proxy_set_header X-Router-Correlation-Id \$http_x_router_request_id;/);
  const upstream = block(conf, /^upstream router_gateway \{/m);
  assert.ok(Number(directive(upstream, 'keepalive')) > 0);
  // The gateway keeps idle connections 65 s (proxy/server.ts): nginx must give up on them first.
  assert.ok(seconds(directive(upstream, 'keepalive_timeout') ?? '60s') < 65);
  assert.ok(
    !/\$request_uri|\$args|\$query_string|\$http_authorization/.test(conf),
    'secrets in the log format',
  );
});

/** A block's text without the blocks nested in it (a server's own directives, not its locations'). */
function ownText(blockText: string): string {
  const body = blockText.slice(blockText.indexOf('{') + 1, -1);
  let out = '';
  let depth = 0;
  let lineStart = 0;
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '\n' && depth === 0) {
      out += body.slice(lineStart, i + 1);
      lineStart = i + 1;
    } else if (body[i] === '{') depth++;
    else if (body[i] === '}' && --depth === 0) lineStart = i + 1;
  }
  return out;
}

const headersOf = (text: string): string[] =>
  [...text.matchAll(/^\s*proxy_set_header\s+([^;]+);/gm)].map((m) => m[1]!.trim().replace(/\s+/g, ' '));

test('router.conf upgrades the realtime paths, and only those, with session-long timeouts', async () => {
  const conf = await readFile(ROUTER_CONF, 'utf8');
  const server = block(conf, /^server \{/m);
  const own = ownText(server);
  // Plain requests: no Upgrade forwarded, Connection cleared for keep-alive.
  const upgrades = (text: string) => headersOf(text).some((h) => /^(Upgrade|Connection \$)/i.test(h));
  assert.ok(!upgrades(own), 'the server level forwards no upgrade');
  assert.ok(!upgrades(block(server, /location \/ \{/)), 'location / forwards no upgrade');
  assert.ok(headersOf(own).includes('Connection ""'));
  // The map gives `upgrade` for an upgrade and nothing (keep-alive) otherwise.
  const map = block(conf, /^map \$http_upgrade \$connection_upgrade \{/m);
  assert.match(map, /default\s+upgrade;/);
  assert.match(map, /''\s+'';/);

  // The gateway's realtime paths (hooks/families realtimeDialectOf) and the locations that carry them.
  const paths = {
    '/v1/realtime': /location = \/v1\/realtime \{/,
    '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent': /location \/ws\/ \{/,
    '/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent': /location \/ws\/ \{/,
  };
  const serverHeaders = headersOf(own).filter((h) => !h.startsWith('Connection '));
  const serverRead = seconds(directive(own, 'proxy_read_timeout') ?? '60s');
  for (const [path, opener] of Object.entries(paths)) {
    assert.ok(realtimeDialectOf(path), `${path} is a realtime path of the gateway`);
    const loc = block(server, opener);
    assert.equal(directive(loc, 'proxy_pass'), 'http://router_gateway');
    const headers = headersOf(loc);
    assert.ok(headers.includes('Upgrade $http_upgrade'), `${path}: Upgrade`);
    assert.ok(headers.includes('Connection $connection_upgrade'), `${path}: Connection`);
    // A location's proxy_set_header replaces the server's list: every server header is repeated.
    for (const h of serverHeaders) assert.ok(headers.includes(h), `${path}: proxy_set_header ${h}`);
    // Session-long: at least an hour (the longest upstream session) and the HTTP timeouts.
    for (const name of ['proxy_read_timeout', 'proxy_send_timeout']) {
      const value = seconds(directive(loc, name) ?? '60s');
      assert.ok(value >= 3600 && value >= serverRead, `${path}: ${name} ${value}`);
    }
  }
});

test('nginx -t accepts the rendered router.conf', {
  skip: findNginx() === undefined && 'nginx not installed',
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'router-nginx-t-'));
  try {
    await mkdir(join(dir, 'logs'));
    const rendered = renderRouterConf(await readFile(ROUTER_CONF, 'utf8'), {
      gateway: '127.0.0.1:18080',
      sidecar: '127.0.0.1:18081',
      listen: '127.0.0.1:18000',
      accessLog: join(dir, 'logs/access.log'),
    });
    await writeFile(join(dir, 'router.conf'), rendered);
    await writeFile(
      join(dir, 'nginx.conf'),
      `pid ${dir}/nginx.pid;\nerror_log ${dir}/logs/error.log;\nevents {}\nhttp {\n  client_body_temp_path ${dir};\n  proxy_temp_path ${dir};\n  include ${dir}/router.conf;\n}\n`,
    );
    const { stderr } = await promisify(execFile)(findNginx() as string, [
      '-t',
      '-p',
      `${dir}/`,
      '-c',
      join(dir, 'nginx.conf'),
      '-e',
      join(dir, 'logs/error.log'),
    ]);
    assert.match(stderr, /test is successful/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('renderRouterConf refuses a file whose marked lines are gone', () => {
  assert.throws(
    () =>
      renderRouterConf('server { listen 80; }', {
        gateway: 'a:1',
        sidecar: 'b:2',
        listen: 'c:3',
        accessLog: '/x',
      }),
    /no line matches/,
  );
});
