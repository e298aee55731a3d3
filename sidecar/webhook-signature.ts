// Billing webhook signatures (docs/billing.md "Webhooks"): `X-Billing-Webhook-Signature` holds
// `v1=` + lowercase hex HMAC-SHA256(secret, "<timestamp>.<raw body bytes>"), possibly several
// comma-separated values while the sender rotates its secret; `X-Billing-Webhook-Timestamp` is Unix
// seconds and must be within the tolerance either way. The HMAC is computed over the raw bytes as
// received, never over re-serialized JSON.

import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-billing-webhook-signature';
export const TIMESTAMP_HEADER = 'x-billing-webhook-timestamp';
export const WEBHOOK_ID_HEADER = 'x-billing-webhook-id';

export type SignatureFailure =
  | 'no_secret'
  | 'missing_signature'
  | 'missing_timestamp'
  | 'bad_timestamp'
  | 'bad_signature'
  /** A MAC of the body alone (a misreading of "over the raw request body"): refused, and named. */
  | 'body_only_signature'
  | 'stale_timestamp';

/** The scheme this gateway verifies, as log lines name it (never with the secret). */
export const SIGNATURE_SCHEME =
  'v1=<hex HMAC-SHA256(webhook_secret, "<X-Billing-Webhook-Timestamp>.<raw body>")>';

export type SignatureCheck = { ok: true; timestamp: number } | { ok: false; reason: SignatureFailure };

export interface SignatureInput {
  /** Accepted secrets (one, or the old and new one during a rotation); empty strings are ignored. */
  readonly secrets: readonly string[];
  readonly signature: string | undefined;
  readonly timestamp: string | undefined;
  readonly rawBody: Buffer;
  readonly toleranceS: number;
  /** Current time in ms. */
  readonly nowMs: number;
}

/** The header value for one body: `v1=<hex>`. */
export function signWebhookBody(
  secret: string,
  timestamp: number | string,
  rawBody: Buffer | string,
): string {
  return `v1=${digest(secret, String(timestamp), rawBody).toString('hex')}`;
}

function digest(secret: string, timestamp: string, rawBody: Buffer | string): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/**
 * Check a delivery: signature first (over the timestamp as sent), then the timestamp's age, so an
 * unsigned caller learns nothing about the clock. Every candidate is compared in constant time.
 */
export function verifyWebhookSignature(input: SignatureInput): SignatureCheck {
  const secrets = input.secrets.filter((s) => s !== '');
  if (secrets.length === 0) return { ok: false, reason: 'no_secret' };
  if (input.signature === undefined || input.signature.trim() === '')
    return { ok: false, reason: 'missing_signature' };
  if (input.timestamp === undefined || input.timestamp.trim() === '')
    return { ok: false, reason: 'missing_timestamp' };
  const tsText = input.timestamp.trim();
  if (!/^\d{1,12}$/.test(tsText)) return { ok: false, reason: 'bad_timestamp' };

  const candidates: Buffer[] = [];
  for (const part of input.signature.split(',')) {
    const item = part.trim();
    if (!item.startsWith('v1=')) continue;
    const hex = item.slice(3).toLowerCase();
    if (HEX_SHA256.test(hex)) candidates.push(Buffer.from(hex, 'hex'));
  }
  let matched = false;
  for (const secret of secrets) {
    const expected = digest(secret, tsText, input.rawBody);
    for (const candidate of candidates) {
      // No early exit: the time taken does not depend on which candidate matched.
      if (timingSafeEqual(candidate, expected)) matched = true;
    }
  }
  if (!matched) {
    // The timestamp must be signed, or its check means nothing: a body-only MAC is refused all the
    // same, only named, so the operator of the sender learns which scheme is wrong.
    const bodyOnly = secrets.some((secret) =>
      candidates.some((c) => timingSafeEqual(c, createHmac('sha256', secret).update(input.rawBody).digest())),
    );
    return { ok: false, reason: bodyOnly ? 'body_only_signature' : 'bad_signature' };
  }

  const timestamp = Number(tsText);
  if (Math.abs(input.nowMs / 1000 - timestamp) > input.toleranceS) {
    return { ok: false, reason: 'stale_timestamp' };
  }
  return { ok: true, timestamp };
}
