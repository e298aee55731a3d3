// Rate-limit counters in one process: the same windows, slots and answers as store/redis-rate-limits.ts,
// for file mode. With `workers: n` the primary holds them and the workers ask it (proxy/workers), so
// the limits are exact across one host's workers; they are not shared between hosts.

import type {
  Admission,
  AdmitResult,
  DimensionState,
  HeldSlot,
  LimitDimension,
  RateLimitCounters,
  Settlement,
} from '../common/rate-limit-types.ts';

const WINDOW_S = 60;

/** One window: counts by second. */
class Window {
  readonly #buckets = new Map<number, number>();

  /** The sum over the last 60 seconds (older seconds dropped) and its seconds, oldest first. */
  read(sec: number): { sum: number; seconds: [number, number][] } {
    let sum = 0;
    const seconds: [number, number][] = [];
    for (const [s, v] of this.#buckets) {
      if (s > sec - WINDOW_S) {
        sum += v;
        seconds.push([s, v]);
      } else this.#buckets.delete(s);
    }
    seconds.sort((a, b) => a[0] - b[0]);
    return { sum, seconds };
  }

  add(sec: number, n: number): void {
    this.#buckets.set(sec, (this.#buckets.get(sec) ?? 0) + n);
  }

  get empty(): boolean {
    return this.#buckets.size === 0;
  }
}

interface Scope {
  readonly requests: Window;
  readonly tokens: Window;
  /** lease -> expiry ms */
  readonly slots: Map<string, number>;
}

function waitFor(seconds: [number, number][], need: number, ms: number): number {
  let freed = 0;
  for (const [s, v] of seconds) {
    freed += v;
    if (freed >= need) return (s + WINDOW_S) * 1000 - ms;
  }
  return WINDOW_S * 1000;
}

function resetOf(seconds: [number, number][], ms: number): number {
  const first = seconds[0];
  return first === undefined ? 0 : (first[0] + WINDOW_S) * 1000 - ms;
}

