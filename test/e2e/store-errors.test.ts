// router_store_errors_total against a real redis-server that the test stops (SIGKILL): each store
// operation a request runs and that fails counts once, under its operation: the key lookup (`view`,
// access_key_mode redis_preferred: the request is refused 503 authentication_unavailable), the rate-limit
// script (`rateLimits`, failure_mode open: admitted unchecked) and the stored responses (`responses`).
// RouterStoreErrors (deploy/prometheus/router-alerts.yaml) reads this counter. The gateways close
// against the stopped server, and the file exits.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { parseSamples } from '../support/served-billed.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const SECRET = 'ak_store_errors_secret';

let redis: RedisServer;
let upstream: UpstreamSim;
let dir: string;
/** `keys`: access keys looked up in the store; `limits`: keys from the file, rate limits in the store. */
const gateways: Record<'keys' | 'limits', RunningGateway | undefined> = {
  keys: undefined,
  limits: undefined,
};

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-store-errors-'));
  const keysFile = join(dir, 'keys.yaml');
  await writeFile(
    keysFile,
    [
      'access_keys:',
      '  - name: limited',
      `    value: ${SECRET}`,
      // Small enough that every admission asks the store (an instance share needs 16 left at least).
      '    limits: { requests_per_minute: 12 }',
      '',
    ].join('\n'),
  );
  for (const [name, mode] of [
    ['keys', 'redis_preferred'],
    ['limits', 'file_only'],
  ] as const) {
    const configFile = join(dir, `router-${name}.yaml`);
    await writeFile(
      configFile,
      [
        'listen: 127.0.0.1:0',
        `providers_dir: ${PROVIDERS_DIR}`,
        `models: ${MODELS_FILE}`,
        `keys: ${keysFile}`,
        'log: { level: silent }',
        'store:',
        '  enabled: true',
        `  addr: ${redis.url}`,
        `  key_prefix: "errors${process.pid}-${name}:"`,
        '  access_key_hash_secret: test-hash-secret',
        `  access_key_mode: ${mode}`,
        '  operation_timeout_ms: 300',
        'rate_limits:',
        '  failure_mode: open',
        '',
      ].join('\n'),
    );
    gateways[name] = await startGateway(configFile, { env: simProviderEnv(upstream.url), sidecar: false });
  }
});

after(async () => {
  // Closed against the stopped server: each close must finish for this file to exit.
  for (const g of Object.values(gateways)) await g?.close();
  await upstream.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function storeErrors(g: RunningGateway): Promise<Record<string, number>> {
  const text = await (await fetch(`${g.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const s of parseSamples(text))
    if (s.name === 'router_store_errors_total') out[s.labels.operation ?? ''] = s.value;
  return out;
}

async function post(
  g: RunningGateway,
  path: string,
  body: unknown,
): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${g.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, code: json.error?.code };
}

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] };

test('store up: requests pass and nothing is counted', async () => {
  for (const g of Object.values(gateways)) {
    assert.equal((await post(g!, '/v1/chat/completions', CHAT)).status, 200);
    assert.deepEqual(await storeErrors(g!), {});
  }
});

test('store down: each failed operation of a request counts once, under its operation', async () => {
  await redis.stop();
  const keys = gateways.keys!;
  const limits = gateways.limits!;

  // The key lookup fails: refused, one `view` error per request.
  for (let i = 0; i < 3; i++) {
    const r = await post(keys, '/v1/chat/completions', CHAT);
    assert.equal(r.status, 503);
    assert.equal(r.code, 'authentication_unavailable');
  }
  assert.deepEqual(await storeErrors(keys), { view: 3 });

  // The rate-limit script fails: admitted unchecked (failure_mode open), one `rateLimits` error each.
  for (let i = 0; i < 2; i++) assert.equal((await post(limits, '/v1/chat/completions', CHAT)).status, 200);
  assert.deepEqual(await storeErrors(limits), { rateLimits: 2 });

  // A Responses reply is stored after it is sent: the write fails, one `responses` error.
  const stored = await post(limits, '/v1/responses', { model: 'gpt-5.4-mini', input: 'hi' });
  assert.equal(stored.status, 200);
  await waitUntil(async () => ((await storeErrors(limits)).responses ?? 0) >= 1, 'the failed response write');
  assert.deepEqual(await storeErrors(limits), { rateLimits: 3, responses: 1 });
});
