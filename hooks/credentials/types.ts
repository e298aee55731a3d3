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

/**
 * A token from a token endpoint (or temporary credentials from a credential service: `T` is then the
 * credential set), with the instant (epoch ms) it stops being accepted.
 */
export interface FetchedToken<T = string> {
  readonly token: T;
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

/**
 * The credential cannot be used before the operator acts, though no endpoint refused it: a token file
 * that cannot be read, a credential service that hands out credentials already expired. Held like a
 * refusal. `detail` names what to look at and never quotes a secret.
 */
export class CredentialUnusable extends Error {
  readonly detail: string;
  constructor(detail: string) {
    super(detail);
    this.name = 'CredentialUnusable';
    this.detail = detail;
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
export type TokenFetch<T = string> = (timeoutMs: number) => Promise<FetchedToken<T>>;
