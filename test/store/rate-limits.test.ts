import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import type { Admission, AdmitResult, RateLimits, ScopeUse } from '../../common/rate-limit-types.ts';
import { MemoryRateLimits } from '../../store/memory-rate-limits.ts';
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

function admission(lease: string, opts: Partial<Admission> & { keyLimits?: RateLimits } = {}): Admission {
  return {
    key: opts.keyLimits === undefined ? undefined : { name: 'k1', limits: opts.keyLimits },
    subject,
    subjectLimits: opts.subjectLimits ?? {},
    lease,
    countRequest: opts.countRequest ?? true,
    tokens: opts.tokens ?? 0,
    holdSlot: opts.holdSlot ?? true,
  };
}

/** Both adapters on one clock, each call made on both and their answers compared. */
function pair(prefix: string) {
  let now = T0;
  const memory = new MemoryRateLimits(() => now);
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: prefix, billingStream: 'b' }), {
    clock: () => now,
  });
  return {
    advance(ms: number) {
      now += ms;
    },
    get now() {
      return now;
    },
    async admit(a: Admission, leaseMs: number): Promise<AdmitResult> {
      const [m, r] = await Promise.all([memory.admit(a, leaseMs), store.admit(a, leaseMs)]);
      assert.deepEqual(r, m, `adapters disagree on ${a.lease}`);
      return m;
    },
    async finish(lease: string, second: number, tokenDelta: number, counted: ScopeUse, key = 'k1') {
      const s = { key, subject, lease, second, tokenDelta, counted };
      await Promise.all([memory.finish(s), store.finish(s)]);
    },
    async renew(lease: string, counted: ScopeUse, leaseMs: number) {
      const slots = [{ key: 'k1', subject, lease, counted }];
      await Promise.all([memory.renew(slots, leaseMs), store.renew(slots, leaseMs)]);
    },
  };
}

test('requests per minute: the limit admits exactly that many, names the limit and the wait', async () => {
  const p = pair('rl1:');
  const keyLimits = { requestsPerMinute: 3 };
  for (let i = 0; i < 3; i++) {
    const r = await p.admit(admission(`r${i}`, { keyLimits, holdSlot: false }), 30_000);
    assert.equal(r.admitted, true);
    assert.equal(r.requests?.remaining, 2 - i);
    p.advance(10_000);
  }
  const refused = await p.admit(admission('r3', { keyLimits, holdSlot: false }), 30_000);
  assert.equal(refused.admitted, false);
  assert.equal(refused.refusedBy, 'requests');
  // The first request's second leaves the window 60 s after it: 30 s from now.
  assert.equal(refused.retryAfterMs, 30_000);
  p.advance(30_000);
  assert.equal((await p.admit(admission('r4', { keyLimits, holdSlot: false }), 30_000)).admitted, true);
});

test('tokens per minute: provisional counts, settled by the metered usage, in the window they were counted in', async () => {
  const p = pair('rl2:');
  const subjectLimits = { tokensPerMinute: 1000 };
  const a = await p.admit(admission('t1', { subjectLimits, tokens: 900 }), 30_000);
  assert.equal(a.admitted, true);
  assert.equal(a.tokens?.remaining, 100);
  assert.equal(a.counted.subjectTokens, true);
  // Over the limit by one request's count at most: admitted while anything remains.
  const b = await p.admit(admission('t2', { subjectLimits, tokens: 900 }), 30_000);
  assert.equal(b.admitted, true);
  const c = await p.admit(admission('t3', { subjectLimits, tokens: 10 }), 30_000);
  assert.equal(c.refusedBy, 'tokens');
  // The first used 100, not 900: 1,000 - 100 - 900 = 0 left, still refused; the second used 50.
  await p.finish('t1', a.second, 100 - 900, a.counted);
  await p.finish('t2', b.second, 50 - 900, b.counted);
  const d = await p.admit(admission('t4', { subjectLimits, tokens: 10 }), 30_000);
  assert.equal(d.admitted, true);
  assert.equal(d.tokens?.remaining, 1000 - 150 - 10);
});

