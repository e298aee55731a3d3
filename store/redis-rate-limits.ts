// Rate-limit counters in Redis: one script admits a request against its key's and its subject's limits
// at once, since all of a subject's counters share the hash tag `{rl:<type>:<id>}` (one slot in a
// cluster). Windows are 60 one-second buckets in a hash (field: the second); concurrency slots are a
// sorted set scored by lease expiry. Time is the server's (TIME), so every instance counts on one clock.
// Layout: docs/operations.md "Keys in Redis".

import type {
  Admission,
  AdmitResult,
  DimensionState,
  HeldSlot,
  LimitDimension,
  RateLimitCounters,
  RateLimits,
  Settlement,
} from '../common/rate-limit-types.ts';
import { endOfTurn } from '../common/turn-batch.ts';
import { defineScript, type KeyLayout, keySlot, type Redis } from './redis-client.ts';

// Shared head: the base of the subject's keys (KEYS[1] is `<base>:limits`) and the clock (ARGV[1], ms;
// '' = the server's TIME: tests give their own).
const CLOCK_LUA = `
local base = string.sub(KEYS[1], 1, #KEYS[1] - 7)
local ms
if ARGV[1] ~= '' then ms = tonumber(ARGV[1]) else
  local t = redis.call('TIME')
  ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local sec = math.floor(ms / 1000)
`;

