// Shared-store mode when Redis goes away under load: a real redis-server (append-only, fsync on every
// write) killed with SIGKILL three times mid-run and restarted on the same port, a real gateway process
// and a sidecar consuming the stream. Events the stream cannot take wait in the gateway's spool and are
// moved once Redis is back: the billing simulator gets every request's event, once per idempotency key.
// Then the hard case: XADDs whose outcome is unknown (timed out while Redis held them).

import assert from 'node:assert/strict';
import { appendFile, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { streamBacklog } from '../../store/stream-ledger.ts';
import {
  type BillingStack,
  type ChildGateway,
  spawnLogged,
  startBillingStack,
  waitUntil,
} from '../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY } from '../support/stack.ts';
import { outboxEventIds } from '../support/usage-events.ts';

async function serve(url: string, rid: string, i: number): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': rid,
    },
    body: JSON.stringify({
      model: 'gpt-5.4-mini',
      stream: i % 2 === 1,
      messages: [{ role: 'user', content: `request ${rid}` }],
    }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function sharedStoreStack(redis: RedisServer, operationTimeoutMs: number): Promise<BillingStack> {
  const stack = await startBillingStack({ gateway: false, sidecar: false });
  await appendFile(
    stack.configFile,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "restart${process.pid}:"`,
      // Requests authenticate from the keys file, so they are served while Redis is down.
      '  access_key_mode: file_only',
      '  access_key_hash_secret: restart-test-hash-secret',
      `  operation_timeout_ms: ${operationTimeoutMs}`,
      '',
    ].join('\n'),
  );
  return stack;
}

function gatewayProcess(stack: BillingStack): Promise<ChildGateway> {
  return spawnLogged('proxy/cli.ts', ['-c', stack.configFile, '--no-sidecar'], stack.env, 'router listening');
}

function assertEachOnce(stack: BillingStack, rids: readonly string[]): void {
  const accepted = stack.billing.events.map((e) => e.external_event_id).sort();
  assert.deepEqual(accepted, [...rids].sort(), 'every request accepted exactly once');
}

/** Every line of every spool file (all slots). */
async function spoolText(outboxDir: string): Promise<string> {
  const root = join(outboxDir, 'spool');
  let text = '';
  for (const slot of await readdir(root).catch(() => [] as string[]))
    for (const name of await readdir(join(root, slot)))
      if (name.endsWith('.jsonl')) text += await readFile(join(root, slot, name), 'utf8');
  return text;
}

test('three SIGKILLs of Redis mid-run: every event reaches billing once', async (t) => {
  const redis = await startRedis({ persist: true });
  const stack = await sharedStoreStack(redis, 300);
  let gw: ChildGateway | undefined;
  t.after(async () => {
    gw?.child.kill('SIGKILL');
    await stack.close();
    await redis.close();
  });
  gw = await gatewayProcess(stack);
  await stack.startSidecar();
  const url = gw.url;

  const TOTAL = 1200;
  const CONCURRENCY = 12;
  const OUTAGE_REQUESTS = 60;
  const kills = [250, 550, 850];
  const rids = Array.from({ length: TOTAL }, (_, i) => `restart-${i}`);
  let next = 0;
  let done = 0;
  let outages = 0;
  let servedDuringOutage = 0;
  let restarting: Promise<void> | undefined;
  let down = false;
  const statuses: number[] = [];

  async function client(): Promise<void> {
    while (next < TOTAL) {
      const i = next++;
      const wasDown = down;
      statuses[i] = await serve(url, rids[i]!, i);
      done++;
      if (wasDown && down) servedDuringOutage++;
      if (outages < kills.length && done >= kills[outages]! && !down && restarting === undefined) {
        outages++;
        down = true;
        const target = done + OUTAGE_REQUESTS;
        // Killed while the other clients' requests are in flight; back after OUTAGE_REQUESTS replies.
        restarting = (async () => {
          await redis.stop();
          await waitUntil(() => done >= target || next >= TOTAL, 'requests served during the outage');
          await redis.start();
          down = false;
          restarting = undefined;
        })();
      }
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, client));
  await restarting;
  assert.equal(outages, 3);
  assert.ok(
    servedDuringOutage >= 3 * (OUTAGE_REQUESTS - CONCURRENCY),
    `${servedDuringOutage} served while down`,
  );
  for (const [i, s] of statuses.entries()) assert.equal(s, 200, `request ${i}`);

  await stack.billing.waitForEvents(TOTAL, 60_000);
  await waitUntil(
    async () =>
      (await streamBacklog(redis.admin, `restart${process.pid}:billing:events`, 'router-billing')) === 0,
    'stream drained',
    30_000,
  );
  assertEachOnce(stack, rids);
  assert.match(await spoolText(stack.outboxDir), /restart-\d+/, 'the spool carried events');

  gw.child.kill('SIGTERM');
  assert.deepEqual(await gw.exited, { code: 0, signal: null });
});

test('XADDs whose outcome is unknown (timed out while Redis held them) are spooled: billed once', async (t) => {
  const redis = await startRedis();
  const stack = await sharedStoreStack(redis, 200);
  let gw: ChildGateway | undefined;
  t.after(async () => {
    await redis.admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    gw?.child.kill('SIGKILL');
    await stack.close();
    await redis.close();
  });
  gw = await gatewayProcess(stack);
  await stack.startSidecar();
  const rids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const rid = `unknown-${i}`;
    rids.push(rid);
    assert.equal(await serve(gw.url, rid, i), 200);
  }
  await stack.billing.waitForEvents(5, 15_000);

  // Redis holds every write (replies included) until unpaused: the gateway's XADDs are on the wire,
  // time out after operation_timeout_ms and are spooled; Redis applies them later all the same.
  await redis.admin.call('CLIENT', 'PAUSE', '60000', 'WRITE');
  const held = Array.from({ length: 10 }, (_, i) => `unknown-${i + 5}`);
  for (const [i, rid] of held.entries()) assert.equal(await serve(gw.url, rid, i), 200);
  rids.push(...held);
  await waitUntil(async () => {
    const text = await spoolText(stack.outboxDir);
    const spooled = new Set(outboxEventIds(text));
    return held.every((rid) => spooled.has(rid));
  }, 'the timed-out events in the spool');
  await redis.admin.call('CLIENT', 'UNPAUSE');

  await stack.billing.waitForEvents(rids.length, 30_000);
  await waitUntil(
    () => stack.billing.duplicates >= held.length,
    'the held XADDs were applied after all and delivered too',
  );
  assertEachOnce(stack, rids);
  assert.equal(stack.billing.duplicates, held.length, 'each spooled event reached the stream twice at most');
});
