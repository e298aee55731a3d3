// One POST of a form to an OAuth2 token endpoint and the reading of its answer, shared by the schemes
// whose library does not do it (Entra's client-credentials grant).

import { type FetchedToken, TokenRefused, TokenUnavailable } from './types.ts';

/** Statuses that say "later", not "never": retried like a 5xx. */
const TRANSIENT_4XX = new Set([408, 425, 429]);

export function isRefusal(status: number): boolean {
  return status >= 400 && status < 500 && !TRANSIENT_4XX.has(status);
}

export async function postTokenForm(
  url: string,
  form: Record<string, string>,
  timeoutMs: number,
  now: () => number = Date.now,
): Promise<FetchedToken> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
      signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
      redirect: 'error',
    });
  } catch (err) {
    throw new TokenUnavailable(`token endpoint ${new URL(url).host} could not be reached`, err);
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const fields = body !== null && typeof body === 'object' ? (body as Record<string, unknown>) : {};
  if (isRefusal(res.status)) {
    const reason = typeof fields.error === 'string' ? fields.error.slice(0, 64) : undefined;
    throw new TokenRefused(res.status, reason);
  }
  if (res.status !== 200) throw new TokenUnavailable(`token endpoint answered HTTP ${res.status}`);
  const token = fields.access_token;
  const expiresIn = Number(fields.expires_in);
  if (typeof token !== 'string' || token === '' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new TokenUnavailable('token endpoint answered without access_token and expires_in');
  }
  return { token, expiresAt: now() + expiresIn * 1000 };
}