// One call per subject carries what its lane holds (see createRedisRateLimits): settlements first, then
// admissions in order (each sees the ones before it, and the slots settled before them). ARGV: clock,
// lease ms, the subject's rpm, tpm and concurrency ('' = none; its own `:limits` hash overrides each),
// the number of settlements, then per settlement 5 fields: lease, second (-1: this one), token delta,
// key name, flags (subject tokens, subject slot, key tokens, key slot); then per admission 8 fields:
// lease, tokens, count request (1/0), hold slot (1/0), key name ('' = none), key rpm, tpm, concurrency.
// Returns one string, the admissions' answers joined by ';', each 14 values joined by ',': admitted,
// refused dimension, retry ms, second, the scopes' flags (subject tokens, subject slot, key tokens, key
// slot), then limit, remaining and reset ms for requests, tokens and concurrency (-1 when no limit). One
// bulk string, because the client's reply parser reads an array of numbers byte by byte in script and
// cost more than the rest of an admission.
const TURN_LUA = `${CLOCK_LUA}
local function settle(prefix, lease, second, delta, tok, slot)
  if slot == '1' then redis.call('ZREM', prefix .. ':c', lease) end
  if tok == '1' and delta ~= 0 and second > sec - 60 then
    local k = prefix .. ':t'
    redis.call('HINCRBY', k, second, delta)
    if redis.call('TTL', k) < 0 then redis.call('EXPIRE', k, 61) end
  end
end
local settled = tonumber(ARGV[6])
for at = 7, 6 + settled * 5, 5 do
  local lease, second, delta, flags = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), ARGV[at + 4]
  if second < 0 then second = sec end
  settle(base .. ':s', lease, second, delta, string.sub(flags, 1, 1), string.sub(flags, 2, 2))
  if ARGV[at + 3] ~= '' then
    settle(base .. ':k:' .. ARGV[at + 3], lease, second, delta, string.sub(flags, 3, 3), string.sub(flags, 4, 4))
  end
end
local out = {}
if 6 + settled * 5 >= #ARGV then return '' end
local leaseMs = tonumber(ARGV[2])
local function num(v)
  local n = tonumber(v)
  if n == nil or n <= 0 then return nil end
  return n
end
local own = redis.call('HMGET', KEYS[1], 'requests_per_minute', 'tokens_per_minute', 'max_concurrent')
local srpm, stpm, sconc = num(own[1]) or num(ARGV[3]), num(own[2]) or num(ARGV[4]), num(own[3]) or num(ARGV[5])
local function window(key)
  local flat = redis.call('HGETALL', key)
  local sum, buckets, old = 0, {}, {}
  for i = 1, #flat, 2 do
    local s = tonumber(flat[i])
    if s > sec - 60 then
      local v = tonumber(flat[i + 1])
      sum = sum + v
      buckets[#buckets + 1] = {s, v}
    else
      old[#old + 1] = flat[i]
    end
  end
  if #old > 0 then redis.call('HDEL', key, unpack(old)) end
  table.sort(buckets, function(a, b) return a[1] < b[1] end)
  return sum, buckets
end
local function waitFor(buckets, need)
  local freed = 0
  for _, b in ipairs(buckets) do
    freed = freed + b[2]
    if freed >= need then return (b[1] + 60) * 1000 - ms end
  end
  return 60000
end
local function resetOf(buckets)
  if #buckets == 0 then return 0 end
  return (buckets[1][1] + 60) * 1000 - ms
end
for at = 7 + settled * 5, #ARGV, 8 do
  local lease, tokens = ARGV[at], tonumber(ARGV[at + 1])
  local countReq, holdSlot = ARGV[at + 2] == '1', ARGV[at + 3] == '1'
  local scopes = {{base .. ':s', srpm, stpm, sconc}}
  if ARGV[at + 4] ~= '' then
    scopes[2] = {base .. ':k:' .. ARGV[at + 4], num(ARGV[at + 5]), num(ARGV[at + 6]), num(ARGV[at + 7])}
  end
  local refused, retry = '', 0
  local function refuse(dim, wait)
    if wait < 1 then wait = 1 end
    if wait > retry then refused, retry = dim, wait end
  end
  local state = {}
  for i, sc in ipairs(scopes) do
    local st = {}
    if sc[2] and countReq then
      local n, b = window(sc[1] .. ':r')
      st.r = {n, b}
      if n >= sc[2] then refuse('requests', waitFor(b, n - sc[2] + 1)) end
    end
    if sc[3] and (countReq or tokens > 0) then
      local n, b = window(sc[1] .. ':t')
      st.t = {n, b}
      if n >= sc[3] then refuse('tokens', waitFor(b, n - sc[3] + 1)) end
    end
    if sc[4] and holdSlot then
      redis.call('ZREMRANGEBYSCORE', sc[1] .. ':c', '-inf', ms)
      local n = redis.call('ZCARD', sc[1] .. ':c')
      st.c = n
      if n >= sc[4] then refuse('concurrency', 1000) end
    end
    state[i] = st
  end
  local admitted = refused == ''
  local flags = {'0', '0', '0', '0'}
  local dims = {{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}
  local function tighter(d, limit, remaining, reset)
    if remaining < 0 then remaining = 0 end
    if dims[d][1] == -1 or remaining < dims[d][2] then dims[d] = {limit, remaining, reset} end
  end
  for i, sc in ipairs(scopes) do
    local st = state[i]
    if st.r then
      local n = st.r[1]
      if admitted then
        redis.call('HINCRBY', sc[1] .. ':r', sec, 1)
        redis.call('EXPIRE', sc[1] .. ':r', 61)
        n = n + 1
      end
      local reset = resetOf(st.r[2])
      if reset == 0 and admitted then reset = 60000 end
      tighter(1, sc[2], sc[2] - n, reset)
    end
    if st.t then
      local n = st.t[1]
      if admitted then
        if tokens > 0 then
          redis.call('HINCRBY', sc[1] .. ':t', sec, tokens)
          redis.call('EXPIRE', sc[1] .. ':t', 61)
        end
        n = n + tokens
        flags[i * 2 - 1] = '1'
      end
      local reset = resetOf(st.t[2])
      if reset == 0 and admitted and tokens > 0 then reset = 60000 end
      tighter(2, sc[3], sc[3] - n, reset)
    end
    if st.c then
      local n = st.c
      if admitted then
        redis.call('ZADD', sc[1] .. ':c', ms + leaseMs, lease)
        redis.call('PEXPIRE', sc[1] .. ':c', leaseMs * 2)
        n = n + 1
        flags[i * 2] = '1'
      end
      tighter(3, sc[4], sc[4] - n, 1000)
    end
  end
  out[#out + 1] = table.concat({admitted and 1 or 0, refused, retry, sec, table.concat(flags),
    dims[1][1], dims[1][2], dims[1][3], dims[2][1], dims[2][2], dims[2][3], dims[3][1], dims[3][2], dims[3][3]}, ',')
end
return table.concat(out, ';')
`;

