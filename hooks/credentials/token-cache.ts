// One provider's access token (or temporary credential set): cached, refreshed before it expires while requests keep using it, one
// refresh in flight at a time. A refused grant (4xx) answers upstream_auth_failed at once and is not
// asked again for REFUSED_HOLD_MS; an endpoint that is down is retried with backoff within the
// connect timeout, then upstream_unreachable. Each provider has its own cache, so neither blocks another.

import type { Logger } from 'pino';
import { jitteredDelay } from '../../common/backoff.ts';
import { errorText, GatewayError } from '../../common/errors.ts';
import {
  CredentialUnusable,
  type FetchedToken,
  type TokenFetch,
  TokenRefused,
  TokenUnavailable,
} from './types.ts';

export const REFUSED_HOLD_MS = 30_000;
/** A token is renewed this long before it expires (at most half its lifetime). */
const REFRESH_MARGIN_MS = 5 * 60_000;
/**
 * A token is not sent this close to its expiry (at most a quarter of its lifetime): a request takes time
 * to reach the provider, whose clock may run ahead, and it would be refused on arrival.
 */
const EXPIRY_SKEW_MS = 30_000;
const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 2_000;

export interface TokenCacheOptions<T = string> {
  readonly provider: string;
  /** `entra`, `google`, `aws-web-identity`, ...: for the log. */
  readonly scheme: string;
  /** What the operator checks when the grant is refused (logged, never sent to a client). */
  readonly check: string;
  /** What the operator checks when the endpoint does not answer (its address, a hop limit). */
  readonly reach?: string;
  readonly fetch: TokenFetch<T>;
  /** How long one token request may take, retries included (limits.upstream_connect_timeout_ms). */
  readonly deadlineMs: number;
  readonly now?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

interface Held<T> {
  readonly token: T;
  readonly expiresAt: number;
  /** The last moment the token is sent; past it callers wait for a fresh one. */
  readonly usableUntil: number;
  readonly refreshAt: number;
  readonly fetchedAt: number;
}

export class TokenCache<T = string> {
  readonly #o: TokenCacheOptions<T>;
  readonly #now: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  #held: Held<T> | undefined;
  #inFlight: Promise<Held<T>> | undefined;
  #refusedUntil = 0;
  #unusable = false;
  /** How many token requests were sent (tests, and the log). */
  requests = 0;

  constructor(opts: TokenCacheOptions<T>) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
    this.#sleep = opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** A token that is valid now; fetched (once for all waiting callers) when none is. */
  token(log: Logger): T | Promise<T> {
    const now = this.#now();
    const held = this.#held;
    if (held !== undefined && now < held.usableUntil) {
      // Past its refresh point the token is still good: renew in the background, keep serving it.
      if (now >= held.refreshAt && this.#inFlight === undefined && now >= this.#refusedUntil) {
        this.#refresh(log).catch(() => undefined);
      }
      return held.token;
    }
    if (this.#inFlight !== undefined) return this.#inFlight.then((h) => h.token);
    if (now < this.#refusedUntil) return Promise.reject(this.#refused());
    return this.#refresh(log).then((h) => h.token);
  }

  /**
   * The upstream refused the token (revoked, or its roles changed): the next request fetches another.
   * A token fetched within REFUSED_HOLD_MS is kept: a new one would be refused the same way, and dropping
   * it would send a grant per request to the token endpoint.
   */
  refused(): void {
    const held = this.#held;
    if (held !== undefined && this.#now() - held.fetchedAt >= REFUSED_HOLD_MS) this.#held = undefined;
  }

  #refresh(log: Logger): Promise<Held<T>> {
    const p = this.#fetchWithRetry(log).finally(() => {
      if (this.#inFlight === p) this.#inFlight = undefined;
    });
    this.#inFlight = p;
    return p;
  }

  async #fetchWithRetry(log: Logger): Promise<Held<T>> {
    const { provider, scheme, deadlineMs } = this.#o;
    const start = this.#now();
    let lastError: unknown;
    for (let attempt = 1; ; attempt++) {
      const left = start + deadlineMs - this.#now();
      if (left <= 0) break;
      let fetched: FetchedToken<T>;
      try {
        this.requests++;
        fetched = await this.#o.fetch(left);
        if (fetched.expiresAt <= this.#now()) {
          throw new CredentialUnusable(
            `the credentials given are already expired (${new Date(fetched.expiresAt).toISOString()}): check this host's clock`,
          );
        }
      } catch (err) {
        if (err instanceof TokenRefused) {
          this.#refusedUntil = this.#now() + REFUSED_HOLD_MS;
          this.#unusable = false;
          log.error(
            { provider, scheme, status: err.status, reason: err.reason, holdMs: REFUSED_HOLD_MS },
            `the token endpoint refused provider '${provider}''s credentials: ${this.#o.check}`,
          );
          throw this.#refused();
        }
        if (err instanceof CredentialUnusable) {
          this.#refusedUntil = this.#now() + REFUSED_HOLD_MS;
          this.#unusable = true;
          log.error(
            { provider, scheme, holdMs: REFUSED_HOLD_MS },
            `provider '${provider}''s credentials cannot be used: ${err.detail}; ${this.#o.check}`,
          );
          throw this.#refused();
        }
        lastError = err;
        const delay = jitteredDelay(attempt, BACKOFF_BASE_MS, BACKOFF_CAP_MS);
        if (this.#now() + delay >= start + deadlineMs) break;
        await this.#sleep(delay);
        continue;
      }
      const now = this.#now();
      const lifetime = Math.max(0, fetched.expiresAt - now);
      const held: Held<T> = {
        token: fetched.token,
        expiresAt: fetched.expiresAt,
        usableUntil: fetched.expiresAt - Math.min(EXPIRY_SKEW_MS, lifetime / 4),
        refreshAt: fetched.expiresAt - Math.min(REFRESH_MARGIN_MS, lifetime / 2),
        fetchedAt: now,
      };
      this.#held = held;
      this.#refusedUntil = 0;
      return held;
    }
    log.warn(
      { provider, scheme, err: errorText(lastError), deadlineMs },
      `the token endpoint of provider '${provider}' is unreachable${this.#o.reach === undefined ? '' : `: ${this.#o.reach}`}`,
    );
    throw new GatewayError(
      'upstream_unreachable',
      `The provider '${provider}' is unreachable: its token endpoint or credential service did not answer`,
    );
  }

  #refused(): GatewayError {
    return new GatewayError(
      'upstream_auth_failed',
      this.#unusable
        ? `The gateway's credentials for the provider '${this.#o.provider}' cannot be used; the operator must check them`
        : `The provider '${this.#o.provider}' refused the gateway's credentials (its token endpoint refused the grant); the operator must check them`,
    );
  }
}

/**
 * `run`'s result, or TokenUnavailable after `ms`: for a library fetch whose own timeouts cover one
 * request, not its whole exchange (it may retry inside, or ask several endpoints in turn).
 */
export async function withinDeadline<T>(run: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      run,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new TokenUnavailable(`no answer within ${Math.round(ms)} ms`)),
          Math.max(1, ms),
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
