// The store commands rate limits add per request (docs/operations.md "Hot path"), counted with MONITOR
// on a real redis-server: one gateway in shared-store mode with billing and balance enforcement on, keys
// read from the view cache, so a request without limits sends exactly its usage event's XADD.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StoredAccessKey } from '../../common/store-types.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ADMISSION_FIELDS, SETTLEMENT_FIELDS } from '../../store/rate-limit-scripts.ts';
import { openRedisStores, type RedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const PREFIX = 'rlhp:';
const BILLING_KEY = 'sk_billing_rl_hot_path';
const PROJECT = 'proj_rl_hot_path';
const LEASE_S = 3;

/** name -> the key's own limits (undefined: none). */
const KEYS: Record<string, StoredAccessKey['limits']> = {
  plain: undefined,
  all: { requestsPerMinute: 1000, tokensPerMinute: 1_000_000, maxConcurrent: 8 },
  rpm: { requestsPerMinute: 1000 },
  one: { requestsPerMinute: 1 },
  'held-a': { maxConcurrent: 8 },
  'held-b': { maxConcurrent: 8 },
};

let redis: RedisServer;
let upstream: UpstreamSim;
let held: HeldStreamUpstream;
let billing: BillingSim;
let stores: RedisStores;
let dir: string;
let gateway: RunningGateway;
/** The gateway's own connections (named router-gateway): what MONITOR records. */
let mine: Set<string>;
const secrets = new Map<string, string>();

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  held = await startHeldStreamUpstream(1, 1);
  billing = await startBillingSim({
    apiKey: BILLING_KEY,
    projectId: PROJECT,
    ruleSets: { rs_router: 'published' },
    wallets: Object.fromEntries(Object.keys(KEYS).map((name) => [`api_key:hp-${name}`, '1000'])),
  });
  dir = await mkdtemp(join(tmpdir(), 'router-rl-hot-'));
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      `  project_id: ${PROJECT}`,
      `  api_key: ${BILLING_KEY}`,
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${join(dir, 'outbox')}`,
      '  listen: 127.0.0.1:0',
      '  balance_enforcement:',
      '    enabled: true',
      '    currency: USD',
      '    webhook_secret: whsec_rl_hot_path',
      '    failure_mode: open',
      // No balance refresh (a store write) while commands are counted.
      '    cache_ttl_ms: 600000',
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: test-hash-secret',
      '  access_key_mode: redis_only',
      '  operation_timeout_ms: 5000',
      // Entries leave the view cache by invalidation only.
      '  view_cache_ms: 600000',
      // No per_key or per_subject defaults: only keys with their own limits are admitted.
      'rate_limits:',
      `  lease_s: ${LEASE_S}`,
      '',
    ].join('\n'),
  );
  stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
  for (const [name, limits] of Object.entries(KEYS)) {
    const secret = `ak_rlhp_${name}_${Math.random().toString(36).slice(2)}`;
    const extra: Partial<StoredAccessKey> = limits === undefined ? {} : { limits };
    assert.equal(await stores.accessKeys.create(testKeyRecord(`hp-${name}`, secret, extra)), 'created');
    secrets.set(name, secret);
  }
  const env = simProviderEnv(upstream.url, [], { groq: held.url });
  gateway = await startGateway(configFile, { env, sidecar: false });
  // Warm: the scripts are loaded and each key's view cached. The first request's view read finds no
  // balance; caching the one it looks up invalidates that read, so the second reads again and keeps it.
  for (let round = 0; round < 2; round++)
    for (const name of ['plain', 'all', 'rpm', 'one']) await (await chat(name)).arrayBuffer();
  await quiet();
  mine = await redis.clientAddrs('router-gateway');
  assert.ok(mine.size >= 1, 'gateway connections are named');
});

after(async () => {
  held.release();
  await gateway.close();
  await stores.close();
  await held.close();
  await upstream.close();
  await billing.close();
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function chat(name: string, init: { stream?: boolean } = {}): Promise<Response> {
  return fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secrets.get(name)}`,
      'content-type': 'application/json',
      ...(init.stream ? { 'x-router-provider': 'groq' } : {}),
    },
    body: JSON.stringify({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 16,
      ...(init.stream ? { stream: true } : {}),
    }),
  });
}

