// Rate limits when the store cannot answer (docs/configuration.md "rate_limits", failure_mode): with
// access keys from the keys file (`file_only`) the key is still accepted, so failure_mode decides:
// `closed` answers 503 rate_limit_unavailable, `open` admits and counts store_unavailable.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const SECRET = 'ak_rl_store_down_secret';

let redis: RedisServer;
let upstream: UpstreamSim;
let dir: string;
const gateways: Record<'open' | 'closed', RunningGateway | undefined> = {
  open: undefined,
  closed: undefined,
};

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-rl-down-'));
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
  for (const mode of ['open', 'closed'] as const) {
    const configFile = join(dir, `router-${mode}.yaml`);
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
        `  key_prefix: "down-${mode}:"`,
        '  access_key_hash_secret: test-hash-secret',
        '  access_key_mode: file_only',
        '  operation_timeout_ms: 300',
        'rate_limits:',
        `  failure_mode: ${mode}`,
        '',
      ].join('\n'),
    );
    gateways[mode] = await startGateway(configFile, { env: simProviderEnv(upstream.url), sidecar: false });
  }
});

after(async () => {
  for (const g of Object.values(gateways)) await g?.close();
  await upstream.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function chat(g: RunningGateway): Promise<{ status: number; code?: string; limit: string | null }> {
  const res = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = (await res.json()) as { error?: { code?: string; type?: string } };
  return { status: res.status, code: body.error?.code, limit: res.headers.get('x-ratelimit-limit-requests') };
}

test('with the store up both gateways count in it', async () => {
  for (const g of Object.values(gateways)) {
    const r = await chat(g!);
    assert.equal(r.status, 200);
    assert.equal(r.limit, '12');
  }
});

test('store down: failure_mode closed answers 503 rate_limit_unavailable; open admits and counts it', async () => {
  await redis.stop();
  const closed = await chat(gateways.closed!);
  assert.equal(closed.status, 503);
  assert.equal(closed.code, 'rate_limit_unavailable');
  const open = await chat(gateways.open!);
  assert.equal(open.status, 200);
  assert.equal(open.limit, null);
  const metrics = await (await fetch(`${gateways.open!.url}/metrics`)).text();
  assert.match(metrics, /^router_limited_requests_total\{limit="store_unavailable"\} 1$/m);
});
