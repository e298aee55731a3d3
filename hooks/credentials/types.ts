// The credentials framework's one interface: what a provider's auth block turns into when its
// credentials come from a cloud (a signature, or a token minted by a token endpoint). The gateway applies
// it to the upstream request after every rewrite, so a signature covers the request as sent.

import type { RequestContext, UpstreamRequest } from '../../common/types.ts';

export interface UpstreamAuthorizer {
  /** For logs and `router -t`: `sigv4`, `bearer` (a Bedrock API key), `entra`, `google`. */
  readonly scheme: string;
  /** The pricing channel of the credential set (`ctx.channel`). */
  readonly channel: string;
  /**
   * Puts the credential on the final request (headers; SigV4 also fixes the body's bytes). Throws
   * GatewayError `upstream_auth_failed` or `upstream_unreachable` when no credential can be had.
   */
  authorize(ctx: RequestContext, req: UpstreamRequest): void | Promise<void>;
  /** The upstream refused the credential (401, 403): a token source may drop its token. */
  refused?(): void;
}

/** A token from a token endpoint, with the instant (epoch ms) it stops being accepted. */
export interface FetchedToken {
  readonly token: string;
  readonly expiresAt: number;
}

/** The token endpoint refused the grant (a 4xx): asking again soon will not help. */
export class TokenRefused extends Error {
  readonly status: number;
  /** The endpoint's error code (`invalid_client`, `invalid_grant`), never its description. */
  readonly reason: string | undefined;
  constructor(status: number, reason: string | undefined) {
    super(
      `the token endpoint refused the grant (HTTP ${status}${reason === undefined ? '' : `, ${reason}`})`,
    );
    this.name = 'TokenRefused';
    this.status = status;
    this.reason = reason;
  }
}

/** The token endpoint could not be reached or failed (5xx, 408, 429, a network error): retried. */
export class TokenUnavailable extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'TokenUnavailable';
  }
}

/** Fetches one token, giving up after `timeoutMs`. */
export type TokenFetch = (timeoutMs: number) => Promise<FetchedToken>;
