// Instance shares (store/redis-rate-limits.ts): far from its limits an instance admits on its own from
// what the store counted for it in advance. Several adapters on one real redis-server stand for several
// gateways; one test clock for the store's windows and the shares' lifetimes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import type { Admission, AdmitResult, RateLimits } from '../../common/rate-limit-types.ts';
import { SHARE_MS, SHARE_REQUESTS, SHARE_SLOTS } from '../../store/rate-limit-scripts.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { createRedisRateLimits } from '../../store/redis-rate-limits.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';

let redis: RedisServer;
let client: Redis;
before(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
after(async () => {
  client.disconnect();
  await redis.close();
});

const T0 = 1_800_000_000_000;
const subject = { type: 'org', id: 'acme' };

function admission(lease: string, keyLimits: RateLimits, tokens = 0): Admission {
  return {
    key: { name: 'k1', limits: keyLimits },
    subject,
    subjectLimits: {},
    lease,
    countRequest: true,
    tokens,
    holdSlot: true,
  };
}

const evalshaCalls = async () =>
  Number(/cmdstat_evalsha:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);

async function windowSum(key: string): Promise<number> {
  const flat = await client.hgetall(key);
  return Object.values(flat).reduce((s, v) => s + Number(v), 0);
}

test('far from its limits: one call admits and takes a share, the next admissions are local, and what was not used goes back', async () => {
  let now = T0;
  const prefix = 'rls1:';
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: prefix, billingStream: 'b' }), {
    clock: () => now,
  });
  const limits = { requestsPerMinute: 1000, tokensPerMinute: 1_000_000, maxConcurrent: 200 };
  const before = await evalshaCalls();
  const first = await store.admit(admission('a0', limits, 100), 30_000);
  assert.equal(first.admitted, true);
  assert.equal(first.requests?.remaining, 999);
  // 999 / 8 -> 124 requests; 100 tokens each; 199 / 8 -> 24 slots.
  assert.deepEqual(store.sharesHeld(), { requests: 124, tokens: 12_400, slots: 24, lent: 0 });
  const local: AdmitResult[] = [];
  for (let i = 1; i <= 10; i++) local.push(await store.admit(admission(`a${i}`, limits, 100), 30_000));
  assert.ok(local.every((r) => r.admitted));
  assert.equal((await evalshaCalls()) - before, 1, 'the ten admissions after the first sent nothing');
  // The headers stay true for the instance: what the window and its share have left.
  assert.deepEqual(
    local.map((r) => r.requests?.remaining),
    [998, 997, 996, 995, 994, 993, 992, 991, 990, 989],
  );
  assert.equal(local[9]!.concurrency?.remaining, 189);
  assert.equal(local[0]!.second, first.second + 1, 'counted in the second after the grant');
  assert.ok(
    local.every((r) => r.lease?.startsWith('a0#')),
    'each holds one of the share slots',
  );
  const base = `${prefix}{rl:org:acme}:k:k1`;
  assert.equal(await windowSum(`${base}:r`), 1 + 124);
  assert.equal(await client.zcard(`${base}:c`), 1 + 24);
  // One request completes using 40 tokens of its 100: the share gets them back, no call.
  await store.finish({
    key: 'k1',
    subject,
    lease: local[0]!.lease!,
    second: local[0]!.second,
    tokenDelta: -60,
    counted: local[0]!.counted,
    share: local[0]!.share,
  });
  assert.equal((await evalshaCalls()) - before, 1);
  // The share lapses: the next admission gives back what it did not use and asks for a new one.
  now += SHARE_MS;
  const next = await store.admit(admission('b0', limits, 100), 30_000);
  assert.equal(next.admitted, true);
  // 11 admitted before, this one, and its own new share: 1000 - 12 = 988 -> 123.
  assert.equal(await windowSum(`${base}:r`), 12 + 123);
  // Tokens: 11 x 100 admitted, 60 given back by the completion, 100 for this one, and the new share.
  assert.equal(await windowSum(`${base}:t`), 1100 - 60 + 100 + 123 * 100);
  // Slots: the 9 requests still running, the first, this one, and the new share's.
  assert.equal(await client.zcard(`${base}:c`), 9 + 1 + 1 + Math.min(64, Math.floor((200 - 11) / 8)));
  assert.equal(await client.zcard(`${base}:o`), 1, 'the ended share is no longer outstanding');
});

