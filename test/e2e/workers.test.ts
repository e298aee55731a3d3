// `workers: 2` (ROUTER_WORKERS) in file mode, through a real `router` process: both workers serve on one
// address, one sidecar delivers every worker's outbox, /metrics and /readyz speak for all workers, a
// kill -9 of one worker during a 2,000-request run leaves every served request billed exactly once and
// the worker is restarted, the sidecar's subject state notice reaches every worker before the webhook
// is answered, and SIGTERM drains them all. Under the restart policy (common/restart-policy.ts): both
// workers killed twice in quick succession are each restarted at once, and a worker that fails during
// the first start (a test hook fails worker 2 once) neither stops the start nor stays down.

import assert from 'node:assert/strict';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Decimal } from 'decimal.js';
import { Agent, request } from 'undici';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { type ChildGateway, sidecarPending, spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { freePort } from '../support/nginx.ts';
import {
  ACCESS_KEY,
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  simProviderEnv,
  TRUST_LOOPBACK_IDS,
} from '../support/stack.ts';
import { chargeOf } from '../support/usage-events.ts';

const SECRET = 'whsec_workers_test';
const WEBHOOK_PATH = '/internal/billing/webhook';
const SUBJECT = { subject_type: 'api_key', subject_id: 'client_a' };

let upstream: UpstreamSim;
let billing: BillingSim;
let dir: string;

before(async () => {
  upstream = await startUpstreamSim();
  billing = await startBillingSim({
    apiKey: 'bk',
    projectId: 'p',
    ruleSets: { rs: 'published' },
    wallets: { 'api_key:client_a': '1000' },
    webhook: { url: 'http://127.0.0.1:9/unused', secret: SECRET },
  });
  dir = await mkdtemp(join(tmpdir(), 'router-workers-'));
});
after(async () => {
  await upstream?.close();
  await billing?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Router {
  readonly gw: ChildGateway;
  readonly outboxDir: string;
  readonly sidecarUrl: string;
}

async function startRouter(
  t: { after: (fn: () => unknown) => void },
  name: string,
  extraConfig: readonly string[] = [],
): Promise<Router> {
  const outboxDir = join(dir, name, 'outbox');
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: info }',
      TRUST_LOOPBACK_IDS,
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      '  project_id: p',
      '  api_key: bk',
      '  extractor_rule_set_id: rs',
      `  outbox_dir: ${outboxDir}`,
      `  state_dir: ${join(dir, name, 'state')}`,
      '  retry_interval_ms: 20',
      '  max_retry_interval_ms: 200',
      '  balance_enforcement:',
      '    enabled: true',
      `    webhook_secret: ${SECRET}`,
      ...extraConfig,
      '',
    ].join('\n'),
  );
  const sidecarPort = await freePort();
  const gw = await spawnLogged(
    'proxy/cli.ts',
    ['-c', file],
    {
      ...simProviderEnv(upstream.url),
      ROUTER_WORKERS: '2',
      ROUTER_BILLING_LISTEN: `127.0.0.1:${sidecarPort}`,
    },
    'router listening',
    { group: true },
  );
  // The primary, its workers and its sidecar, whether the case passed or not.
  t.after(async () => {
    gw.killAll();
    await gw.exited;
  });
  // `router listening` comes once one worker listens; the cases here want both.
  await waitUntil(
    async () => {
      const ready = await readyz(gw.url);
      return ready.status === 200 && (ready.body.workers as { listening: number }).listening === 2;
    },
    'the workers and the sidecar',
    60_000,
  );
  // The cases read the workers' pids from these lines, which may come a moment after /readyz says so.
  await waitUntil(() => logLines(gw, 0, 'worker listening').length >= 2, 'both workers logged as listening');
  return { gw, outboxDir, sidecarUrl: `http://127.0.0.1:${sidecarPort}` };
}

/** The router's log lines of this message, from line `from` on. */
function logLines(gw: ChildGateway, from: number, msg: string): Record<string, unknown>[] {
  return gw.lines.slice(from).filter((l) => l.msg === msg);
}

/** Long enough for a drain of idle workers on a loaded machine; a stall fails the case with the log. */
const STOP_DEADLINE_MS = 30_000;

