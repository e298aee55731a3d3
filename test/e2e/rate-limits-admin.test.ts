// `router-admin access-key update` on a live key in shared-store mode: two gateways sharing one Redis,
// each with the key in its view cache (kept for ten minutes), apply a new limit or model list at their
// next request.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rla:';

let redis: RedisServer;
let upstream: UpstreamSim;
let dir: string;
let configFile: string;
const gateways: RunningGateway[] = [];

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-rl-admin-'));
  configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      'log: { level: silent }',
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: rl-admin-hash-secret',
      '  access_key_mode: redis_only',
      '  operation_timeout_ms: 5000',
      // A change must reach the gateways by invalidation, not by the cache running out.
      '  view_cache_ms: 600000',
      '',
    ].join('\n'),
  );
  const env = simProviderEnv(upstream.url);
  for (let i = 0; i < 2; i++) gateways.push(await startGateway(configFile, { env, sidecar: false }));
});

after(async () => {
  for (const g of gateways) await g.close();
  await upstream?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

async function admin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const sink = (into: string[]) =>
    new Writable({
      write(c: Buffer, _e, done) {
        into.push(c.toString());
        done();
      },
    });
  const code = await runAdmin([...argv, '--config', configFile], { stdout: sink(out), stderr: sink(err) });
  return { code, out: out.join(''), err: err.join('') };
}

async function chat(
  g: RunningGateway,
  secret: string,
  model = 'gpt-5.4-mini',
): Promise<{ status: number; code?: string; limit: string | null; remaining: string | null }> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return {
    status: res.status,
    code: body.error?.code,
    limit: res.headers.get('x-ratelimit-limit-requests'),
    remaining: res.headers.get('x-ratelimit-remaining-requests'),
  };
}

test('access-key update --requests-per-minute on a live key applies on both gateways at their next request', async () => {
  const created = await admin('access-key', 'create', '--name', 'rla-a', '--requests-per-minute', '100');
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  // Both gateways now hold the key (limit 100) in their view cache.
  assert.deepEqual(await chat(gateways[0]!, secret), {
    status: 200,
    code: undefined,
    limit: '100',
    remaining: '99',
  });
  // The first gateway took 99 / 8 = 12 requests in advance (docs/operations.md, "Instance shares"):
  // counted as used for every other instance until it uses them or gives them back.
  assert.deepEqual(await chat(gateways[1]!, secret), {
    status: 200,
    code: undefined,
    limit: '100',
    remaining: '86',
  });

  const lowered = await admin('access-key', 'update', '--name', 'rla-a', '--requests-per-minute', '2');
  assert.equal(lowered.code, 0, lowered.err);
  // The two requests already in the window fill the new limit; each gateway gives back what it took in
  // advance under the old limit with its first admission under the new one.
  for (const g of [1, 0]) {
    assert.deepEqual(await chat(gateways[g]!, secret), {
      status: 429,
      code: 'rate_limit_requests',
      limit: '2',
      remaining: '0',
    });
  }

  // Raised again: both admit at once, the refusals not counted.
  const raised = await admin('access-key', 'update', '--name', 'rla-a', '--requests-per-minute', '4');
  assert.equal(raised.code, 0, raised.err);
  assert.deepEqual(await chat(gateways[0]!, secret), {
    status: 200,
    code: undefined,
    limit: '4',
    remaining: '1',
  });
  assert.deepEqual(await chat(gateways[1]!, secret), {
    status: 200,
    code: undefined,
    limit: '4',
    remaining: '0',
  });
  const listed = await admin('access-key', 'list');
  assert.match(listed.out, /rla-a/);
});

test('access-key update --models on a live key applies on both gateways at their next request', async () => {
  const created = await admin('access-key', 'create', '--name', 'rla-b');
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  for (const g of gateways) assert.equal((await chat(g, secret)).status, 200);
  const updated = await admin('access-key', 'update', '--name', 'rla-b', '--models', 'claude-*');
  assert.equal(updated.code, 0, updated.err);
  for (const g of gateways) {
    assert.deepEqual(await chat(g, secret), {
      status: 403,
      code: 'model_not_allowed',
      limit: null,
      remaining: null,
    });
    assert.equal((await chat(g, secret, 'claude-sonnet-5')).status, 200);
  }
});