// ARGV: clock, lease ms, then pairs (scope suffix ':s' or ':k:<name>', lease). A slot already past its
// expiry stays free: renewing it would let a paused instance take back a slot others may hold now.
const RENEW_LUA = `${CLOCK_LUA}
local leaseMs = tonumber(ARGV[2])
for i = 3, #ARGV, 2 do
  local k = base .. ARGV[i] .. ':c'
  local score = redis.call('ZSCORE', k, ARGV[i + 1])
  if score and tonumber(score) > ms then
    redis.call('ZADD', k, ms + leaseMs, ARGV[i + 1])
    redis.call('PEXPIRE', k, leaseMs * 2)
  end
end
return 1
`;

const TURN = defineScript(TURN_LUA);
const RENEW = defineScript(RENEW_LUA);

const DIMENSIONS: readonly LimitDimension[] = ['requests', 'tokens', 'concurrency'];

function opt(n: number | undefined): string {
  return n === undefined ? '' : String(n);
}

function dimension(fields: string[], at: number): DimensionState | undefined {
  const limit = Number(fields[at]);
  if (limit < 0) return undefined;
  return { limit, remaining: Number(fields[at + 1]), resetMs: Math.max(0, Number(fields[at + 2])) };
}

function admitResult(answer: string): AdmitResult {
  const fields = answer.split(',');
  const refused = fields[1]!;
  const flags = fields[4]!;
  const result: { -readonly [K in keyof AdmitResult]: AdmitResult[K] } = {
    admitted: fields[0] === '1',
    retryAfterMs: Number(fields[2]),
    second: Number(fields[3]),
    counted: {
      subjectTokens: flags[0] === '1',
      subjectSlot: flags[1] === '1',
      keyTokens: flags[2] === '1',
      keySlot: flags[3] === '1',
    },
  };
  if (refused !== '') result.refusedBy = refused as LimitDimension;
  for (let i = 0; i < DIMENSIONS.length; i++) {
    const state = dimension(fields, 5 + i * 3);
    if (state !== undefined) result[DIMENSIONS[i]!] = state;
  }
  return result;
}

/** Most admissions in one call (a lane's others go in the next). */
const MAX_PER_CALL = 128;

interface Waiting<T, R> {
  readonly item: T;
  resolve(r: R): void;
  reject(e: unknown): void;
}

/** The script head of an admission: lease ms and the subject's limits from configuration. */
interface Head {
  readonly id: string;
  readonly args: readonly string[];
}

/**
 * One subject's traffic to its counters. At most one call is in flight per subject: what arrives
 * meanwhile waits for its answer and goes in the next call, together; what arrives while none is in
 * flight goes at the end of the event-loop turn. Under load one call then carries many requests'
 * settlements and admissions instead of one call each: a command cost the gateway more than the script
 * costs Redis.
 */
interface Lane {
  readonly key: string;
  readonly slot: number;
  settlements: Waiting<Settlement, void>[];
  admissions: { head: Head; waiting: Waiting<Admission, AdmitResult> }[];
  busy: boolean;
  scheduled: boolean;
}

const NO_HEAD: readonly string[] = ['', '', '', ''];