/** Concurrency slots the key holds (its `:c` sorted set, read on the admin connection). */
function slotsOf(name: string): Promise<number> {
  return redis.admin.zcard(`${PREFIX}{rl:api_key:hp-${name}}:k:hp-${name}:c`);
}

/**
 * A command by what it is; MONITOR shows a script as `evalsha <sha> <numkeys> <key> ...argv`. RENEW's
 * argv is the clock, the lease time, then (scope, lease) pairs; the lane script's is the clock, a head
 * of four, the number of settlements, then the fields of each settlement and of each admission:
 * `finish` settles only, `admit` admits only, `finish+admit` does both.
 */
function kindOf(cmd: readonly string[]): string {
  if (cmd[0] !== 'evalsha') return cmd[0]!;
  const key = cmd[3] ?? '';
  if (!key.includes('{rl:')) return `evalsha ${key.slice(PREFIX.length)}`;
  const argv = cmd.slice(4);
  if (argv[2] === ':s' || argv[2]?.startsWith(':k:')) return 'renew';
  const settled = Number(argv[5]);
  const admitted = (argv.length - 6 - settled * SETTLEMENT_FIELDS) / ADMISSION_FIELDS;
  if (settled > 0) return admitted > 0 ? 'finish+admit' : 'finish';
  return admitted > 0 ? 'admit' : `evalsha ${key}`;
}

