// Signed webhook delivery, as the billing service does it (docs/billing.md "Webhooks"):
// X-Billing-Webhook-Timestamp, X-Billing-Webhook-Signature `v1=<hex hmac>` over "<ts>.<raw body>", and
// X-Billing-Webhook-ID. Failed deliveries are retried a few times after a short delay.

import { createHmac } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Agent, request } from 'undici';
import type { SendWebhookOptions, Subject, WebhookDelivery } from './types.ts';

/** The signature header value for one body: `v1=` + lowercase hex HMAC-SHA256(secret, "<ts>.<body>"). */
export function signWebhook(secret: string, timestamp: number, rawBody: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex')}`;
}

const DELIVERY_TIMEOUT_MS = 5_000;

export interface WebhookSenderOptions {
  url: string | undefined;
  secret: string | undefined;
  attempts: number;
  retryDelayMs: number;
  now: () => number;
  /** Called whenever a delivery settles (for waiters). */
  onSettled: (delivery: WebhookDelivery) => void;
}

export class WebhookSender {
  readonly deliveries: WebhookDelivery[] = [];
  readonly #options: WebhookSenderOptions;
  // Our own agent so that close() can drop keep-alive sockets and let the process exit.
  readonly #agent = new Agent({ keepAliveTimeout: 1_000 });
  #abort = new AbortController();
  #counter = 0;

  constructor(options: WebhookSenderOptions) {
    this.#options = options;
  }

  /** Builds, signs, records and sends one webhook. Resolves when the delivery has settled. */
  send(type: string, subject: Subject, opts: SendWebhookOptions = {}): Promise<WebhookDelivery> {
    this.#counter += 1;
    const id = opts.id ?? `evt_${this.#counter}`;
    const timestamp = opts.timestamp ?? Math.floor(this.#options.now() / 1000);
    const body =
      opts.rawBody ??
      JSON.stringify({
        id,
        type,
        created_at: timestamp,
        data: {
          subject: { subject_type: subject.subject_type, subject_id: subject.subject_id },
          ...opts.data,
        },
      });
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-billing-webhook-id': id,
    };
    if (!opts.omitTimestamp) headers['x-billing-webhook-timestamp'] = String(timestamp);
    const secret = opts.secret ?? this.#options.secret;
    if (!opts.omitSignature) {
      const signature =
        opts.signature ?? (secret === undefined ? undefined : signWebhook(secret, timestamp, body));
      if (signature !== undefined) headers['x-billing-webhook-signature'] = signature;
    }
    const delivery: WebhookDelivery = {
      id,
      type,
      subject: { subject_type: subject.subject_type, subject_id: subject.subject_id },
      body,
      headers,
      url: opts.url ?? this.#options.url,
      attempts: [],
      status: undefined,
      delivered: false,
      settled: false,
    };
    this.deliveries.push(delivery);
    return this.#deliver(delivery, opts.attempts ?? this.#options.attempts);
  }

  /** Sends the exact bytes and headers of an earlier delivery again, as a new recorded delivery. */
  replay(previous: WebhookDelivery): Promise<WebhookDelivery> {
    const delivery: WebhookDelivery = {
      ...previous,
      headers: { ...previous.headers },
      attempts: [],
      status: undefined,
      delivered: false,
      settled: false,
    };
    this.deliveries.push(delivery);
    return this.#deliver(delivery, 1);
  }

  /** Forgets recorded deliveries and cancels the ones in flight. */
  reset(): void {
    this.#abort.abort();
    this.#abort = new AbortController();
    this.deliveries.length = 0;
    this.#counter = 0;
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#agent.destroy();
  }

  async #deliver(delivery: WebhookDelivery, attempts: number): Promise<WebhookDelivery> {
    const signal = this.#abort.signal;
    const url = delivery.url;
    for (let attempt = 1; url !== undefined && attempt <= attempts && !signal.aborted; attempt += 1) {
      if (attempt > 1) {
        try {
          await delay(this.#options.retryDelayMs * (attempt - 1), undefined, { signal });
        } catch {
          break;
        }
      }
      try {
        const response = await request(url, {
          method: 'POST',
          headers: delivery.headers,
          body: delivery.body,
          dispatcher: this.#agent,
          signal: AbortSignal.any([signal, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
        });
        await response.body.dump();
        delivery.attempts.push({ status: response.statusCode });
        delivery.status = response.statusCode;
        if (response.statusCode >= 200 && response.statusCode < 300) {
          delivery.delivered = true;
          break;
        }
      } catch (error) {
        delivery.attempts.push({
          status: undefined,
          error: error instanceof Error ? error.message : String(error),
        });
        delivery.status = undefined;
      }
    }
    delivery.settled = true;
    this.#options.onSettled(delivery);
    return delivery;
  }
}