export class MemoryRateLimits implements RateLimitCounters {
  readonly #scopes = new Map<string, Scope>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #scope(name: string): Scope {
    let scope = this.#scopes.get(name);
    if (scope === undefined) {
      scope = { requests: new Window(), tokens: new Window(), slots: new Map() };
      this.#scopes.set(name, scope);
    }
    return scope;
  }

  #sweep(name: string, scope: Scope): void {
    if (scope.requests.empty && scope.tokens.empty && scope.slots.size === 0) this.#scopes.delete(name);
  }

  async admit(a: Admission, leaseMs: number): Promise<AdmitResult> {
    return this.admitNow(a, leaseMs);
  }

  admitNow(a: Admission, leaseMs: number): AdmitResult {
    const ms = this.#now();
    const sec = Math.floor(ms / 1000);
    const subjectBase = `${a.subject.type}:${a.subject.id}`;
    const scopes = [{ name: `s|${subjectBase}`, limits: a.subjectLimits }];
    if (a.key !== undefined) scopes.push({ name: `k|${subjectBase}|${a.key.name}`, limits: a.key.limits });
    let refusedBy: LimitDimension | undefined;
    let retry = 0;
    const refuse = (dim: LimitDimension, wait: number) => {
      const w = Math.max(1, wait);
      if (w > retry) {
        refusedBy = dim;
        retry = w;
      }
    };
    const reads = scopes.map(({ name, limits }) => {
      const scope = this.#scope(name);
      const r =
        limits.requestsPerMinute !== undefined && a.countRequest ? scope.requests.read(sec) : undefined;
      if (r !== undefined && r.sum >= limits.requestsPerMinute!)
        refuse('requests', waitFor(r.seconds, r.sum - limits.requestsPerMinute! + 1, ms));
      const t =
        limits.tokensPerMinute !== undefined && (a.countRequest || a.tokens > 0)
          ? scope.tokens.read(sec)
          : undefined;
      if (t !== undefined && t.sum >= limits.tokensPerMinute!)
        refuse('tokens', waitFor(t.seconds, t.sum - limits.tokensPerMinute! + 1, ms));
      let c: number | undefined;
      if (limits.maxConcurrent !== undefined && a.holdSlot) {
        for (const [lease, expiry] of scope.slots) if (expiry <= ms) scope.slots.delete(lease);
        c = scope.slots.size;
        if (c >= limits.maxConcurrent) refuse('concurrency', 1000);
      }
      return { scope, limits, r, t, c };
    });
    const admitted = refusedBy === undefined;
    const dims: Partial<Record<LimitDimension, DimensionState>> = {};
    const tighter = (d: LimitDimension, limit: number, remaining: number, resetMs: number) => {
      const state = { limit, remaining: Math.max(0, remaining), resetMs: Math.max(0, resetMs) };
      const known = dims[d];
      if (known === undefined || state.remaining < known.remaining) dims[d] = state;
    };
    const counted = { subjectTokens: false, subjectSlot: false, keyTokens: false, keySlot: false };
    reads.forEach(({ scope, limits, r, t, c }, i) => {
      if (r !== undefined) {
        let n = r.sum;
        if (admitted) {
          scope.requests.add(sec, 1);
          n += 1;
        }
        let reset = resetOf(r.seconds, ms);
        if (reset === 0 && admitted) reset = WINDOW_S * 1000;
        tighter('requests', limits.requestsPerMinute!, limits.requestsPerMinute! - n, reset);
      }
      if (t !== undefined) {
        let n = t.sum;
        if (admitted) {
          if (a.tokens > 0) scope.tokens.add(sec, a.tokens);
          n += a.tokens;
          if (i === 0) counted.subjectTokens = true;
          else counted.keyTokens = true;
        }
        let reset = resetOf(t.seconds, ms);
        if (reset === 0 && admitted && a.tokens > 0) reset = WINDOW_S * 1000;
        tighter('tokens', limits.tokensPerMinute!, limits.tokensPerMinute! - n, reset);
      }
      if (c !== undefined) {
        let n = c;
        if (admitted) {
          scope.slots.set(a.lease, ms + leaseMs);
          n += 1;
          if (i === 0) counted.subjectSlot = true;
          else counted.keySlot = true;
        }
        tighter('concurrency', limits.maxConcurrent!, limits.maxConcurrent! - n, 1000);
      }
    });
    for (const { name } of scopes) {
      const scope = this.#scopes.get(name);
      if (scope !== undefined) this.#sweep(name, scope);
    }
    return {
      admitted,
      ...(refusedBy === undefined ? {} : { refusedBy }),
      retryAfterMs: retry,
      second: sec,
      counted,
      ...dims,
    };
  }

  async finish(s: Settlement): Promise<void> {
    this.finishNow(s);
  }

  finishNow(s: Settlement): void {
    const sec = Math.floor(this.#now() / 1000);
    const second = s.second < 0 ? sec : s.second;
    const subjectBase = `${s.subject.type}:${s.subject.id}`;
    const settle = (name: string, tokens: boolean, slot: boolean) => {
      const scope = tokens && s.tokenDelta !== 0 ? this.#scope(name) : this.#scopes.get(name);
      if (scope === undefined) return;
      if (slot) scope.slots.delete(s.lease);
      if (tokens && s.tokenDelta !== 0 && second > sec - WINDOW_S) scope.tokens.add(second, s.tokenDelta);
      this.#sweep(name, scope);
    };
    settle(`s|${subjectBase}`, s.counted.subjectTokens, s.counted.subjectSlot);
    if (s.key !== undefined) settle(`k|${subjectBase}|${s.key}`, s.counted.keyTokens, s.counted.keySlot);
  }

  async renew(slots: readonly HeldSlot[], leaseMs: number): Promise<void> {
    this.renewNow(slots, leaseMs);
  }

  renewNow(slots: readonly HeldSlot[], leaseMs: number): void {
    const ms = this.#now();
    const extend = (name: string, lease: string) => {
      const slotsOf = this.#scopes.get(name)?.slots;
      const expiry = slotsOf?.get(lease);
      if (slotsOf !== undefined && expiry !== undefined && expiry > ms) slotsOf.set(lease, ms + leaseMs);
    };
    for (const slot of slots) {
      const subjectBase = `${slot.subject.type}:${slot.subject.id}`;
      if (slot.counted.subjectSlot) extend(`s|${subjectBase}`, slot.lease);
      if (slot.counted.keySlot && slot.key !== undefined) extend(`k|${subjectBase}|${slot.key}`, slot.lease);
    }
  }
}