export function createRedisRateLimits(
  client: Redis,
  layout: Pick<KeyLayout, 'rateLimit'>,
  opts: {
    /** Tests only: the clock in ms instead of the server's. */
    clock?: () => number;
    /** Maps a failed call's error (the store's connection errors to its own kind). */
    failure?: (err: unknown) => unknown;
  } = {},
): RateLimitCounters {
  const { clock, failure } = opts;
  const now = () => (clock === undefined ? '' : String(clock()));
  const limitsKey = (type: string, id: string) => `${layout.rateLimit(type, id)}:limits`;
  const lanes = new Map<string, Lane>();
  // The head arrays per configured limits object: the same object comes back for every request.
  const heads = new WeakMap<RateLimits, Map<number, Head>>();

  function headOf(limits: RateLimits, leaseMs: number): Head {
    let byLease = heads.get(limits);
    if (byLease === undefined) {
      byLease = new Map();
      heads.set(limits, byLease);
    }
    let head = byLease.get(leaseMs);
    if (head === undefined) {
      const args = [
        String(leaseMs),
        opt(limits.requestsPerMinute),
        opt(limits.tokensPerMinute),
        opt(limits.maxConcurrent),
      ];
      head = { id: args.join(','), args };
      byLease.set(leaseMs, head);
    }
    return head;
  }

  function laneOf(type: string, id: string): Lane {
    const key = limitsKey(type, id);
    let lane = lanes.get(key);
    if (lane === undefined) {
      lane = { key, slot: keySlot(key), settlements: [], admissions: [], busy: false, scheduled: false };
      lanes.set(key, lane);
    }
    return lane;
  }

  function wake(lane: Lane): void {
    if (lane.busy || lane.scheduled) return;
    lane.scheduled = true;
    void endOfTurn().then(() => {
      lane.scheduled = false;
      send(lane);
    });
  }

  /** Sends what the lane holds (admissions of one head, the first's), or forgets an idle lane. */
  function send(lane: Lane): void {
    if (lane.busy) return;
    if (lane.settlements.length === 0 && lane.admissions.length === 0) {
      lanes.delete(lane.key);
      return;
    }
    const settlements = lane.settlements;
    lane.settlements = [];
    const head = lane.admissions[0]?.head;
    const admissions: Waiting<Admission, AdmitResult>[] = [];
    if (head !== undefined) {
      const rest: Lane['admissions'] = [];
      for (const a of lane.admissions) {
        if (a.head.id === head.id && admissions.length < MAX_PER_CALL) admissions.push(a.waiting);
        else rest.push(a);
      }
      lane.admissions = rest;
    }
    const args = [now(), ...(head?.args ?? NO_HEAD), String(settlements.length)];
    for (const { item: s } of settlements) {
      const c = s.counted;
      const flags = `${c.subjectTokens ? 1 : 0}${c.subjectSlot ? 1 : 0}${c.keyTokens ? 1 : 0}${c.keySlot ? 1 : 0}`;
      args.push(s.lease, String(s.second), String(s.tokenDelta), s.key ?? '', flags);
    }
    for (const { item: a } of admissions) {
      const k = a.key;
      args.push(
        a.lease,
        String(a.tokens),
        a.countRequest ? '1' : '0',
        a.holdSlot ? '1' : '0',
        k?.name ?? '',
        opt(k?.limits.requestsPerMinute),
        opt(k?.limits.tokensPerMinute),
        opt(k?.limits.maxConcurrent),
      );
    }
    lane.busy = true;
    TURN.send(client, lane.key, lane.slot, args).then(
      (reply) => {
        for (const s of settlements) s.resolve();
        const answers = admissions.length === 0 ? [] : String(reply).split(';');
        for (let i = 0; i < admissions.length; i++) admissions[i]!.resolve(admitResult(answers[i]!));
        lane.busy = false;
        send(lane);
      },
      (err: unknown) => {
        const e = failure === undefined ? err : failure(err);
        for (const s of settlements) s.reject(e);
        for (const a of admissions) a.reject(e);
        lane.busy = false;
        send(lane);
      },
    );
  }

  return {
    admit(a: Admission, leaseMs: number): Promise<AdmitResult> {
      const lane = laneOf(a.subject.type, a.subject.id);
      const { promise, resolve, reject } = Promise.withResolvers<AdmitResult>();
      lane.admissions.push({ head: headOf(a.subjectLimits, leaseMs), waiting: { item: a, resolve, reject } });
      wake(lane);
      return promise;
    },
    finish(s: Settlement): Promise<void> {
      const lane = laneOf(s.subject.type, s.subject.id);
      const { promise, resolve, reject } = Promise.withResolvers<void>();
      lane.settlements.push({ item: s, resolve, reject });
      wake(lane);
      return promise;
    },
    async renew(slots: readonly HeldSlot[], leaseMs: number): Promise<void> {
      const bySubject = new Map<string, { key: string; args: string[] }>();
      for (const slot of slots) {
        const key = limitsKey(slot.subject.type, slot.subject.id);
        let group = bySubject.get(key);
        if (group === undefined) {
          group = { key, args: [now(), String(leaseMs)] };
          bySubject.set(key, group);
        }
        if (slot.counted.subjectSlot) group.args.push(':s', slot.lease);
        if (slot.counted.keySlot && slot.key !== undefined) group.args.push(`:k:${slot.key}`, slot.lease);
      }
      try {
        await Promise.all([...bySubject.values()].map((g) => RENEW.run(client, [g.key], g.args)));
      } catch (err) {
        throw failure === undefined ? err : failure(err);
      }
    },
  };
}