async function within<T>(promise: Promise<T>, ms: number, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what()}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function readyz(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A chat request on a connection of its own, so that successive requests meet both workers. */
function chatOnNewConnection(url: string, rid: string): Promise<number> {
  const body = JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Hi.' }] });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          'content-type': 'application/json',
          'x-router-request-id': rid,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function getOnNewConnection(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The pids that logged the served requests of these ids. */
function servingPids(gw: ChildGateway, rids: ReadonlySet<string>): Set<number> {
  const pids = new Set<number>();
  for (const line of gw.lines) {
    if (line.msg === 'request' && rids.has(String(line.reqId))) pids.add(Number(line.pid));
  }
  return pids;
}

/** The sum of a counter's series. */
function counter(metrics: string, name: string): number {
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

test('two workers serve one address; /metrics adds them up; a subject blocked by webhook is refused by both', async (t) => {
  const { gw, outboxDir } = await startRouter(t, 'notice');
  const ready = await readyz(gw.url);
  assert.deepEqual(ready.body.workers, { configured: 2, listening: 2, restarts: 0 });
  assert.deepEqual(ready.body.sidecar, { supervised: true, state: 'up' });

  const rids = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const rid = `warm-${i}`;
    rids.add(rid);
    assert.equal(await chatOnNewConnection(gw.url, rid), 200);
  }
  await waitUntil(() => servingPids(gw, rids).size === 2, 'requests served by both workers');
  // Each worker writes its own outbox directory: the first the outbox itself, the second slot 1.
  await access(join(outboxDir, 'writer.lock'));
  await access(join(outboxDir, 'slots', '1', 'writer.lock'));
  // Whichever worker answers, the count is both workers'.
  for (let i = 0; i < 4; i++) {
    assert.equal(counter(await getOnNewConnection(`${gw.url}/metrics`), 'router_requests_total'), 20);
  }

  // Both workers have the subject's "allowed" answer cached; the block must reach both at once.
  const blocked = await billing.sendWebhook('wallet.insufficient_balance', SUBJECT, {
    url: `${gw.url}${WEBHOOK_PATH}`,
  });
  assert.equal(blocked.status, 204);
  // Applied by both workers before the 204 (on a quick machine each would also find it on its file watch).
  assert.equal(
    counter(await getOnNewConnection(`${gw.url}/metrics`), 'router_subject_state_notices_total'),
    2,
  );
  // The kernel spreads connections over the workers by a hash of their addresses, and a request's log
  // line follows its reply: requests go on, each refused, until both workers have logged a refusal.
  const refused = new Set<string>();
  await waitUntil(async () => {
    const rid = `blocked-${refused.size}`;
    refused.add(rid);
    assert.equal(await chatOnNewConnection(gw.url, rid), 402, `request ${rid} after the block`);
    return servingPids(gw, refused).size === 2;
  }, 'a refusal logged by each worker');
  const credited = await billing.sendWebhook('wallet.balance_changed', SUBJECT, {
    url: `${gw.url}${WEBHOOK_PATH}`,
  });
  assert.equal(credited.status, 204);
  for (let i = 0; i < 4; i++) assert.equal(await chatOnNewConnection(gw.url, `again-${i}`), 200);

  gw.child.kill('SIGTERM');
  assert.deepEqual(
    await within(gw.exited, STOP_DEADLINE_MS, () => `the router to exit after SIGTERM:\n${gw.recentLog()}`),
    { code: 0, signal: null },
  );
});

test('kill -9 of one worker during 2,000 requests: every served request billed exactly once; the worker is restarted', async (t) => {
  const { gw, sidecarUrl } = await startRouter(t, 'kill');
  const workerPids = gw.lines.filter((l) => l.msg === 'worker listening').map((l) => Number(l.pid));
  assert.equal(new Set(workerPids).size, 2);
  const victim = workerPids[0]!;
  const chargedBefore = new Decimal(billing.balance('api_key', 'client_a'));
  const eventsBefore = billing.events.length;

  const CONCURRENCY = 16;
  const agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });
  t.after(() => agent.close());
  const served = new Set<string>();
  const statuses = new Map<number, number>();
  let failures = 0;
  const errors: string[] = [];
  let next = 0;
  let killed = false;
  const one = async (i: number) => {
    const rid = `kill-${i}`;
    const stream = i % 2 === 1;
    try {
      const res = await request(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        // A connection lost between the primary and a dying worker must fail, not hang.
        headersTimeout: 20_000,
        bodyTimeout: 20_000,
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          'content-type': 'application/json',
          'x-router-request-id': rid,
        },
        body: JSON.stringify({
          model: 'gpt-5.4-mini',
          messages: [{ role: 'user', content: `Request ${i}, tell me about ${i}.` }],
          stream,
        }),
      });
      const text = await res.body.text();
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      if (res.statusCode === 200 && (!stream || text.includes('data: [DONE]'))) served.add(rid);
    } catch (err) {
      failures++;
      errors.push(`${rid}: ${(err as Error).message}`);
    }
  };
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < 2000) {
        const i = next++;
        if (i === 600 && !killed) {
          killed = true;
          process.kill(victim, 'SIGKILL');
        }
        await one(i);
      }
    }),
  );
  assert.ok(killed);
  assert.deepEqual([...statuses.keys()], [200], `statuses ${JSON.stringify([...statuses])}`);
  // Only requests on the killed worker's connections fail, each connection once (a connection the
  // primary handed it as it died is one more).
  assert.ok(failures <= 2 * CONCURRENCY, `${failures} requests failed`);
  assert.ok(!errors.some((e) => /timeout/i.test(e)), `requests hung: ${errors.join('; ')}`);
  assert.equal(served.size + failures, 2000);

  await waitUntil(async () => {
    const body = (await readyz(gw.url)).body;
    return JSON.stringify(body.workers) === JSON.stringify({ configured: 2, listening: 2, restarts: 1 });
  }, 'the killed worker to be replaced');
  assert.ok(gw.lines.some((l) => l.msg === 'worker exited; restarting' && l.signal === 'SIGKILL'));

  // Every served request's event arrives, the dead worker's included; then nothing is left to deliver.
  await waitUntil(
    async () =>
      billing.events.length - eventsBefore >= served.size && (await sidecarPending(sidecarUrl)) === 0,
    'the sidecar to deliver every event',
    60_000,
  );
  const mine = billing.events.slice(eventsBefore).map((e) => e.external_event_id);
  assert.equal(new Set(mine).size, mine.length, 'no event accepted twice');
  for (const rid of served) assert.ok(mine.includes(rid), `served request ${rid} was billed`);
  // Billed but not served: requests whose reply the kill cut after their event was on record.
  const extra = mine.filter((rid) => !served.has(rid));
  assert.ok(extra.length <= failures, `${extra.length} billed requests were neither served nor cut`);
  const charged = billing.events
    .slice(eventsBefore)
    .reduce((sum, e) => sum.plus(chargeOf(e)), new Decimal(0));
  assert.ok(
    chargedBefore.minus(billing.balance('api_key', 'client_a')).eq(charged),
    'wallet debited once per event',
  );
});

