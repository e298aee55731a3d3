// The rate-limit options of `router-admin` (access-key create and update, subject set-limits): checked
// before anything is opened, each refusal a usage error naming the flag; and how a key's or a subject's
// limits are shown.

import { Option, UsageError } from 'clipanion';
import type { RateLimits } from '../common/rate-limit-types.ts';
import type { AccessKeyChange } from '../common/store-types.ts';

/** What keys.schema.json accepts as a `models` item: an id, or a pattern with `*` and `?` only. */
const MODEL_PATTERN = /^[^\s,!\\[\]{}]+$/;

/** The flag of each limit, as `--help` lists it. */
const FLAGS = {
  requestsPerMinute: '--requests-per-minute',
  tokensPerMinute: '--tokens-per-minute',
  maxConcurrent: '--max-concurrent',
} as const satisfies Record<keyof RateLimits, string>;

/** Short names of the limits in tables and messages. */
const SHORT = {
  requestsPerMinute: 'rpm',
  tokensPerMinute: 'tpm',
  maxConcurrent: 'concurrent',
} as const satisfies Record<keyof RateLimits, string>;

const DESCRIPTIONS = {
  requestsPerMinute: 'Model requests WHO may make in any 60 seconds (a positive integer)',
  tokensPerMinute: 'Tokens (input plus output, as metered) WHO may use in any 60 seconds',
  maxConcurrent: 'Requests of WHO in flight at once (a stream holds its slot until it ends)',
} as const satisfies Record<keyof RateLimits, string>;

/** One limit option, declared on each command that takes it (`--requests-per-minute` ...). */
export function limitOption(field: keyof RateLimits, scope: 'key' | 'subject') {
  const who = scope === 'key' ? 'the key' : "the subject's keys together";
  return Option.String(FLAGS[field], { description: DESCRIPTIONS[field].replace('WHO', who) });
}

export type LimitFlagValues = { readonly [K in keyof RateLimits]: string | undefined };

/** The limits given as flags (only those given); a value that is not a positive integer is a usage error. */
export function limitsFromFlags(values: LimitFlagValues): RateLimits {
  const out: { -readonly [K in keyof RateLimits]: number } = {};
  for (const field of Object.keys(FLAGS) as (keyof RateLimits)[]) {
    const text = values[field];
    if (text === undefined) continue;
    if (!/^[0-9]+$/.test(text.trim()) || !Number.isSafeInteger(Number(text)) || Number(text) < 1)
      throw new UsageError(`${FLAGS[field]} must be a positive integer, not ${JSON.stringify(text)}`);
    out[field] = Number(text);
  }
  return out;
}

/** `--models a,b`: comma-separated ids or glob patterns (`*`, `?`); an empty list is a usage error. */
export function modelsFromFlag(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  const models = text
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
  if (models.length === 0)
    throw new UsageError(
      '--models is empty, which would allow no model: give ids or patterns such as --models "gpt-*,claude-*"',
    );
  for (const model of models)
    if (!MODEL_PATTERN.test(model))
      throw new UsageError(
        `--models: ${JSON.stringify(model)} is not a model id or a pattern using only * and ? ` +
          '(no spaces, !, \\, [ ], { })',
      );
  return [...new Set(models)];
}

/** `rpm=600,tpm=200000,concurrent=8`; `-` when none is set (the configured defaults apply). */
export function formatLimits(limits: RateLimits | undefined): string {
  const parts: string[] = [];
  for (const field of Object.keys(SHORT) as (keyof RateLimits)[]) {
    const value = limits?.[field];
    if (value !== undefined) parts.push(`${SHORT[field]}=${value}`);
  }
  return parts.length === 0 ? '-' : parts.join(',');
}

export function formatModels(models: readonly string[] | undefined): string {
  return models === undefined ? '-' : models.join(',');
}

/** What `access-key update` asks for, before it is applied to the key as it stands. */
export interface KeyUpdate {
  /** Limits to set; the key's others stay unless clearLimits. */
  readonly limits: RateLimits;
  /** Drop the key's own limits first (with no limit given: the defaults apply again). */
  readonly clearLimits: boolean;
  /** The new model list, replacing the key's. */
  readonly models: readonly string[] | undefined;
  readonly clearModels: boolean;
}

function isEmpty(limits: RateLimits): boolean {
  return Object.values(limits).every((v) => v === undefined);
}

/** Limits `set` on top of `current` (or of nothing, with `clear`); null when none is left. */
export function mergeLimits(
  current: RateLimits | undefined,
  set: RateLimits,
  clear: boolean,
): RateLimits | null {
  const merged: RateLimits = { ...(clear ? {} : current), ...set };
  const out = Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined)) as RateLimits;
  return isEmpty(out) ? null : out;
}

/** The store's change for `update` on a key whose own limits and models are `current`. */
export function applyKeyUpdate(
  current: { readonly limits?: RateLimits | undefined; readonly models?: readonly string[] | undefined },
  update: KeyUpdate,
): AccessKeyChange {
  const touchesLimits = update.clearLimits || !isEmpty(update.limits);
  return {
    ...(touchesLimits ? { limits: mergeLimits(current.limits, update.limits, update.clearLimits) } : {}),
    ...(update.models !== undefined ? { models: update.models } : update.clearModels ? { models: null } : {}),
  };
}