/**
 * Share sizes as one key's traffic drives them: `shares` shares each used up at once (what each held of
 * `dimension` when granted), then a share that lasts its whole time with one admission from it (what it
 * held, and what the next one holds).
 */
async function shareSizes(
  prefix: string,
  dimension: 'requests' | 'slots',
  admissionOf: (lease: string) => Admission,
  shares: number,
): Promise<{ grants: number[]; slow: number; afterSlow: number }> {
  let now = T0;
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: prefix, billingStream: 'b' }), {
    clock: () => now,
  });
  let n = 0;
  const admit = async () => assert.equal((await store.admit(admissionOf(`s${n++}`), 30_000)).admitted, true);
  const held = () => store.sharesHeld()[dimension];
  const grants: number[] = [];
  for (let share = 0; share < shares; share++) {
    await admit();
    const granted = held();
    grants.push(granted);
    // Requests that stay in flight: the share's requests all taken, or its slots all in use at once.
    for (let i = 0; i < granted; i++) await admit();
    assert.equal(held(), 0, 'the share was used up');
  }
  await admit();
  const slow = held();
  await admit();
  now += SHARE_MS;
  await admit();
  return { grants, slow, afterSlow: held() };
}

test('a share used up fast makes the next one twice as large, up to the cap; one that outlasts its use makes it smaller', async () => {
  const limits = { requestsPerMinute: 100_000_000 };
  const sizes = await shareSizes(
    'rls5:',
    'requests',
    (lease) => ({ ...admission(lease, limits), holdSlot: false }),
    6,
  );
  assert.deepEqual(
    sizes.grants,
    Array.from({ length: 6 }, (_, i) => Math.min(SHARE_REQUESTS.first * 2 ** i, SHARE_REQUESTS.cap)),
  );
  // Traffic slows: a share that lasts its whole time with most of it unused halves the next.
  assert.equal(sizes.afterSlow, sizes.slow / 2);
});

test('a share whose slots are all in use makes the next one hold twice as many; one busy at under half of them, half as many', async () => {
  const limits = { maxConcurrent: 1_000_000 };
  const sizes = await shareSizes('rls6:', 'slots', (lease) => admission(lease, limits), 3);
  assert.deepEqual(sizes.grants, [SHARE_SLOTS.first, SHARE_SLOTS.first * 2, SHARE_SLOTS.first * 4]);
  // The next share's time runs out with one slot used: the one after holds half as many.
  assert.equal(sizes.afterSlow, sizes.slow / 2);
});

test('near a limit every admission is the store own: a limit of 8 gets no share and admits exactly 8', async () => {
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: 'rls2:', billingStream: 'b' }), {
    clock: () => T0,
  });
  const results: AdmitResult[] = [];
  for (let i = 0; i < 12; i++)
    results.push(await store.admit(admission(`n${i}`, { requestsPerMinute: 8 }), 30_000));
  assert.equal(results.filter((r) => r.admitted).length, 8);
  assert.deepEqual(store.sharesHeld(), { requests: 0, tokens: 0, slots: 0, lent: 0 });
});

test('the requests a share lent are remembered only while it lasts, and only those that will settle', async () => {
  let now = T0;
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: 'rls4:', billingStream: 'b' }), {
    clock: () => now,
  });
  // requests_per_minute alone: nothing to settle, nothing remembered.
  for (let i = 0; i < 20; i++)
    await store.admit({ ...admission(`r${i}`, { requestsPerMinute: 1000 }), holdSlot: false }, 30_000);
  assert.equal(store.sharesHeld().lent, 0);
  // With tokens: each local admission will settle into the share while it lasts.
  const limits = { requestsPerMinute: 1000, tokensPerMinute: 1_000_000 };
  for (let i = 0; i < 20; i++)
    await store.admit({ ...admission(`t${i}`, limits, 10), holdSlot: false }, 30_000);
  assert.equal(store.sharesHeld().lent, 19);
  // The share ends: their completions go to the store as any request's, and nothing is kept for them.
  now += SHARE_MS;
  await store.admit({ ...admission('t-next', limits, 10), holdSlot: false }, 30_000);
  assert.equal(store.sharesHeld().lent, 0);
});