/** Until the gateway has sent nothing for 200 ms (every completion of the warm-up is in). */
async function quiet(): Promise<void> {
  const total = async () => Object.values(await redis.commandCounts()).reduce((a, b) => a + b, 0);
  let last = -1;
  for (let poll = 0; poll < 50; poll++) {
    // Each call of INFO counts itself: compare with the previous poll's own call taken out.
    const now = await total();
    if (now === last + 1) return;
    last = now;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.fail('the gateway kept sending commands after the warm-up');
}

/** EVALSHA and XADD calls so far (INFO commandstats: every client's, and only the gateway sends these). */
async function sent(): Promise<{ evalsha: number; xadd: number }> {
  const counts = await redis.commandCounts();
  return { evalsha: counts.evalsha ?? 0, xadd: counts.xadd ?? 0 };
}

/**
 * The commands one request makes the gateway send, once Redis has received `expected` of them (the
 * completion's commands may follow the reply's last byte).
 */
async function commandsOf(
  name: string,
  expected: readonly string[],
): Promise<{ res: Response; kinds: string[] }> {
  const monitor = await redis.monitor(mine);
  const before = await sent();
  const res = await chat(name);
  await res.arrayBuffer();
  const want = {
    evalsha: expected.filter((k) => k !== 'xadd').length,
    xadd: expected.filter((k) => k === 'xadd').length,
  };
  try {
    await waitUntil(
      async () => {
        const now = await sent();
        return now.evalsha - before.evalsha >= want.evalsha && now.xadd - before.xadd >= want.xadd;
      },
      `${expected.join(', ')}`,
      5000,
    );
  } finally {
    // One more round trip: a command sent with the last one is counted too.
    await redis.admin.ping();
  }
  const kinds = (await monitor.stop()).map(kindOf);
  return { res, kinds };
}

test('a key without limits (no rate_limits defaults): one XADD per request, nothing for the limiter', async () => {
  const { res, kinds } = await commandsOf('plain', ['xadd']);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-ratelimit-limit-requests'), null);
  assert.deepEqual(kinds, ['xadd']);
});

test('a key with all three limits: one EVALSHA admits, one settles its tokens and releases its slot', async () => {
  const { res, kinds } = await commandsOf('all', ['admit', 'xadd', 'finish']);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-ratelimit-limit-requests'), '1000');
  assert.equal(res.headers.get('x-ratelimit-limit-tokens'), '1000000');
  // The XADD and the settlement leave in the same completion, on separate connections.
  assert.equal(kinds[0], 'admit');
  assert.deepEqual(kinds.slice(1).sort(), ['finish', 'xadd']);
  assert.equal(await slotsOf('all'), 0);
});

test('a key far from its requests_per_minute: after the first, requests take no command (the instance share); what the share did not use goes back', async () => {
  const monitor = await redis.monitor(mine);
  for (let i = 0; i < 5; i++) {
    const res = await chat('rpm');
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-limit-requests'), '1000');
    await res.arrayBuffer();
  }
  // Each share ends within a second of being taken and gives back the rest: the window then holds the
  // warm-up's two requests and these five, no more.
  const window = () =>
    redis.admin
      .hgetall(`${PREFIX}{rl:api_key:hp-rpm}:k:hp-rpm:r`)
      .then((h) => Object.values(h).reduce((sum, v) => sum + Number(v), 0));
  await waitUntil(async () => (await window()) === 7, 'the shares given back', 5000);
  await redis.admin.ping();
  const kinds = (await monitor.stop()).map(kindOf);
  // One admission took a share (none when the warm-up's was still running), and each share went back
  // in one call of its own.
  const admits = kinds.filter((k) => k === 'admit').length;
  assert.ok(admits <= 1, kinds.join(' '));
  assert.equal(kinds.filter((k) => k === 'xadd').length, 5, kinds.join(' '));
  const returns = kinds.filter((k) => k !== 'admit' && k !== 'xadd');
  assert.ok(returns.length >= 1 && returns.length <= admits + 1, kinds.join(' '));
  assert.ok(
    returns.every((k) => k === 'finish'),
    kinds.join(' '),
  );
});

test('a refused request: its admission only (no XADD, no FINISH), counted under provider="none"', async () => {
  // `one` spent its one request of the minute warming up.
  const { res, kinds } = await commandsOf('one', ['admit']);
  assert.equal(res.status, 429);
  assert.deepEqual(kinds, ['admit']);
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
  assert.match(
    metrics,
    /^router_requests_total\{provider="none",api="chat\.completions",status="429",stream="false"\} 2$/m,
  );
  assert.match(metrics, /^router_limited_requests_total\{limit="requests"\} 2$/m);
});

test('lease renewal: one EVALSHA per subject every lease_s / 3 for all its requests in flight, none per request', async () => {
  const streams = await Promise.all([chat('held-a', { stream: true }), chat('held-a', { stream: true })]);
  streams.push(await chat('held-b', { stream: true }));
  for (const s of streams) assert.equal(s.status, 200);
  await held.held(3);
  assert.equal(await slotsOf('held-a'), 2);
  // One renewal first (the first run of the script may load it with EVAL).
  await new Promise((r) => setTimeout(r, ((LEASE_S * 1000) / 3) * 1.5));
  const monitor = await redis.monitor(mine);
  const windowMs = ((LEASE_S * 1000) / 3) * 2.5;
  await new Promise((r) => setTimeout(r, windowMs));
  const seen = await monitor.stop();
  held.release();
  await Promise.all(streams.map((s) => s.arrayBuffer()));
  assert.deepEqual([...new Set(seen.map(kindOf))], ['renew'], 'nothing but renewals while streams run');
  const bySubject = new Map<string, string[][]>();
  for (const cmd of seen) bySubject.set(cmd[3]!, [...(bySubject.get(cmd[3]!) ?? []), cmd]);
  assert.deepEqual([...bySubject.keys()].sort(), [
    `${PREFIX}{rl:api_key:hp-held-a}:limits`,
    `${PREFIX}{rl:api_key:hp-held-b}:limits`,
  ]);
  // 2.5 intervals hold two or three ticks; each tick renews both of held-a's slots in one command.
  for (const [subject, cmds] of bySubject) {
    assert.ok(cmds.length >= 2 && cmds.length <= 3, `${subject}: ${cmds.length} renewals`);
    const pairs = subject.includes('held-a') ? 2 : 1;
    for (const cmd of cmds) assert.equal(cmd.slice(6).length, pairs * 2, cmd.join(' '));
  }
  await waitUntil(async () => (await slotsOf('held-a')) + (await slotsOf('held-b')) === 0, 'released');
});
