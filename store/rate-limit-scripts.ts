// The rate-limit counters' scripts (store/redis-rate-limits.ts runs them). All of a subject's counters
// share the hash tag `{rl:<type>:<id>}` (one slot in a cluster), so one script admits against the key's
// and the subject's limits at once. Windows are 60 one-second buckets in a hash (field: the second);
// concurrency slots are a sorted set scored by lease expiry; `:o` holds the instance shares not yet given
// back, scored by when they end. Time is the server's (TIME), so every instance counts on one clock.
// Layout: docs/operations.md "Keys in Redis".

import { defineScript } from './redis-client.ts';

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

/** Fields per settlement and per admission in a TURN call's arguments. */
export const SETTLEMENT_FIELDS = 6;
export const ADMISSION_FIELDS = 10;

/**
 * The largest share one grant makes, per dimension (a share is also at most 1/8 of what remains); an
 * instance asks for the `first` requests and slots and, as fast as it uses them, up to the cap.
 */
export const SHARE_CAP = { requests: 4096, slots: 1024 } as const;
export const SHARE_REQUESTS = { first: 256, cap: SHARE_CAP.requests } as const;
export const SHARE_SLOTS = { first: 64, cap: SHARE_CAP.slots } as const;
/** How long an instance admits from a share, from when it asked for it (the store's second after). */
export const SHARE_MS = 1000;