test('a refusal while another instance holds a share says to retry when that share ends', async () => {
  let now = T0;
  const layout = createKeyLayout({ keyPrefix: 'rls3:', billingStream: 'b' });
  const a = createRedisRateLimits(client, layout, { clock: () => now });
  const b = createRedisRateLimits(client, layout, { clock: () => now });
  const limits = { requestsPerMinute: 40 };
  // A takes 39 / 8 = 4 requests in advance; B then uses all the rest.
  assert.equal((await a.admit(admission('a0', limits), 30_000)).admitted, true);
  assert.equal(a.sharesHeld().requests, 4);
  let admitted = 0;
  let refusal: AdmitResult | undefined;
  for (let i = 0; i < 60 && refusal === undefined; i++) {
    now += 5;
    const r = await b.admit(admission(`b${i}`, limits), 30_000);
    if (r.admitted) admitted++;
    else refusal = r;
  }
  assert.equal(admitted, 35);
  assert.equal(refusal?.refusedBy, 'requests');
  assert.ok(refusal.retryAfterMs <= SHARE_MS, `retry ${refusal.retryAfterMs} ms`);
  // A's share lapses unused; once it is back, B is admitted again up to the limit.
  now += SHARE_MS;
  assert.equal((await a.admit(admission('a1', limits), 30_000)).admitted, true);
  const after = await Promise.all([
    b.admit(admission('b-after1', limits), 30_000),
    b.admit(admission('b-after2', limits), 30_000),
  ]);
  assert.deepEqual(
    after.map((r) => r.admitted),
    [true, true],
    'the 3 units A did not use came back: 1 + 35 + 1 + 2 = 39 of 40',
  );
});