test('concurrency: slots released on finish, leases expire unless renewed, a lapsed lease is not renewed', async () => {
  const p = pair('rl3:');
  const keyLimits = { maxConcurrent: 2 };
  const lease = 30_000;
  const one = await p.admit(admission('c1', { keyLimits }), lease);
  const two = await p.admit(admission('c2', { keyLimits }), lease);
  assert.equal(one.admitted && two.admitted, true);
  const third = await p.admit(admission('c3', { keyLimits }), lease);
  assert.equal(third.refusedBy, 'concurrency');
  assert.equal(third.retryAfterMs, 1000);
  await p.finish('c1', one.second, 0, one.counted);
  const four = await p.admit(admission('c4', { keyLimits }), lease);
  assert.equal(four.admitted, true);
  // c2 is renewed, c4's instance died: after the lease only c2 holds a slot.
  p.advance(20_000);
  await p.renew('c2', two.counted, lease);
  p.advance(15_000);
  const five = await p.admit(admission('c5', { keyLimits }), lease);
  assert.equal(five.admitted, true);
  assert.equal(five.concurrency?.remaining, 0);
  // c4's lease lapsed: renewing it now does not take a slot back.
  await p.renew('c4', four.counted, lease);
  await p.finish('c2', two.second, 0, two.counted);
  assert.equal((await p.admit(admission('c6', { keyLimits }), lease)).admitted, true);
});

test('key and subject limits together: the tighter one is reported and refuses', async () => {
  const p = pair('rl4:');
  const opts = {
    keyLimits: { requestsPerMinute: 10 },
    subjectLimits: { requestsPerMinute: 2 },
    holdSlot: false,
  };
  assert.equal((await p.admit(admission('a', opts), 1000)).requests?.remaining, 1);
  assert.equal((await p.admit(admission('b', opts), 1000)).requests?.remaining, 0);
  assert.equal((await p.admit(admission('c', opts), 1000)).refusedBy, 'requests');
});

test('a subject limit stored in Redis overrides the default there', async () => {
  const layout = createKeyLayout({ keyPrefix: 'rl5:', billingStream: 'b' });
  await client.hset(`${layout.rateLimit('org', 'acme')}:limits`, 'requests_per_minute', '1');
  const store = createRedisRateLimits(client, layout, { clock: () => T0 });
  const opts = { subjectLimits: { requestsPerMinute: 100 }, holdSlot: false };
  assert.equal((await store.admit(admission('a', opts), 1000)).admitted, true);
  assert.equal((await store.admit(admission('b', opts), 1000)).refusedBy, 'requests');
});

