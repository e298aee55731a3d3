import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { createBillingClient } from '../../../billing/billing-client.ts';
import type { BalanceEnforcementConfig } from '../../../common/config-types.ts';
import { GatewayError } from '../../../common/errors.ts';
import { type StateStore, StoreUnavailableError, type SubjectRef } from '../../../common/store-types.ts';
import type { Hook, OnRequestResult, Principal, RequestContext } from '../../../common/types.ts';
import {
  type BalanceCheckOptions,
  type BalanceLookup,
  createBalanceCheckHook,
  isPositiveBalance,
} from '../../../hooks/builtin/balance-check.ts';
import { type BillingSim, startBillingSim } from '../../../sim/billing/server.ts';
import { type FileStateStore, openFileStore } from '../../../store/file-store.ts';

const API_KEY = 'sk_balance_test';
const SUBJECT: SubjectRef = { type: 'api_key', id: 'client-a' };
const silent = pino({ level: 'silent' });

type EnforcementSettings = BalanceCheckOptions['config'];

const BASE: EnforcementSettings = {
  enabled: true,
  currency: 'USD',
  failureMode: 'closed',
  requestTimeoutMs: 1000,
  cacheTtlMs: 1000,
  deniedCacheTtlMs: 300,
};

function principal(subjectId: string): Principal {
  return { keyName: subjectId || undefined, isMaster: subjectId === '', subjectType: 'api_key', subjectId };
}

function ctx(subjectId = SUBJECT.id): RequestContext {
  return {
    id: 'req-1',
    clientFormat: 'openai',
    log: silent,
    principal: principal(subjectId),
  } as RequestContext;
}

interface Rig {
  sim: BillingSim;
  store: FileStateStore;
  clock: { now: number };
  counts: Map<string, number>;
  hook(over?: Partial<EnforcementSettings>, opts?: Partial<BalanceCheckOptions>): Hook;
}

async function rig(t: { after: (fn: () => Promise<void>) => void }, wallet = '1.00'): Promise<Rig> {
  const sim = await startBillingSim({
    apiKey: API_KEY,
    projectId: 'proj_t',
    wallets: { 'api_key:client-a': wallet },
  });
  const dir = await mkdtemp(join(tmpdir(), 'router-balance-'));
  const clock = { now: 1_000_000 };
  const store = await openFileStore({ dir, role: 'reader', watch: false, now: () => clock.now });
  const counts = new Map<string, number>();
  const clients: { close(): Promise<void> }[] = [];
  t.after(async () => {
    for (const c of clients) await c.close();
    await store.close();
    await sim.close();
    await rm(dir, { recursive: true, force: true });
  });
  return {
    sim,
    store,
    clock,
    counts,
    hook(over = {}, opts = {}) {
      const config: EnforcementSettings = { ...BASE, ...over };
      const client = createBillingClient({
        baseUrl: sim.url,
        projectId: 'proj_t',
        apiKey: API_KEY,
        extractorRuleSetId: 'rs_router',
        requestTimeoutMs: 5000,
        balanceEnforcement: { requestTimeoutMs: config.requestTimeoutMs } as BalanceEnforcementConfig,
      });
      clients.push(client);
      const lookup: BalanceLookup = (type, id, currency, signal) =>
        client.getBalance(type, id, currency, signal);
      return createBalanceCheckHook({
        config,
        store,
        lookup,
        now: () => clock.now,
        metrics: {
          balanceChecks: {
            inc(labels: { result: string }) {
              counts.set(labels.result, (counts.get(labels.result) ?? 0) + 1);
            },
          } as never,
        },
        ...opts,
      });
    },
  };
}

async function outcome(hook: Hook, c: RequestContext = ctx()): Promise<string> {
  try {
    const r = (await hook.onRequest!(c)) as OnRequestResult;
    return r.kind;
  } catch (err) {
    if (err instanceof GatewayError) return `${err.status} ${err.code}`;
    throw err;
  }
}

test('exact decimal comparison: strictly greater than zero', () => {
  assert.equal(isPositiveBalance('0.0000000001'), true);
  assert.equal(isPositiveBalance('1e-30'), true);
  assert.equal(isPositiveBalance('0.000000000000000000000000000000000000000001'), true);
  assert.equal(isPositiveBalance('0'), false);
  assert.equal(isPositiveBalance('-0'), false);
  assert.equal(isPositiveBalance('0.00'), false);
  assert.equal(isPositiveBalance('-0.01'), false);
});

test('wallet balances against the simulator: tiny positive served, zero and negative 402', async (t) => {
  const r = await rig(t);
  for (const [balance, expected] of [
    ['0.0000000001', 'continue'],
    ['0', '402 insufficient_balance'],
    ['-0.01', '402 insufficient_balance'],
  ]) {
    r.sim.setWallet('api_key', 'client-a', balance!);
    // A fresh hook and an empty cache per balance.
    await r.store.invalidateBalance(SUBJECT);
    assert.equal(await outcome(r.hook()), expected, balance);
  }
  assert.equal(r.sim.lookups, 3);
});