test('property: instances admitting from shares, completing, aborting and dying never exceed a limit, and refuse only when the window and the shares hold it all', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        rpm: fc.integer({ min: 16, max: 200 }),
        conc: fc.integer({ min: 4, max: 60 }),
        tpm: fc.integer({ min: 2_000, max: 30_000 }),
        instances: fc.integer({ min: 1, max: 3 }),
      }),
      fc.array(
        fc.oneof(
          {
            weight: 6,
            arbitrary: fc.record({
              op: fc.constant('admit' as const),
              on: fc.nat(),
              tokens: fc.integer({ min: 1, max: 300 }),
            }),
          },
          {
            weight: 3,
            arbitrary: fc.record({
              op: fc.constant('finish' as const),
              pick: fc.nat(),
              used: fc.integer({ min: 0, max: 400 }),
            }),
          },
          { weight: 1, arbitrary: fc.record({ op: fc.constant('die' as const), on: fc.nat() }) },
          {
            weight: 2,
            arbitrary: fc.record({
              op: fc.constant('tick' as const),
              ms: fc.integer({ min: 1, max: 8_000 }),
            }),
          },
        ),
        { minLength: 100, maxLength: 300 },
      ),
      async (limits, ops) => {
        let now = T0;
        const layout = createKeyLayout({ keyPrefix: `rlsp${run++}:`, billingStream: 'b' });
        const leaseMs = 9000;
        const keyLimits = {
          requestsPerMinute: limits.rpm,
          maxConcurrent: limits.conc,
          tokensPerMinute: limits.tpm,
        };
        const instances = Array.from({ length: limits.instances }, () => ({
          counters: createRedisRateLimits(client, layout, { clock: () => now }),
          alive: true,
        }));
        type Live = {
          on: number;
          r: AdmitResult;
          lease: string;
          rec: { at: number; tokens: number };
          expiresAt: number;
        };
        const live = new Map<string, Live>();
        const lapsing: number[] = [];
        const admittedAt: { at: number; tokens: number }[] = [];
        let n = 0;
        let lastRenew = now;
        const inWindow = (lagSeconds: number) => {
          const start = Math.floor(now / 1000) - 59 - lagSeconds;
          return admittedAt.filter((x) => Math.floor(x.at / 1000) >= start);
        };
        const held = () => {
          const sum = { requests: 0, tokens: 0, slots: 0 };
          for (const i of instances) {
            const h = i.counters.sharesHeld();
            sum.requests += h.requests;
            sum.tokens += h.tokens;
            sum.slots += h.slots;
          }
          return sum;
        };
        for (const o of ops) {
          if (o.op === 'tick') {
            let left = o.ms;
            while (left > 0) {
              const step = Math.min(left, leaseMs / 3 - (now - lastRenew));
              now += step;
              left -= step;
              if (now - lastRenew >= leaseMs / 3) {
                for (const [, l] of live) {
                  if (!instances[l.on]!.alive) continue;
                  await instances[l.on]!.counters.renew(
                    [{ key: 'k1', subject, lease: l.lease, counted: l.r.counted }],
                    leaseMs,
                  );
                  l.expiresAt = now + leaseMs;
                }
                lastRenew = now;
              }
              for (let i = lapsing.length - 1; i >= 0; i--) if (now >= lapsing[i]!) lapsing.splice(i, 1);
            }
          } else if (o.op === 'admit') {
            const on = o.on % instances.length;
            if (!instances[on]!.alive) continue;
            const lease = `l${n++}`;
            const r = await instances[on]!.counters.admit(admission(lease, keyLimits, o.tokens), leaseMs);
            const running = [...live.values()].filter((l) => instances[l.on]!.alive || now < l.expiresAt);
            if (r.admitted) {
              assert.ok(inWindow(0).length < limits.rpm, 'admitted past requests_per_minute');
              assert.ok(running.length + lapsing.length < limits.conc, 'admitted past max_concurrent');
              // Counted, not used: usage above a request's count, settled later, can take the window past
              // the limit with or without shares; what was counted stays within one request's count of it.
              const counted = inWindow(0).reduce((s, x) => s + x.tokens, 0);
              const largest = inWindow(0).reduce((m, x) => Math.max(m, x.tokens), 0);
              assert.ok(counted < limits.tpm + largest, 'admitted with no tokens left');
              const rec = { at: now, tokens: o.tokens };
              admittedAt.push(rec);
              live.set(lease, { on, r, lease: r.lease ?? lease, rec, expiresAt: now + leaseMs });
            } else if (r.refusedBy === 'requests') {
              // Counted a second late at most (a share's second), plus what shares hold unused.
              assert.ok(
                inWindow(1).length + held().requests >= limits.rpm,
                `refused with ${inWindow(1).length} in the window and ${held().requests} in shares`,
              );
            } else if (r.refusedBy === 'concurrency') {
              assert.ok(running.length + lapsing.length + held().slots >= limits.conc, 'refused a free slot');
            }
          } else if (o.op === 'die') {
            const on = o.on % instances.length;
            if (instances.filter((i) => i.alive).length <= 1) continue;
            instances[on]!.alive = false;
            for (const [lease, l] of live)
              if (l.on === on) {
                live.delete(lease);
                lapsing.push(l.expiresAt);
              }
          } else if (live.size > 0) {
            const leases = [...live.keys()];
            const lease = leases[o.pick % leases.length]!;
            const l = live.get(lease)!;
            live.delete(lease);
            await instances[l.on]!.counters.finish({
              key: 'k1',
              subject,
              lease: l.lease,
              second: l.r.second,
              tokenDelta: o.used - l.rec.tokens,
              counted: l.r.counted,
              share: l.r.share,
            });
            if (l.r.second > Math.floor(now / 1000) - 60) l.rec.tokens = Math.min(l.rec.tokens, o.used);
          }
        }
      },
    ),
    { numRuns: 80, seed: 7 },
  );
});
