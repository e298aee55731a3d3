// Instance shares (docs/operations.md "Instance shares"): far from every limit that applies, the store's
// admission also counts requests, tokens and slots for this instance in advance, which it then admits
// from on its own for SHARE_MS and gives back what it did not use. store/redis-rate-limits.ts asks for
// them and sends what they give back; this keeps them.

import type {
  Admission,
  AdmitResult,
  DimensionState,
  RateLimits,
  ScopeUse,
  Settlement,
} from '../common/rate-limit-types.ts';
import { SHARE_MS, SHARE_REQUESTS, SHARE_SLOTS } from './rate-limit-scripts.ts';

/** The script head of an admission: lease ms and the subject's limits from configuration. */
export interface Head {
  readonly id: string;
  readonly args: readonly string[];
}

/** A settlement as the script takes it (a request's, or a share given back). */
export interface Wire {
  readonly lease: string;
  readonly second: number;
  readonly tokenDelta: number;
  readonly requestDelta: number;
  readonly key: string | undefined;
  /** Subject tokens, subject slot, key tokens, key slot, subject requests, key requests, share ended. */
  readonly flags: string;
}

/** A subject's lane: where its shares live and what they give back goes. */
export interface ShareHome {
  /** Each key's share (by key name; '' for the subject's requests without a limited key). */
  readonly shares: Map<string, Share>;
  /** What each key's next share asks for, when not the first size. */
  readonly sizes: Map<string, ShareSize>;
}

/** The requests and slots an instance asks for in a share. */
export interface ShareSize {
  readonly requests: number;
  readonly slots: number;
}

const FIRST_SIZE: ShareSize = { requests: SHARE_REQUESTS.first, slots: SHARE_SLOTS.first };

/** -1 in a grant: no limit in that dimension. */
export interface Share {
  readonly id: string;
  /** Its slot members' prefix: `<id>#`. */
  readonly members: string;
  readonly home: ShareHome;
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
  /** Requests left (when requests_per_minute applies), of `granted`. */
  requests: number;
  readonly granted: number;
  readonly requestDim: boolean;
  /** Tokens left (when tokens_per_minute applies). */
  tokens: number;
  readonly tokenDim: boolean;
  /** Slot members not in use (a request holds one as its lease), of `grantedSlots`. */
  readonly free: string[];
  readonly grantedSlots: number;
  /** The most slot members in use at once. */
  peakSlots: number;
  /** Requests admitted from it that will settle and have not yet. */
  lent: number;
  readonly slots: boolean;
  readonly counted: ScopeUse;
  /** Scopes its requests were counted in: subject, key. */
  readonly requestScopes: string;
  /** The dimensions' state with the share counted as used, and their limits. */
  readonly base: Pick<AdmitResult, 'requests' | 'tokens' | 'concurrency'>;
  ended: boolean;
  timer: NodeJS.Timeout | undefined;
}

