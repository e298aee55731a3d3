// Rate-limit counters in Redis (scripts and layout in store/rate-limit-scripts.ts). Each subject has one
// lane to its counters; far from its limits an instance also admits on its own from a share it took in
// advance (docs/operations.md "Rate limits per key and subject").

import type {
  Admission,
  AdmitResult,
  DimensionState,
  HeldSlot,
  LimitDimension,
  RateLimitCounters,
  RateLimits,
  ScopeUse,
  Settlement,
} from '../common/rate-limit-types.ts';
import { endOfTurn } from '../common/turn-batch.ts';
import { RENEW, SHARE_MS, TURN } from './rate-limit-scripts.ts';
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

/** The script head of an admission: lease ms and the subject's limits from configuration. */
interface Head {
  readonly id: string;
  readonly args: readonly string[];
}

/** A settlement as the script takes it (a request's, or a share given back). */
interface Wire {
  readonly lease: string;
  readonly second: number;
  readonly tokenDelta: number;
  readonly requestDelta: number;
  readonly key: string | undefined;
  /** Subject tokens, subject slot, key tokens, key slot, subject requests, key requests, share ended. */
  readonly flags: string;
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
interface Lane {
  readonly key: string;
  readonly type: string;
  readonly id: string;
  readonly slot: number;
  /** Each key's share (by key name; '' for the subject's requests without a limited key). */
  readonly shares: Map<string, Share>;
  settlements: Waiting<Wire, void>[];
  admissions: Queued[];
  busy: boolean;
  scheduled: boolean;
}

/**
 * What the store counted for this instance in advance, far from every limit: requests, tokens and slots
 * it admits on its own for SHARE_MS, then gives back what it did not use. -1: no limit in that dimension.
 */
interface Share {
  readonly id: string;
  readonly lane: Lane;
  readonly key: string | undefined;
  /** What it was granted for: an admission of another head, limits or kind does not take from it. */
  readonly head: Head;
  readonly keyLimits: RateLimits | undefined;
  readonly countRequest: boolean;
  readonly holdSlot: boolean;
  /** The store's second its requests and tokens are counted in. */
  readonly second: number;
  readonly sentAt: number;
  readonly expiresAt: number;
  /** Requests left (when requests_per_minute applies). */
  requests: number;
  readonly requestDim: boolean;
  /** Tokens left (when tokens_per_minute applies); below 0 when completions used more than counted. */
  tokens: number;
  readonly tokenDim: boolean;
  /** Slot members not in use (a request holds one as its lease). */
  readonly free: string[];
  /** Leases of the requests admitted from it that will settle (`borrowed` while it lasts). */
  readonly lent: string[];
  readonly slots: boolean;
  readonly counted: ScopeUse;
  /** Scopes its requests were counted in: subject, key. */
  readonly requestScopes: string;
  /** The dimensions' state with the share counted as used, and their limits. */
  readonly base: Pick<AdmitResult, 'requests' | 'tokens' | 'concurrency'>;
  ended: boolean;
  timer: NodeJS.Timeout | undefined;
}

const NO_HEAD: readonly string[] = ['', '', '', ''];
const NOOP = () => undefined;

function bit(b: boolean): string {
  return b ? '1' : '0';
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
  // The head arrays per configured limits object: the same object comes back for every request.
  const heads = new WeakMap<RateLimits, Map<number, Head>>();
  /** Requests admitted from a share, by their lease: their completion goes back to it while it lasts. */
  const borrowed = new Map<string, Share>();

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

  function sameLimits(a: RateLimits | undefined, b: RateLimits | undefined): boolean {
    if (a === b) return true;
    if (a === undefined || b === undefined) return false;
    return (
      a.requestsPerMinute === b.requestsPerMinute &&
      a.tokensPerMinute === b.tokensPerMinute &&
      a.maxConcurrent === b.maxConcurrent
    );
  }

  /** Whether the share was granted for admissions like this one. */
  function fits(share: Share, a: Admission, head: Head): boolean {
    return (
      (share.head === head || share.head.id === head.id) &&
      share.countRequest === a.countRequest &&
      share.holdSlot === a.holdSlot &&
      sameLimits(share.keyLimits, a.key?.limits)
    );
  }

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

  function settleLater(lane: Lane, w: Wire): void {
    lane.settlements.push({ item: w, resolve: NOOP, reject: NOOP });
    wake(lane);
  }

  /** Gives back what a share did not use; requests still holding its slots release them themselves. */
  function end(share: Share): void {
    if (share.ended) return;
    share.ended = true;
    if (share.timer !== undefined) clearTimeout(share.timer);
    const lane = share.lane;
    const name = share.key ?? '';
    if (lane.shares.get(name) === share) lane.shares.delete(name);
    // Their completions settle in the store from now on, as any request's.
    for (const lease of share.lent) if (borrowed.get(lease) === share) borrowed.delete(lease);
    const c = share.counted;
    const t = share.tokenDim;
    settleLater(lane, {
      lease: share.id,
      second: share.second,
      tokenDelta: t ? -share.tokens : 0,
      requestDelta: share.requestDim ? -share.requests : 0,
      key: share.key,
      flags: `${bit(t && c.subjectTokens)}0${bit(t && c.keyTokens)}0${share.requestScopes}1`,
    });
    for (const member of share.free)
      settleLater(lane, {
        lease: member,
        second: -1,
        tokenDelta: 0,
        requestDelta: 0,
        key: share.key,
        flags: `0${bit(c.subjectSlot)}0${bit(c.keySlot)}000`,
      });
    share.free.length = 0;
  }

  function live(share: Share | undefined): share is Share {
    if (share === undefined || share.ended) return false;
    if (localNow() < share.expiresAt) return true;
    end(share);
    return false;
  }

  /** An admission from the share, or undefined when it cannot cover it (then the share is given back). */
  function fromShare(share: Share, a: Admission): AdmitResult | undefined {
    const needsSlot = share.slots && a.holdSlot;
    if (
      (share.requestDim && a.countRequest && share.requests < 1) ||
      (share.tokenDim && share.tokens < a.tokens) ||
      (needsSlot && share.free.length === 0)
    ) {
      end(share);
      return undefined;
    }
    if (share.requestDim && a.countRequest) share.requests--;
    if (share.tokenDim) share.tokens -= a.tokens;
    const lease = needsSlot ? share.free.pop()! : a.lease;
    const c = share.counted;
    // The hook settles a request that counted tokens or took a slot; one that did neither never comes back.
    if (c.keySlot || c.subjectSlot || c.keyTokens || c.subjectTokens) {
      borrowed.set(lease, share);
      share.lent.push(lease);
    }
    const elapsed = localNow() - share.sentAt;
    const result: Mutable<AdmitResult> = {
      admitted: true,
      retryAfterMs: 0,
      second: share.second,
      counted: share.counted,
    };
    const { requests, tokens, concurrency } = share.base;
    if (requests !== undefined)
      result.requests = {
        limit: requests.limit,
        remaining: requests.remaining + share.requests,
        resetMs: Math.max(0, requests.resetMs - elapsed),
      };
    if (tokens !== undefined)
      result.tokens = {
        limit: tokens.limit,
        remaining: Math.max(0, tokens.remaining + share.tokens),
        resetMs: Math.max(0, tokens.resetMs - elapsed),
      };
    if (concurrency !== undefined)
      result.concurrency = { ...concurrency, remaining: concurrency.remaining + share.free.length };
    if (lease !== a.lease) result.lease = lease;
    // Used up: what is left of it goes back now, and the store no longer counts it as out.
    if (share.requestDim && share.requests === 0) end(share);
    return result;
  }

  function grant(lane: Lane, q: Queued, result: AdmitResult, fields: string[], sentAt: number): void {
    const [requests, tokens, slots] = [Number(fields[14]), Number(fields[15]), Number(fields[16])];
    const a = q.waiting.item;
    const less = (d: DimensionState | undefined, by: number) =>
      d === undefined ? undefined : { ...d, remaining: Math.max(0, d.remaining - Math.max(0, by)) };
    const share: Share = {
      id: a.lease,
      lane,
      key: a.key?.name,
      head: q.head,
      keyLimits: a.key?.limits,
      countRequest: a.countRequest,
      holdSlot: a.holdSlot,
      second: result.second + 1,
      sentAt,
      expiresAt: sentAt + SHARE_MS,
      requests: Math.max(0, requests),
      requestDim: requests > 0,
      tokens: Math.max(0, tokens),
      tokenDim: tokens > 0,
      free: [],
      lent: [],
      slots: slots > 0,
      counted: result.counted,
      requestScopes: fields[17]!,
      base: {
        requests: less(result.requests, requests),
        tokens: less(result.tokens, tokens),
        concurrency: less(result.concurrency, slots),
      },
      ended: false,
      timer: undefined,
    };
    for (let j = slots; j >= 1; j--) share.free.push(`${a.lease}#${j}`);
    const name = share.key ?? '';
    const old = lane.shares.get(name);
    if (old !== undefined) end(old);
    lane.shares.set(name, share);
    share.timer = setTimeout(() => end(share), Math.max(0, share.expiresAt - localNow()));
    share.timer.unref();
  }

  /** Admits from live shares what the lane holds; what they cannot cover stays for the store. */
  function drain(lane: Lane): void {
    if (lane.admissions.length === 0 || lane.shares.size === 0) return;
    const rest: Queued[] = [];
    for (const q of lane.admissions) {
      const a = q.waiting.item;
      const share = lane.shares.get(a.key?.name ?? '');
      let r: AdmitResult | undefined;
      if (share !== undefined && live(share)) {
        if (fits(share, a, q.head)) r = fromShare(share, a);
        else end(share);
      }
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
    const args = [now(), ...(head?.args ?? NO_HEAD), String(settlements.length)];
    for (const { item: s } of settlements)
      args.push(
        s.lease,
        String(s.second),
        String(s.tokenDelta),
        String(s.requestDelta),
        s.key ?? '',
        s.flags,
      );
    // The last admission of each share key asks for a share: the ones before it are the store's anyway.
    const wants = new Set<string>();
    const asks: boolean[] = new Array(admissions.length);
    for (let i = admissions.length - 1; i >= 0; i--) {
      const name = admissions[i]!.waiting.item.key?.name ?? '';
      asks[i] = !wants.has(name) && !live(lane.shares.get(name));
      wants.add(name);
    }
    for (let i = 0; i < admissions.length; i++) {
      const a = admissions[i]!.waiting.item;
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
        asks[i] ? '1' : '0',
      );
    }
    lane.busy = true;
    const sentAt = localNow();
    TURN.send(client, lane.key, lane.slot, args).then(
      (reply) => {
        for (const s of settlements) s.resolve();
        const answers = admissions.length === 0 ? [] : String(reply).split(';');
        for (let i = 0; i < admissions.length; i++) {
          const fields = answers[i]!.split(',');
          const result = admitResult(fields);
          if (fields.length > 14) grant(lane, admissions[i]!, result, fields, sentAt);
          admissions[i]!.waiting.resolve(result);
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
      const share = lane.shares.get(a.key?.name ?? '');
      if (share !== undefined && lane.admissions.length === 0 && live(share)) {
        // Limits changed (router-admin, configuration): what the old ones lent goes back first.
        if (!fits(share, a, head)) end(share);
        else {
          const r = fromShare(share, a);
          if (r !== undefined) return r;
        }
      }
      const { promise, resolve, reject } = Promise.withResolvers<AdmitResult>();
      lane.admissions.push({ head, waiting: { item: a, resolve, reject } });
      wake(lane);
      return promise;
    },
    finish(s: Settlement): Promise<void> {
      // A realtime response (second -1) settles its tokens alone; its session keeps what it borrowed.
      const share = s.second === -1 ? undefined : borrowed.get(s.lease);
      if (share !== undefined) {
        borrowed.delete(s.lease);
        if (!share.ended) {
          if (s.lease.startsWith(`${share.id}#`)) share.free.push(s.lease);
          // Tokens counted and not used go back to the share; more than counted is the store's at once,
          // so that no instance admits against a window short of it.
          if (!share.tokenDim || s.tokenDelta <= 0) {
            if (share.tokenDim) share.tokens -= s.tokenDelta;
            return Promise.resolve();
          }
          return settle(s, false);
        }
      }
      return settle(s, true);
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
      const held = { requests: 0, tokens: 0, slots: 0, lent: borrowed.size };
      for (const byId of lanes.values())
        for (const lane of byId.values())
          for (const s of lane.shares.values()) {
            if (s.ended) continue;
            held.requests += s.requests;
            held.tokens += Math.max(0, s.tokens);
            held.slots += s.free.length;
          }
      return held;
    },
  };
}