test('kill -9 of both workers, twice in quick succession: each is restarted at once, and serves', async (t) => {
  const { gw } = await startRouter(t, 'kill-twice');
  for (const round of [1, 2]) {
    const from = gw.lines.length;
    const pids = logLines(gw, 0, 'worker listening')
      .slice(-2)
      .map((l) => Number(l.pid));
    // One worker, then the other while the first one's replacement starts: for a moment none listens.
    process.kill(pids[0]!, 'SIGKILL');
    await waitUntil(() => logLines(gw, from, 'worker exited; restarting').length === 1, 'the first exit');
    process.kill(pids[1]!, 'SIGKILL');
    // The primary's events: each replacement says it listens.
    await waitUntil(
      () => logLines(gw, from, 'worker listening').length === 2,
      `round ${round}: both replacements listening`,
      60_000,
    );
    assert.equal(await chatOnNewConnection(gw.url, `kill-twice-${round}`), 200);
  }
  const exits = logLines(gw, 0, 'worker exited; restarting');
  assert.equal(exits.length, 4);
  for (const exit of exits) {
    assert.equal(exit.signal, 'SIGKILL');
    // At once: the host is without a listening worker only while one worker starts.
    assert.equal(exit.restartInMs, 0, JSON.stringify(exit));
  }
  assert.deepEqual((await readyz(gw.url)).body.workers, { configured: 2, listening: 2, restarts: 4 });
});

/** A hook module that fails the first start of worker 2 only (a marker file says it failed once). */
const FAIL_ONCE_HOOK = `
import { openSync } from 'node:fs';
export function createHook(options) {
  if (process.env.ROUTER_WORKER_ID === '2') {
    let first = true;
    try {
      openSync(options.marker, 'wx');
    } catch {
      first = false;
    }
    if (first) throw new Error('worker 2 fails its first start (test hook)');
  }
  return { name: 'fail-once' };
}
`;

test('a worker that fails during the first start: the start goes on with the other, the failed one is restarted', async (t) => {
  const hook = join(dir, 'fail-once-hook.mjs');
  await writeFile(hook, FAIL_ONCE_HOOK);
  const marker = join(dir, 'fail-once.marker');
  const { gw } = await startRouter(t, 'fail-start', [
    'hooks:',
    `  - module: ${hook}`,
    `    options: { marker: ${marker} }`,
  ]);
  const exits = logLines(gw, 0, 'worker exited; restarting');
  assert.equal(exits.length, 1, gw.recentLog());
  assert.equal(exits[0]?.worker, 2);
  assert.equal(exits[0]?.code, 1);
  assert.equal(exits[0]?.restartInMs, 0);
  assert.ok(gw.lines.some((l) => l.msg === 'router listening'));
  assert.deepEqual((await readyz(gw.url)).body.workers, { configured: 2, listening: 2, restarts: 1 });
  assert.equal(await chatOnNewConnection(gw.url, 'fail-start-1'), 200);
});