function bit(b: boolean): string {
  return b ? '1' : '0';
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

function less(d: DimensionState | undefined, by: number): DimensionState | undefined {
  return d === undefined ? undefined : { ...d, remaining: Math.max(0, d.remaining - Math.max(0, by)) };
}

/** What a settlement leaves to the store: nothing, its tokens only (its slot went back), or all of it. */
export type LocalSettlement = 'done' | 'tokens' | 'store';

export class InstanceShares {
  readonly #now: () => number;
  readonly #giveBack: (home: ShareHome, w: Wire) => void;

  /** `giveBack` queues a settlement for the store (the lane's next call). */
  constructor(now: () => number, giveBack: (home: ShareHome, w: Wire) => void) {
    this.#now = now;
    this.#giveBack = giveBack;
  }

  /** Whether the share was granted for admissions like this one. */
  fits(share: Share, a: Admission, head: Head): boolean {
    return (
      (share.head === head || share.head.id === head.id) &&
      share.countRequest === a.countRequest &&
      share.holdSlot === a.holdSlot &&
      sameLimits(share.keyLimits, a.key?.limits)
    );
  }

  /** Whether it can still be used; one past its time is given back. */
  live(share: Share | undefined): share is Share {
    if (share === undefined || share.ended) return false;
    if (this.#now() < share.expiresAt) return true;
    this.end(share);
    return false;
  }

  /** What to ask for in a key's next share; undefined while its share lasts. */
  wanted(home: ShareHome, name: string): ShareSize | undefined {
    return this.live(home.shares.get(name)) ? undefined : (home.sizes.get(name) ?? FIRST_SIZE);
  }

  /**
   * Gives back what a share did not use; requests still holding its slots release them themselves. A
   * share whose requests ran out within a quarter of its time asks twice as many next time, one whose
   * slots were all in use at once twice as many slots (up to the caps); one that lasted its whole time
   * with more than half of its requests (or of its slots at their busiest) unused asks half as many. At
   * any rate of traffic and concurrency a share then lasts a good part of its second, and the store sees
   * a few calls a second, not one per first-sized share.
   */
  end(share: Share): void {
    if (share.ended) return;
    share.ended = true;
    if (share.timer !== undefined) clearTimeout(share.timer);
    const home = share.home;
    const name = share.key ?? '';
    if (home.shares.get(name) === share) home.shares.delete(name);
    this.#resize(share, name);
    const c = share.counted;
    const t = share.tokenDim;
    this.#giveBack(home, {
      lease: share.id,
      second: share.second,
      tokenDelta: t ? -share.tokens : 0,
      requestDelta: share.requestDim ? -share.requests : 0,
      key: share.key,
      flags: `${bit(t && c.subjectTokens)}0${bit(t && c.keyTokens)}0${share.requestScopes}1`,
    });
    for (const member of share.free)
      this.#giveBack(home, {
        lease: member,
        second: -1,
        tokenDelta: 0,
        requestDelta: 0,
        key: share.key,
        flags: `0${bit(c.subjectSlot)}0${bit(c.keySlot)}000`,
      });
    share.free.length = 0;
  }

  #resize(share: Share, name: string): void {
    const size = share.home.sizes.get(name) ?? FIRST_SIZE;
    const elapsed = this.#now() - share.sentAt;
    const expired = elapsed >= SHARE_MS;
    let { requests, slots } = size;
    if (share.requestDim) {
      if (share.requests === 0 && elapsed < SHARE_MS / 4)
        requests = Math.min(SHARE_REQUESTS.cap, requests * 2);
      else if (expired && share.requests * 2 > share.granted)
        requests = Math.max(SHARE_REQUESTS.first, requests >> 1);
    }
    if (share.slots) {
      if (share.free.length === 0 && !expired) slots = Math.min(SHARE_SLOTS.cap, slots * 2);
      else if (expired && share.peakSlots * 2 < share.grantedSlots)
        slots = Math.max(SHARE_SLOTS.first, slots >> 1);
    }
    if (requests !== size.requests || slots !== size.slots) share.home.sizes.set(name, { requests, slots });
  }

  /** The admission from the home's share when one fits and can cover it (else that share is given back). */
  admit(home: ShareHome, a: Admission, head: Head): AdmitResult | undefined {
    const share = home.shares.get(a.key?.name ?? '');
    if (share === undefined || share.ended) return undefined;
    const now = this.#now();
    // Past its time, or limits changed (router-admin, configuration): what it lent goes back first.
    if (now >= share.expiresAt || !this.fits(share, a, head)) {
      this.end(share);
      return undefined;
    }
    return this.#take(share, a, now);
  }

  #take(share: Share, a: Admission, now: number): AdmitResult | undefined {
    const needsSlot = share.slots && a.holdSlot;
    if (
      (share.requestDim && a.countRequest && share.requests < 1) ||
      (share.tokenDim && share.tokens < a.tokens) ||
      (needsSlot && share.free.length === 0)
    ) {
      this.end(share);
      return undefined;
    }
    if (share.requestDim && a.countRequest) share.requests--;
    if (share.tokenDim) share.tokens -= a.tokens;
    const lease = needsSlot ? share.free.pop()! : a.lease;
    if (needsSlot && share.grantedSlots - share.free.length > share.peakSlots)
      share.peakSlots = share.grantedSlots - share.free.length;
    const c = share.counted;
    // The hook settles a request that counted tokens or took a slot; one that did neither never comes back.
    const settles = c.keySlot || c.subjectSlot || c.keyTokens || c.subjectTokens;
    if (settles) share.lent++;
    const elapsed = now - share.sentAt;
    const { requests, tokens, concurrency } = share.base;
    // One literal with every field: properties added later would each cost the object a new shape.
    const result: AdmitResult = {
      admitted: true,
      retryAfterMs: 0,
      second: share.second,
      counted: c,
      requests:
        requests === undefined
          ? undefined
          : {
              limit: requests.limit,
              remaining: requests.remaining + share.requests,
              resetMs: Math.max(0, requests.resetMs - elapsed),
            },
      tokens:
        tokens === undefined
          ? undefined
          : {
              limit: tokens.limit,
              remaining: Math.max(0, tokens.remaining + share.tokens),
              resetMs: Math.max(0, tokens.resetMs - elapsed),
            },
      concurrency:
        concurrency === undefined
          ? undefined
          : {
              limit: concurrency.limit,
              remaining: concurrency.remaining + share.free.length,
              resetMs: concurrency.resetMs,
            },
      lease: lease === a.lease ? undefined : lease,
      share: settles ? share : undefined,
    };
    // Used up: what is left of it goes back now, and the store no longer counts it as out.
    if (share.requestDim && share.requests === 0) this.end(share);
    return result;
  }

  /**
   * A share from the store's answer to an admission (its fields 15 to 18: requests, tokens, slots and the
   * scopes its requests were counted in); `sentAt` is when the call went out, before the store ran it.
   */
  grant(
    home: ShareHome,
    head: Head,
    a: Admission,
    result: AdmitResult,
    fields: string[],
    sentAt: number,
  ): void {
    const requests = Number(fields[14]);
    const tokens = Number(fields[15]);
    const slots = Number(fields[16]);
    const share: Share = {
      id: a.lease,
      members: `${a.lease}#`,
      home,
      key: a.key?.name,
      head,
      keyLimits: a.key?.limits,
      countRequest: a.countRequest,
      holdSlot: a.holdSlot,
      second: result.second + 1,
      sentAt,
      expiresAt: sentAt + SHARE_MS,
      requests: Math.max(0, requests),
      granted: Math.max(0, requests),
      requestDim: requests > 0,
      tokens: Math.max(0, tokens),
      tokenDim: tokens > 0,
      free: [],
      grantedSlots: Math.max(0, slots),
      peakSlots: 0,
      lent: 0,
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
    for (let j = slots; j >= 1; j--) share.free.push(`${share.members}${j}`);
    const name = share.key ?? '';
    const old = home.shares.get(name);
    if (old !== undefined) this.end(old);
    home.shares.set(name, share);
    share.timer = setTimeout(() => this.end(share), Math.max(0, share.expiresAt - this.#now()));
    share.timer.unref();
  }

  /**
   * A completion of a request admitted from a share that still lasts goes back to it: its slot, and the
   * tokens it was counted and did not use. Tokens beyond its count are the store's at once, so that no
   * instance admits against a window short of them.
   */
  settle(s: Settlement): LocalSettlement {
    // A realtime response (second -1) settles its tokens alone; its session keeps what it borrowed.
    const share = s.second === -1 ? undefined : (s.share as Share | undefined);
    // Once a share has ended, its requests' completions settle in the store, as any request's.
    if (share === undefined || share.ended) return 'store';
    share.lent--;
    if (s.lease.startsWith(share.members)) share.free.push(s.lease);
    if (share.tokenDim && s.tokenDelta > 0) return 'tokens';
    if (share.tokenDim) share.tokens -= s.tokenDelta;
    return 'done';
  }

  /** What the homes' live shares hold unused, and how many requests will settle into them. */
  held(homes: Iterable<ShareHome>): { requests: number; tokens: number; slots: number; lent: number } {
    const held = { requests: 0, tokens: 0, slots: 0, lent: 0 };
    for (const home of homes)
      for (const s of home.shares.values()) {
        if (s.ended) continue;
        held.lent += s.lent;
        held.requests += s.requests;
        held.tokens += Math.max(0, s.tokens);
        held.slots += s.free.length;
      }
    return held;
  }
}
