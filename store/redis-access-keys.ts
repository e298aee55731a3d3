// Access-key records in Redis: the hash fields as stored and the scripts that change a record and its
// index together (docs/operations.md "Keys in Redis"). Only the HMAC of a secret is ever written.

import { RATE_LIMIT_FIELDS, type RateLimits } from '../common/rate-limit-types.ts';
import type { StoredAccessKey } from '../common/store-types.ts';
import { defineScript } from './redis-client.ts';

// KEYS: record, index. ARGV: secret hash, name, then field/value pairs of the record.
const CREATE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'hash_taken' end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 'created'
`;

// KEYS: record. The index entry stays, so a revoked key is refused rather than looked up elsewhere.
const REVOKE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'status', 'revoked')
redis.call('HINCRBY', KEYS[1], 'version', 1)
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: record, index. ARGV: new hash, name, hash secret id ('' = unknown).
const ROTATE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 'hash_taken' end
local old = redis.call('HGET', KEYS[1], 'secret_hash')
if old then redis.call('HDEL', KEYS[2], old) end
redis.call('HSET', KEYS[1], 'secret_hash', ARGV[1])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'hash_secret_id', ARGV[3])
else
  redis.call('HDEL', KEYS[1], 'hash_secret_id')
end
redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: record. ARGV: field/value pairs; an empty value deletes the field. Any write to the record
// reaches every instance's view cache through client tracking, as a revoke does.
const UPDATE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
for i = 1, #ARGV, 2 do
  if ARGV[i + 1] == '' then redis.call('HDEL', KEYS[1], ARGV[i]) else redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('HINCRBY', KEYS[1], 'version', 1)
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: index. ARGV: prefix, from hash, to hash, hash secret id. The record must still carry the hash
// it is indexed under, so a rotate or a move by another instance in between wins; a revoked key stays
// where it is. Returns {moved 0/1, record (flat HGETALL)} or false.
const REHASH_LUA = `
local idx, p, from, to = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local name = redis.call('HGET', idx, from)
if name then
  local rk = p .. 'access_key:' .. name
  if redis.call('HGET', rk, 'secret_hash') ~= from then return false end
  if redis.call('HGET', rk, 'status') ~= 'active' then return {0, redis.call('HGETALL', rk)} end
  local owner = redis.call('HGET', idx, to)
  if owner and owner ~= name then return false end
  redis.call('HDEL', idx, from)
  redis.call('HSET', idx, to, name)
  redis.call('HSET', rk, 'secret_hash', to, 'hash_secret_id', ARGV[4])
  return {1, redis.call('HGETALL', rk)}
end
name = redis.call('HGET', idx, to)
if not name then return false end
local rk = p .. 'access_key:' .. name
if redis.call('HGET', rk, 'secret_hash') ~= to then return false end
return {0, redis.call('HGETALL', rk)}
`;

export const CREATE = defineScript(CREATE_LUA);
export const REVOKE = defineScript(REVOKE_LUA);
export const ROTATE = defineScript(ROTATE_LUA);
export const UPDATE = defineScript(UPDATE_LUA);
export const REHASH = defineScript(REHASH_LUA);

/** The record fields as stored (docs/operations.md "Keys in Redis"). */
export function accessKeyFields(key: StoredAccessKey): string[] {
  const fields = [
    'name',
    key.name,
    'secret_hash',
    key.secretHash,
    'status',
    key.status,
    'subject_type',
    key.subjectType,
    'subject_id',
    key.subjectId,
    'created_at',
    String(key.createdAt),
    'expires_at',
    key.expiresAt === undefined ? '' : String(key.expiresAt),
    'version',
    String(key.version),
  ];
  if (key.hashSecretId !== undefined) fields.push('hash_secret_id', key.hashSecretId);
  const limits = encodeLimits(key.limits);
  if (limits !== '') fields.push('limits', limits);
  if (key.models !== undefined) fields.push('models', JSON.stringify(key.models));
  return fields;
}

/** The `limits` field: a JSON object of the set limits, snake_case; '' when none is set. */
export function encodeLimits(limits: RateLimits | undefined): string {
  if (limits === undefined) return '';
  const out: Record<string, number> = {};
  for (const [field, wire] of Object.entries(RATE_LIMIT_FIELDS)) {
    const value = limits[field as keyof RateLimits];
    if (value !== undefined) out[wire] = value;
  }
  return Object.keys(out).length === 0 ? '' : JSON.stringify(out);
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

/**
 * Limits from their snake_case form (a `limits` field's JSON, a subject's `:limits` hash). Anything
 * malformed is undefined, as if unset: a hand-edited record must not fail the requests that read it.
 */
export function limitsFrom(raw: unknown): RateLimits | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return undefined;
  const record = raw as Record<string, unknown>;
  const out: { -readonly [K in keyof RateLimits]: number } = {};
  for (const [field, wire] of Object.entries(RATE_LIMIT_FIELDS)) {
    const value = record[wire];
    if (value === undefined) continue;
    if (!isPositiveInteger(value)) return undefined;
    out[field as keyof RateLimits] = value;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

function parseJsonField(text: string | undefined): unknown {
  if (text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function modelsFrom(raw: unknown): readonly string[] | undefined {
  if (!Array.isArray(raw) || !raw.every((m) => typeof m === 'string' && m !== '')) return undefined;
  return raw as string[];
}

export function parseAccessKey(flat: unknown): StoredAccessKey | undefined {
  if (!Array.isArray(flat) || flat.length === 0) return undefined;
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) f.set(String(flat[i]), String(flat[i + 1]));
  const name = f.get('name');
  const secretHash = f.get('secret_hash');
  if (name === undefined || secretHash === undefined) return undefined;
  const expires = f.get('expires_at');
  const hashSecretId = f.get('hash_secret_id');
  const limits = limitsFrom(parseJsonField(f.get('limits')));
  const models = modelsFrom(parseJsonField(f.get('models')));
  return {
    name,
    secretHash,
    status: f.get('status') === 'active' ? 'active' : 'revoked',
    subjectType: f.get('subject_type') ?? '',
    subjectId: f.get('subject_id') ?? name,
    createdAt: Number(f.get('created_at') ?? 0),
    expiresAt: expires === undefined || expires === '' ? undefined : Number(expires),
    version: Number(f.get('version') ?? 1),
    ...(hashSecretId === undefined || hashSecretId === '' ? {} : { hashSecretId }),
    ...(limits === undefined ? {} : { limits }),
    ...(models === undefined ? {} : { models }),
  };
}
