// Short-lived client secrets for realtime sessions (docs/realtime.md "Client secrets"): a browser must
// not hold a long-lived access key, so a server holding one asks the gateway for a secret bound to the
// key's subject (and optionally a model) that only opens realtime sessions and expires within minutes.
// Stateless: `ek_router_<payload>.<HMAC>`, signed with material every instance of the deployment shares
// (the store's hash secret, or the configured keys), so any instance or worker accepts it.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../../common/errors.ts';
import type { Hook, OnRequestResult, Principal, RequestContext } from '../../common/types.ts';
import { CONTINUE, REALTIME_APIS } from '../../common/types.ts';
import { presentedSecret } from './auth.ts';

export const CLIENT_SECRET_PREFIX = 'ek_router_';

interface Payload {
  readonly v: 1;
  readonly k: string | null;
  readonly st: string;
  readonly sid: string;
  readonly m: boolean;
  /** Expiry, ms since the epoch. */
  readonly exp: number;
  readonly model?: string;
}

export interface ClientSecrets {
  /** A secret for this principal, valid for `ttlS` seconds, bound to `model` when given. */
  mint(principal: Principal, ttlS: number, model: string | undefined): { value: string; expiresAt: number };
  /** The principal a secret was minted for; throws invalid_api_key when forged, expired or for another model. */
  verify(secret: string, model: string | undefined): Principal;
}

export function createClientSecrets(material: string, now: () => number = Date.now): ClientSecrets {
  const key = createHmac('sha256', 'router realtime client secrets').update(material).digest();
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url');
  return {
    mint(principal, ttlS, model) {
      const exp = now() + ttlS * 1000;
      const payload: Payload = {
        v: 1,
        k: principal.keyName ?? null,
        st: principal.subjectType,
        sid: principal.subjectId,
        m: principal.isMaster,
        exp,
        ...(model === undefined ? {} : { model }),
      };
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return { value: `${CLIENT_SECRET_PREFIX}${body}.${sign(body)}`, expiresAt: exp };
    },
    verify(secret, model) {
      const rest = secret.slice(CLIENT_SECRET_PREFIX.length);
      const dot = rest.indexOf('.');
      const body = dot === -1 ? '' : rest.slice(0, dot);
      const given = Buffer.from(dot === -1 ? '' : rest.slice(dot + 1));
      const expected = Buffer.from(sign(body));
      if (given.length !== expected.length || !timingSafeEqual(given, expected))
        throw new GatewayError('invalid_api_key', 'Invalid client secret');
      const p = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Payload;
      if (p.exp <= now())
        throw new GatewayError('invalid_api_key', 'The client secret has expired; ask for a new one');
      if (p.model !== undefined && p.model !== model)
        throw new GatewayError(
          'invalid_api_key',
          `The client secret was issued for the model '${p.model}'; open the session with ?model=${p.model}`,
        );
      return { keyName: p.k ?? undefined, isMaster: p.m, subjectType: p.st, subjectId: p.sid };
    },
  };
}

/**
 * The auth hook with client secrets: a presented `ek_router_` secret opens a realtime session as its
 * principal (and nothing else); any other secret goes to `auth`.
 */
export function withClientSecrets(auth: Hook, secrets: ClientSecrets): Hook {
  const next = auth.authenticate!.bind(auth);
  return {
    name: auth.name,
    authenticate(ctx: RequestContext): OnRequestResult | Promise<OnRequestResult> {
      const secret = presentedSecret(ctx.headers, ctx.query);
      if (secret === undefined || !secret.startsWith(CLIENT_SECRET_PREFIX)) return next(ctx);
      if (!REALTIME_APIS.has(ctx.api))
        throw new GatewayError('invalid_api_key', 'A client secret opens realtime sessions only');
      ctx.principal = secrets.verify(secret, ctx.model);
      return CONTINUE;
    },
  };
}