// One call per subject carries what its lane holds: settlements first, then admissions in order (each
// sees the ones before it, and the slots settled before them). ARGV: clock, lease ms, the subject's rpm,
// tpm and concurrency ('' = none; its own `:limits` hash overrides each), the number of settlements, then
// per settlement 6 fields: lease, second (-1: this one), token delta, request delta, key name, flags
// (subject tokens, subject slot, key tokens, key slot, subject requests, key requests, share ended); then
// per admission 10 fields: lease, tokens, count request (1/0), hold slot (1/0), key name ('' = none), key
// rpm, tpm, concurrency, the requests and the slots of a share it asks for (requests 0: no share).
// Returns one string, the admissions' answers joined by ';', each 14 values joined by ',': admitted,
// refused dimension, retry ms, second, the scopes' flags (subject tokens, subject slot, key tokens, key
// slot), then limit, remaining and reset ms for requests, tokens and concurrency (-1 when no limit); an
// admission granted a share has 4 more: its requests, tokens and slots (-1: that dimension has no limit)
// and the scopes its requests were counted in (subject, key). One bulk string, because the client's reply
// parser reads an array of numbers byte by byte in script and cost more than the rest of an admission.
//
// A share is counted in the second after the call's, and the instance admits from it for at most
// SHARE_MS from when it sent the call (before the script ran): every request admitted from it is counted
// in its own second or a later one, so a window never holds fewer than it admitted.
const TURN_LUA = `${CLOCK_LUA}
local function bump(k, field, by)
  redis.call('HINCRBY', k, field, by)
  if redis.call('TTL', k) < 0 then redis.call('EXPIRE', k, 62) end
end
local function settle(prefix, lease, second, delta, rdelta, tok, slot, req, ended)
  if slot == '1' then redis.call('ZREM', prefix .. ':c', lease) end
  if ended == '1' then redis.call('ZREM', prefix .. ':o', lease) end
  if second > sec - 60 then
    if tok == '1' and delta ~= 0 then bump(prefix .. ':t', second, delta) end
    if req == '1' and rdelta ~= 0 then bump(prefix .. ':r', second, rdelta) end
  end
end
local settled = tonumber(ARGV[6])
local first = 7 + settled * ${SETTLEMENT_FIELDS}
for at = 7, first - 1, ${SETTLEMENT_FIELDS} do
  local lease, second, delta, rdelta = ARGV[at], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local flags = ARGV[at + 5]
  if second < 0 then second = sec end
  local ended = string.sub(flags, 7, 7)
  settle(base .. ':s', lease, second, delta, rdelta, string.sub(flags, 1, 1), string.sub(flags, 2, 2),
    string.sub(flags, 5, 5), ended)
  if ARGV[at + 4] ~= '' then
    settle(base .. ':k:' .. ARGV[at + 4], lease, second, delta, rdelta, string.sub(flags, 3, 3),
      string.sub(flags, 4, 4), string.sub(flags, 6, 6), ended)
  end
end
local out = {}
if first > #ARGV then return '' end
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
-- A share another instance has not given back yet may hold what is missing: it ends within SHARE_MS.
local function shareWait(prefix, wait)
  local next = redis.call('ZRANGEBYSCORE', prefix .. ':o', ms, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #next > 0 then
    local w = tonumber(next[2]) - ms
    if w < wait then return w end
  end
  return wait
end
local function resetOf(buckets)
  if #buckets == 0 then return 0 end
  return (buckets[1][1] + 60) * 1000 - ms
end
for at = first, #ARGV, ${ADMISSION_FIELDS} do
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
      if n >= sc[2] then refuse('requests', shareWait(sc[1], waitFor(b, n - sc[2] + 1))) end
    end
    if sc[3] and (countReq or tokens > 0) then
      local n, b = window(sc[1] .. ':t')
      st.t = {n, b}
      if n >= sc[3] then refuse('tokens', shareWait(sc[1], waitFor(b, n - sc[3] + 1))) end
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
        redis.call('EXPIRE', sc[1] .. ':r', 62)
        n = n + 1
      end
      local reset = resetOf(st.r[2])
      if reset == 0 and admitted then reset = 60000 end
      tighter(1, sc[2], sc[2] - n, reset)
    end
    if st.t then
      local n = st.t[1]
      if admitted then
        if tokens > 0 then bump(sc[1] .. ':t', sec, tokens) end
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
  local answer = {admitted and 1 or 0, refused, retry, sec, table.concat(flags),
    dims[1][1], dims[1][2], dims[1][3], dims[2][1], dims[2][2], dims[2][3], dims[3][1], dims[3][2], dims[3][3]}
  -- A share for what the instance admits next on its own: only far from every limit that applies, at
  -- most an eighth of what remains, so that near a limit every admission is the store's again.
  local want = math.min(tonumber(ARGV[at + 8]) or 0, ${SHARE_CAP.requests})
  local wantSlots = math.min(tonumber(ARGV[at + 9]) or 0, ${SHARE_CAP.slots})
  if admitted and want > 0 then
    local gr, gt, gc, ok = -1, -1, -1, true
    if dims[1][1] ~= -1 then
      gr = math.min(want, math.floor(dims[1][2] / 8))
      if gr < 2 then ok = false end
    end
    if ok and dims[2][1] ~= -1 then
      local per = math.max(tokens, 1)
      gt = math.min(per * (gr > 0 and gr or want), math.floor(dims[2][2] / 8))
      if gt < per * 2 then ok = false end
    end
    if ok and dims[3][1] ~= -1 then
      gc = math.min(wantSlots, math.floor(dims[3][2] / 8))
      if gc < 1 then ok = false end
    end
    if ok and (gr > 0 or gt > 0 or gc > 0) then
      local counted = {'0', '0'}
      for i, sc in ipairs(scopes) do
        local st = state[i]
        if st.r and gr > 0 then
          bump(sc[1] .. ':r', sec + 1, gr)
          counted[i] = '1'
        end
        if st.t and gt > 0 then bump(sc[1] .. ':t', sec + 1, gt) end
        if st.c and gc > 0 then
          for j = 1, gc do redis.call('ZADD', sc[1] .. ':c', ms + leaseMs, lease .. '#' .. j) end
        end
        if (st.r and gr > 0) or (st.t and gt > 0) then
          redis.call('ZREMRANGEBYSCORE', sc[1] .. ':o', '-inf', ms)
          redis.call('ZADD', sc[1] .. ':o', ms + ${SHARE_MS}, lease)
          redis.call('PEXPIRE', sc[1] .. ':o', ${SHARE_MS * 2})
        end
      end
      answer[15], answer[16], answer[17], answer[18] = gr, gt, gc, table.concat(counted)
    end
  end
  out[#out + 1] = table.concat(answer, ',')
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

export const TURN = defineScript(TURN_LUA);
export const RENEW = defineScript(RENEW_LUA);