test('property: random admissions, completions, aborts, renewals and deaths never exceed a limit or keep a lapsed slot', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        rpm: fc.integer({ min: 1, max: 8 }),
        conc: fc.integer({ min: 1, max: 4 }),
        tpm: fc.integer({ min: 50, max: 400 }),
      }),
      fc.array(
        fc.oneof(
          fc.record({ op: fc.constant('admit' as const), tokens: fc.integer({ min: 1, max: 120 }) }),
          fc.record({
            op: fc.constant('finish' as const),
            pick: fc.nat(),
            used: fc.integer({ min: 0, max: 150 }),
          }),
          fc.record({ op: fc.constant('die' as const), pick: fc.nat() }),
          fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 100, max: 25_000 }) }),
        ),
        { maxLength: 60 },
      ),
      async (limits, ops) => {
        const p = pair(`rlp${run++}:`);
        const leaseMs = 9000;
        const keyLimits = {
          requestsPerMinute: limits.rpm,
          maxConcurrent: limits.conc,
          tokensPerMinute: limits.tpm,
        };
        const live = new Map<
          string,
          { r: AdmitResult; rec: { at: number; tokens: number }; expiresAt: number }
        >();
        // lease -> when its slot lapses
        const dead = new Map<string, number>();
        const admittedAt: { at: number; tokens: number }[] = [];
        let n = 0;
        let lastRenew = p.now;
        for (const o of ops) {
          if (o.op === 'tick') {
            // Live instances renew every lease / 3.
            let left = o.ms;
            while (left > 0) {
              const step = Math.min(left, leaseMs / 3 - (p.now - lastRenew));
              p.advance(step);
              left -= step;
              if (p.now - lastRenew >= leaseMs / 3) {
                for (const [lease, l] of live) {
                  await p.renew(lease, l.r.counted, leaseMs);
                  l.expiresAt = p.now + leaseMs;
                }
                lastRenew = p.now;
              }
              for (const [lease, lapses] of dead) if (p.now >= lapses) dead.delete(lease);
            }
          } else if (o.op === 'admit') {
            const lease = `l${n++}`;
            const r = await p.admit(admission(lease, { keyLimits, tokens: o.tokens }), leaseMs);
            const windowStart = Math.floor(p.now / 1000) - 59;
            const inWindow = admittedAt.filter((x) => Math.floor(x.at / 1000) >= windowStart);
            if (r.admitted) {
              assert.ok(inWindow.length < limits.rpm, 'admitted past requests_per_minute');
              assert.ok(live.size + dead.size < limits.conc, 'admitted past max_concurrent');
              const used = inWindow.reduce((s, x) => s + x.tokens, 0);
              assert.ok(used < limits.tpm, 'admitted with no tokens left');
              const rec = { at: p.now, tokens: o.tokens };
              admittedAt.push(rec);
              live.set(lease, { r, rec, expiresAt: p.now + leaseMs });
            } else if (r.refusedBy === 'concurrency') {
              assert.ok(live.size + dead.size >= limits.conc, 'refused a free slot');
            }
          } else if (live.size > 0) {
            const leases = [...live.keys()];
            const lease = leases[o.pick % leases.length]!;
            const l = live.get(lease)!;
            live.delete(lease);
            if (o.op === 'die') dead.set(lease, l.expiresAt);
            else {
              await p.finish(lease, l.r.second, o.used - l.rec.tokens, l.r.counted);
              if (l.r.second > Math.floor(p.now / 1000) - 60) l.rec.tokens = o.used;
            }
          }
        }
      },
    ),
    { numRuns: 60, seed: 42 },
  );
});

test('the admissions of one subject in one turn go in one script call, in order, exactly', async () => {
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: 'rl6:', billingStream: 'b' }), {
    clock: () => T0,
  });
  const calls = async () =>
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
  await store.admit(admission('warm', { subjectLimits: { requestsPerMinute: 100 }, holdSlot: false }), 1000);
  const before = await calls();
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      store.admit(admission(`b${i}`, { keyLimits: { requestsPerMinute: 3 }, holdSlot: false }), 1000),
    ),
  );
  assert.deepEqual(
    results.map((r) => r.admitted),
    [true, true, true, false, false, false, false, false, false, false],
  );
  assert.deepEqual(
    results.slice(0, 3).map((r) => r.requests?.remaining),
    [2, 1, 0],
  );
  // The INFO call itself is not an EVALSHA.
  assert.equal((await calls()) - before, 1);
});

test("a subject's settlements and admissions of one turn go in one call, settlements first; those added while it is in flight in one more", async () => {
  const store = createRedisRateLimits(client, createKeyLayout({ keyPrefix: 'rl7:', billingStream: 'b' }), {
    clock: () => T0,
  });
  const keyLimits = { maxConcurrent: 1 };
  const calls = async () =>
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
  const first = await store.admit(admission('c0', { keyLimits }), 30_000);
  assert.equal(first.admitted, true);
  const before = await calls();
  // One turn: the holder's settlement and two admissions; the settlement goes first and frees the slot.
  const settled = store.finish({
    key: 'k1',
    subject,
    lease: 'c0',
    second: first.second,
    tokenDelta: 0,
    counted: first.counted,
  });
  const one = store.admit(admission('c1', { keyLimits }), 30_000);
  const two = store.admit(admission('c2', { keyLimits }), 30_000);
  // This turn's call is written at its check phase; this callback runs right after it, before any
  // reply can be read: what is added now waits for that call's answer.
  await new Promise((r) => setImmediate(r));
  const three = store.admit(admission('c3', { keyLimits }), 30_000);
  const four = store.admit(admission('c4', { keyLimits }), 30_000);
  await settled;
  assert.deepEqual(
    (await Promise.all([one, two, three, four])).map((r) => r.admitted),
    [true, false, false, false],
  );
  assert.equal((await calls()) - before, 2);
});
