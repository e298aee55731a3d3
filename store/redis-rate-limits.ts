// Rate-limit counters in Redis (scripts and layout in store/rate-limit-scripts.ts). Each subject has one
// lane to its counters; far from its limits an instance also admits on its own from a share it took in
// advance (store/rate-limit-shares.ts; docs/operations.md "Instance shares").

import { performance } from 'node:perf_hooks';
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
import { RENEW, TURN } from './rate-limit-scripts.ts';
import { type Head, InstanceShares, type ShareHome, type ShareSize, type Wire } from './rate-limit-shares.ts';
import { type KeyLayout, keySlot, type Redis } from './redis-client.ts';

const DIMENSIONS: readonly LimitDimension[] = ['requests', 'tokens', 'concurrency'];

function opt(n: number | undefined): string {
  return n === undefined ? '' : String(n);
}

function dimension(fields: string[], at: number): DimensionState | undefined {
  const limit = Number(fields[at]);
  if (limit < 0) return undefined;
  return { limit, remaining: Number(fields[at + 1]), resetMs: Math.max(0, Number(fields[at + 2])) };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function admitResult(fields: string[]): Mutable<AdmitResult> {
  const refused = fields[1]!;
  const flags = fields[4]!;
  const result: Mutable<AdmitResult> = {
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

interface Queued {
  readonly head: Head;
  readonly waiting: Waiting<Admission, AdmitResult>;
}

/**
 * One subject's traffic to its counters. At most one call is in flight per subject: what arrives
 * meanwhile waits for its answer and goes in the next call, together; what arrives while none is in
 * flight goes at the end of the event-loop turn. Under load one call then carries many requests'
 * settlements and admissions instead of one call each: a command cost the gateway more than the script
 * costs Redis.
 */
interface Lane extends ShareHome {
  readonly key: string;
  readonly type: string;
  readonly id: string;
  readonly slot: number;
  settlements: Waiting<Wire, void>[];
  admissions: Queued[];
  busy: boolean;
  scheduled: boolean;
}

const NO_HEAD: readonly string[] = ['', '', '', ''];
const NOOP = () => undefined;

function bit(b: boolean): string {
  return b ? '1' : '0';
}

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

/** A call's arguments; the last admission of each key asks for the share `wanted(name)` (none: undefined). */
function callArgs(
  clock: string,
  head: Head | undefined,
  settlements: readonly Waiting<Wire, void>[],
  admissions: readonly Queued[],
  wanted: (name: string) => ShareSize | undefined,
): string[] {
  const args = [clock, ...(head?.args ?? NO_HEAD), String(settlements.length)];
  for (const { item: s } of settlements)
    args.push(s.lease, String(s.second), String(s.tokenDelta), String(s.requestDelta), s.key ?? '', s.flags);
  // The ones before the last are the store's anyway.
  const wants = new Set<string>();
  const asks: (ShareSize | undefined)[] = new Array(admissions.length);
  for (let i = admissions.length - 1; i >= 0; i--) {
    const name = admissions[i]!.waiting.item.key?.name ?? '';
    asks[i] = wants.has(name) ? undefined : wanted(name);
    wants.add(name);
  }
  for (let i = 0; i < admissions.length; i++) {
    const a = admissions[i]!.waiting.item;
    const k = a.key;
    args.push(
      a.lease,
      String(a.tokens),
      bit(a.countRequest),
      bit(a.holdSlot),
      k?.name ?? '',
      opt(k?.limits.requestsPerMinute),
      opt(k?.limits.tokensPerMinute),
      opt(k?.limits.maxConcurrent),
      String(asks[i]?.requests ?? 0),
      String(asks[i]?.slots ?? 0),
    );
  }
  return args;
}

export function createRedisRateLimits(
  client: Redis,
  layout: Pick<KeyLayout, 'rateLimit'>,
  opts: {
    /** Tests only: the clock in ms instead of the server's (and of the shares' local time). */
    clock?: () => number;
    /** Maps a failed call's error (the store's connection errors to its own kind). */
    failure?: (err: unknown) => unknown;
  } = {},
): RateLimitCounters & {
  /** What this instance's live shares hold unused, and how many of its requests will settle into them. */
  sharesHeld(): { requests: number; tokens: number; slots: number; lent: number };
} {
  const { clock, failure } = opts;
  const now = () => (clock === undefined ? '' : String(clock()));
  const localNow = clock ?? (() => performance.now());
  const limitsKey = (type: string, id: string) => `${layout.rateLimit(type, id)}:limits`;
  // By subject type, then id: found without building the key's name for every request.
  const lanes = new Map<string, Map<string, Lane>>();
  const shares = new InstanceShares(localNow, (home, w) => {
    const lane = home as Lane;
    lane.settlements.push({ item: w, resolve: NOOP, reject: NOOP });
    wake(lane);
  });

  function laneOf(type: string, id: string): Lane {
    let byId = lanes.get(type);
    if (byId === undefined) {
      byId = new Map();
      lanes.set(type, byId);
    }
    let lane = byId.get(id);
    if (lane === undefined) {
      const key = limitsKey(type, id);
      lane = {
        key,
        type,
        id,
        slot: keySlot(key),
        shares: new Map(),
        sizes: new Map(),
        settlements: [],
        admissions: [],
        busy: false,
        scheduled: false,
      };
      byId.set(id, lane);
    }
    return lane;
  }

  function forget(lane: Lane): void {
    const byId = lanes.get(lane.type);
    if (byId?.get(lane.id) !== lane) return;
    byId.delete(lane.id);
    if (byId.size === 0) lanes.delete(lane.type);
  }

  function wake(lane: Lane): void {
    if (lane.busy || lane.scheduled) return;
    lane.scheduled = true;
    void endOfTurn().then(() => {
      lane.scheduled = false;
      send(lane);
    });
  }

  /** Admits from live shares what the lane holds; what they cannot cover stays for the store. */
  function drain(lane: Lane): void {
    if (lane.admissions.length === 0 || lane.shares.size === 0) return;
    const rest: Queued[] = [];
    for (const q of lane.admissions) {
      const r = shares.admit(lane, q.waiting.item, q.head);
      if (r === undefined) rest.push(q);
      else q.waiting.resolve(r);
    }
    lane.admissions = rest;
  }

  /** Sends what the lane holds (admissions of one head, the first's), or forgets an idle lane. */
  function send(lane: Lane): void {
    if (lane.busy) return;
    drain(lane);
    if (lane.settlements.length === 0 && lane.admissions.length === 0) {
      if (lane.shares.size === 0) forget(lane);
      return;
    }
    const settlements = lane.settlements;
    lane.settlements = [];
    const head = lane.admissions[0]?.head;
    const admissions: Queued[] = [];
    if (head !== undefined) {
      const rest: Queued[] = [];
      for (const a of lane.admissions) {
        if (a.head.id === head.id && admissions.length < MAX_PER_CALL) admissions.push(a);
        else rest.push(a);
      }
      lane.admissions = rest;
    }
    const args = callArgs(now(), head, settlements, admissions, (name) => shares.wanted(lane, name));
    lane.busy = true;
    const sentAt = localNow();
    TURN.send(client, lane.key, lane.slot, args).then(
      (reply) => {
        for (const s of settlements) s.resolve();
        const answers = admissions.length === 0 ? [] : String(reply).split(';');
        for (let i = 0; i < admissions.length; i++) {
          const q = admissions[i]!;
          const fields = answers[i]!.split(',');
          const result = admitResult(fields);
          if (fields.length > 14) shares.grant(lane, q.head, q.waiting.item, result, fields, sentAt);
          q.waiting.resolve(result);
        }
        lane.busy = false;
        send(lane);
      },
      (err: unknown) => {
        const e = failure === undefined ? err : failure(err);
        for (const s of settlements) s.reject(e);
        for (const a of admissions) a.waiting.reject(e);
        lane.busy = false;
        send(lane);
      },
    );
  }

  /** A request's settlement through the lane; `slot`: its slot is released there too. */
  function settle(s: Settlement, slot: boolean): Promise<void> {
    const lane = laneOf(s.subject.type, s.subject.id);
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    const c = s.counted;
    const flags = `${bit(c.subjectTokens)}${bit(slot && c.subjectSlot)}${bit(c.keyTokens)}${bit(slot && c.keySlot)}000`;
    const w: Wire = {
      lease: s.lease,
      second: s.second,
      tokenDelta: s.tokenDelta,
      requestDelta: 0,
      key: s.key,
      flags,
    };
    lane.settlements.push({ item: w, resolve, reject });
    wake(lane);
    return promise;
  }

  return {
    admit(a: Admission, leaseMs: number): AdmitResult | Promise<AdmitResult> {
      const lane = laneOf(a.subject.type, a.subject.id);
      const head = headOf(a.subjectLimits, leaseMs);
      if (lane.admissions.length === 0 && lane.shares.size > 0) {
        const r = shares.admit(lane, a, head);
        if (r !== undefined) return r;
      }
      const { promise, resolve, reject } = Promise.withResolvers<AdmitResult>();
      lane.admissions.push({ head, waiting: { item: a, resolve, reject } });
      wake(lane);
      return promise;
    },
    finish(s: Settlement): Promise<void> | undefined {
      const local = shares.settle(s);
      if (local === 'done') return undefined;
      return settle(s, local === 'store');
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
    sharesHeld() {
      const homes: Lane[] = [];
      for (const byId of lanes.values()) for (const lane of byId.values()) homes.push(lane);
      return shares.held(homes);
    },
  };
}