test('no subject (master key, unmatched fallback) or enforcement off: skipped without a lookup', async (t) => {
  const r = await rig(t, '0');
  assert.equal(await outcome(r.hook(), ctx('')), 'continue');
  assert.equal(await outcome(r.hook({ enabled: false })), 'continue');
  const noPrincipal = { ...ctx(), principal: undefined } as RequestContext;
  assert.equal(await outcome(r.hook(), noPrincipal), 'continue');
  assert.equal(r.sim.lookups, 0);
  assert.equal(r.counts.get('skipped'), 2);
});

test('a blocked subject is refused with 402 without asking billing', async (t) => {
  const r = await rig(t, '100');
  await r.store.setSubject(SUBJECT, {
    blocked: true,
    lastEvent: 'wallet.insufficient_balance',
    lastEventId: 'evt_1',
    updatedAt: 1,
  });
  assert.equal(await outcome(r.hook()), '402 insufficient_balance');
  assert.equal(r.sim.lookups, 0);
  assert.equal(r.counts.get('blocked'), 1);
});

test('allowed and denied answers are cached for their own TTLs (injected clock)', async (t) => {
  const r = await rig(t, '1.00');
  const hook = r.hook();
  assert.equal(await outcome(hook), 'continue');
  assert.equal(r.sim.lookups, 1);
  r.sim.setWallet('api_key', 'client-a', '0');
  r.clock.now += 999;
  assert.equal(await outcome(hook), 'continue', 'allowed answer still cached');
  assert.equal(r.sim.lookups, 1);
  r.clock.now += 1; // cache_ttl_ms = 1000 reached
  assert.equal(await outcome(hook), '402 insufficient_balance');
  assert.equal(r.sim.lookups, 2);
  r.sim.setWallet('api_key', 'client-a', '5');
  r.clock.now += 299;
  assert.equal(await outcome(hook), '402 insufficient_balance', 'denied answer still cached');
  assert.equal(r.sim.lookups, 2);
  r.clock.now += 1; // denied_cache_ttl_ms = 300 reached
  assert.equal(await outcome(hook), 'continue');
  assert.equal(r.sim.lookups, 3);
  assert.equal(r.counts.get('cached_allowed'), 1);
  assert.equal(r.counts.get('cached_denied'), 1);
});

test('single flight: 200 concurrent requests of one subject make one lookup', async (t) => {
  const r = await rig(t, '1.00');
  const hook = r.hook();
  const results = await Promise.all(Array.from({ length: 200 }, () => outcome(hook)));
  assert.deepEqual(new Set(results), new Set(['continue']));
  assert.equal(r.sim.lookups, 1);
  // Denied bursts too.
  r.sim.setWallet('api_key', 'client-a', '0');
  r.clock.now += 1000;
  const denied = await Promise.all(Array.from({ length: 200 }, () => outcome(hook)));
  assert.deepEqual(new Set(denied), new Set(['402 insufficient_balance']));
  assert.equal(r.sim.lookups, 2);
});

test('failure_mode closed: lookup error and hang answer 503, errors are not cached', async (t) => {
  const r = await rig(t, '1.00');
  const hook = r.hook({ requestTimeoutMs: 150 });
  r.sim.setFailure('lookup-error');
  assert.equal(await outcome(hook), '503 billing_unavailable');
  r.sim.setFailure('lookup-hang');
  const started = performance.now();
  const hung = await Promise.all(Array.from({ length: 50 }, () => outcome(hook)));
  const took = performance.now() - started;
  assert.deepEqual(new Set(hung), new Set(['503 billing_unavailable']));
  assert.ok(took >= 140 && took < 1500, `bounded by request_timeout_ms (took ${took} ms)`);
  assert.equal(r.sim.lookups, 2, 'one lookup for the 50 waiting requests');
  r.sim.setFailure('none');
  assert.equal(await outcome(hook), 'continue', 'the failure was not cached');
  assert.equal(r.sim.lookups, 3);
  assert.equal(r.counts.get('error_closed'), 51);
});

test('failure_mode open: lookup error and hang serve the request and log a warning', async (t) => {
  const r = await rig(t, '0');
  const warnings: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) });
  const hook = r.hook({ failureMode: 'open', requestTimeoutMs: 100 });
  const c = { ...ctx(), log } as RequestContext;
  r.sim.setFailure('lookup-error');
  assert.equal(await outcome(hook, c), 'continue');
  r.sim.setFailure('lookup-hang');
  assert.equal(await outcome(hook, c), 'continue');
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /failure_mode open/);
  assert.doesNotMatch(warnings.join(''), new RegExp(API_KEY));
  r.sim.setFailure('none');
  assert.equal(await outcome(hook, c), '402 insufficient_balance', 'nothing cached: the real answer applies');
  assert.equal(r.counts.get('error_open'), 2);
});

test('a store that cannot answer: closed refuses, open asks billing directly', async (t) => {
  const r = await rig(t, '0');
  const broken: StateStore = {
    ...r.store,
    view: () => Promise.reject(new StoreUnavailableError('view')),
  };
  assert.equal(await outcome(r.hook({}, { store: broken })), '503 billing_unavailable');
  assert.equal(r.sim.lookups, 0);
  assert.equal(await outcome(r.hook({ failureMode: 'open' }, { store: broken })), '402 insufficient_balance');
  assert.equal(r.sim.lookups, 1);
});

test('while another instance holds the refresh lock, its cached answer is used', async (t) => {
  const r = await rig(t, '0');
  const elsewhere: StateStore = { ...r.store, tryRefreshLock: async () => false };
  const hook = r.hook({}, { store: elsewhere, lockPollMs: 5 });
  const pending = outcome(hook);
  // The other instance finishes its lookup and caches the answer.
  await r.store.putBalance(SUBJECT, { allowed: true, balance: '3', currency: 'USD', fetchedAt: 0 }, 1000);
  assert.equal(await pending, 'continue');
  assert.equal(r.sim.lookups, 0);
});

test('a webhook that lands during a lookup is not overwritten by the stale answer', async (t) => {
  const r = await rig(t);
  let release: (v: { balance: string; currency: string }) => void = () => undefined;
  let calls = 0;
  const lookup: BalanceLookup = () => {
    calls++;
    return calls === 1
      ? new Promise((resolve) => {
          release = resolve;
        })
      : Promise.resolve({ balance: '2', currency: 'USD' });
  };
  const hook = r.hook({}, { lookup });
  const first = outcome(hook);
  while (calls === 0) await new Promise((res) => setImmediate(res));
  // balance_changed lands (the gateway's notice applied it) while the old lookup is still out.
  await r.store.setSubject(SUBJECT, {
    blocked: false,
    lastEvent: 'wallet.balance_changed',
    lastEventId: 'evt_credit',
    updatedAt: 2,
  });
  // A request after the change does not join the stale lookup.
  assert.equal(await outcome(hook), 'continue');
  assert.equal(calls, 2);
  release({ balance: '0', currency: 'USD' });
  assert.equal(await first, '402 insufficient_balance');
  assert.equal(await outcome(hook), 'continue', 'the stale denial was not cached');
  assert.equal(calls, 2);
});

test('no wallet: closed refuses it as an empty wallet, open serves it; cached for the denied TTL', async (t) => {
  const r = await rig(t, '1.00');
  for (const failureMode of ['closed', 'open'] as const) {
    const hook = r.hook({ failureMode });
    const subject = `no-wallet-${failureMode}`;
    const lookups = r.sim.lookups;
    const expected = failureMode === 'closed' ? '402 insufficient_balance' : 'continue';
    if (failureMode === 'closed') {
      await assert.rejects(
        async () => hook.onRequest!(ctx(subject)),
        (err: unknown) =>
          err instanceof GatewayError &&
          err.status === 402 &&
          err.code === 'insufficient_balance' &&
          err.message === new GatewayError('insufficient_balance').message,
      );
    } else {
      assert.equal(await outcome(hook, ctx(subject)), 'continue');
    }
    assert.equal(await outcome(hook, ctx(subject)), expected);
    assert.equal(r.sim.lookups, lookups + 1, `${failureMode}: cached like a denial`);
    r.sim.setWallet('api_key', subject, '3');
    r.clock.now += 300; // denied_cache_ttl_ms
    assert.equal(await outcome(hook, ctx(subject)), 'continue', 'a wallet created later is seen');
  }
  assert.equal(r.counts.get('no_wallet'), 1);
  assert.equal(r.counts.get('cached_denied'), 1);
  assert.equal(r.counts.get('no_wallet_open'), 2);
});

test('no wallet, failure_mode open: one warning per subject per denied_cache_ttl_ms', async (t) => {
  const r = await rig(t, '1.00');
  const hook = r.hook({ failureMode: 'open', deniedCacheTtlMs: 300 });
  const warnings: { subjectId?: string; msg: string }[] = [];
  const logged = (subjectId: string): RequestContext => {
    const log = pino(
      { level: 'warn' },
      { write: (line: string) => warnings.push(JSON.parse(line) as { subjectId?: string; msg: string }) },
    );
    return { ...ctx(subjectId), log } as RequestContext;
  };
  for (let i = 0; i < 3; i++) assert.equal(await outcome(hook, logged('nw-a')), 'continue');
  assert.equal(await outcome(hook, logged('nw-b')), 'continue');
  assert.deepEqual(
    warnings.map((w) => w.subjectId),
    ['nw-a', 'nw-b'],
  );
  assert.match(warnings[0]!.msg, /no wallet for this subject; serving the request \(failure_mode open\)/);
  r.clock.now += 300;
  assert.equal(await outcome(hook, logged('nw-a')), 'continue');
  assert.equal(warnings.length, 3, 'warned again after the denied TTL');
  assert.equal(r.counts.get('no_wallet_open'), 5);
});
