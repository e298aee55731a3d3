// The billing webhook listener (docs/billing.md "Webhooks"), served by the
// sidecar at billing.balance_enforcement.webhook_path (the gateway forwards the same path to it). Order:
// verify the signature, reject a stale timestamp, deduplicate the event id
// (claimed before the state change, released again if the change fails so the sender's retry is
// processed), update the subject state, invalidate the balance cache, tell the gateway (file mode's
// stale window), and only then answer 204. A duplicate answers 204 and changes nothing.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { BalanceEnforcementConfig, RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import {
  createStateNotifier,
  loopbackUrl,
  readCapped,
  replyTooLarge,
  type StateNotifier,
} from '../common/internal-notify.ts';
import { isObject } from '../common/json-guards.ts';
import type { StateStore, SubjectRef, SubjectState } from '../common/store-types.ts';
import { openStateStore } from '../store/index.ts';
import { countWebhook } from './sidecar-metrics.ts';
import {
  SIGNATURE_HEADER,
  SIGNATURE_SCHEME,
  TIMESTAMP_HEADER,
  verifyWebhookSignature,
  WEBHOOK_ID_HEADER,
} from './webhook-signature.ts';

/** Webhook ids are remembered this long: far beyond the sender's retry horizon and the timestamp tolerance. */
export const WEBHOOK_DEDUPE_TTL_MS = 7 * 24 * 3600 * 1000;

export const BLOCKING_EVENTS: ReadonlySet<string> = new Set([
  'wallet.insufficient_balance',
  'usage_limit.exhausted',
]);
export const UNBLOCKING_EVENTS: ReadonlySet<string> = new Set(['wallet.balance_changed']);
export const RECORDED_EVENTS: ReadonlySet<string> = new Set(['wallet.available_balance.threshold_crossed']);

export interface WebhookEvent {
  readonly id: string;
  readonly type: string;
  readonly subject: SubjectRef | undefined;
  /** `data.balance` when the sender included it (informational). */
  readonly balance: string | undefined;
}

export type ParsedWebhook = { ok: true; event: WebhookEvent } | { ok: false; message: string };

function record(v: unknown): Record<string, unknown> | undefined {
  return isObject(v) ? v : undefined;
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Id, type and subject as docs/billing.md "Webhooks" lists them; `headerId` is X-Billing-Webhook-ID. */
export function parseWebhookEvent(raw: Buffer, headerId: string | undefined): ParsedWebhook {
  let body: Record<string, unknown> | undefined;
  try {
    body = record(JSON.parse(raw.toString('utf8')));
  } catch {
    return { ok: false, message: 'body is not valid JSON' };
  }
  if (body === undefined) return { ok: false, message: 'body is not a JSON object' };
  const id = nonEmpty(body.id) ?? nonEmpty(body.event_id) ?? nonEmpty(headerId);
  if (id === undefined) return { ok: false, message: 'event has no id' };
  const type = nonEmpty(body.type) ?? nonEmpty(body.event_type);
  if (type === undefined) return { ok: false, message: 'event has no type' };
  const data = record(body.data);
  const nested = record(data?.subject);
  const subjectType = nonEmpty(nested?.subject_type) ?? nonEmpty(data?.subject_type);
  const subjectId = nonEmpty(nested?.subject_id) ?? nonEmpty(data?.subject_id);
  const subject =
    subjectType !== undefined && subjectId !== undefined ? { type: subjectType, id: subjectId } : undefined;
  const b = data?.balance;
  const balance = typeof b === 'string' ? b : typeof b === 'number' ? String(b) : undefined;
  return { ok: true, event: { id, type, subject, balance } };
}

/** The subject's state after an event; undefined for an event kind that changes nothing. */
export function nextSubjectState(
  current: SubjectState | undefined,
  event: WebhookEvent,
  nowMs: number,
): SubjectState | undefined {
  let blocked: boolean;
  let thresholdCrossedAt = current?.thresholdCrossedAt;
  if (BLOCKING_EVENTS.has(event.type)) blocked = true;
  // The realtime lookup still decides after an unblock: a change that left the balance at or below
  // zero is refused by the pre-check, so lifting the block here cannot serve an empty wallet.
  else if (UNBLOCKING_EVENTS.has(event.type)) blocked = false;
  else if (RECORDED_EVENTS.has(event.type)) {
    blocked = current?.blocked ?? false;
    thresholdCrossedAt = nowMs;
  } else return undefined;
  const balance = event.balance ?? current?.balance;
  return {
    blocked,
    lastEvent: event.type,
    lastEventId: event.id,
    updatedAt: nowMs,
    ...(thresholdCrossedAt === undefined ? {} : { thresholdCrossedAt }),
    ...(balance === undefined ? {} : { balance }),
  };
}

export interface WebhookHandlerOptions {
  readonly config: Pick<
    BalanceEnforcementConfig,
    'webhookSecret' | 'timestampToleranceS' | 'webhookMaxBodyBytes'
  >;
  /** Further accepted secrets (a rotation in progress). */
  readonly extraSecrets?: readonly string[];
  readonly store: StateStore;
  /** Tell the gateway before answering (file mode). */
  readonly notify?: StateNotifier;
  readonly log?: Logger;
  readonly now?: () => number;
  readonly dedupeTtlMs?: number;
}

export type WebhookRouteHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

export function createWebhookHandler(opts: WebhookHandlerOptions): WebhookRouteHandler {
  const now = opts.now ?? Date.now;
  const log = opts.log;
  const secrets = [opts.config.webhookSecret, ...(opts.extraSecrets ?? [])];
  const ttl = opts.dedupeTtlMs ?? WEBHOOK_DEDUPE_TTL_MS;

  return async function handleWebhook(req, res) {
    const raw = await readCapped(req, opts.config.webhookMaxBodyBytes);
    if (raw === undefined) {
      log?.warn({ limit: opts.config.webhookMaxBodyBytes }, 'webhook refused: body too large');
      countWebhook(undefined, 'bad_request');
      return replyTooLarge(res, errorBody('payload_too_large', 'webhook body is too large'));
    }
    const check = verifyWebhookSignature({
      secrets,
      signature: header(req, SIGNATURE_HEADER),
      timestamp: header(req, TIMESTAMP_HEADER),
      rawBody: raw,
      toleranceS: opts.config.timestampToleranceS,
      nowMs: now(),
    });
    if (!check.ok) {
      log?.warn(
        { reason: check.reason, expected: SIGNATURE_SCHEME },
        check.reason === 'body_only_signature'
          ? 'webhook refused: signed over the body alone; the signature must cover "<timestamp>.<body>"'
          : 'webhook refused',
      );
      countWebhook(undefined, 'unauthorized');
      return sendError(res, 401, 'invalid_signature', 'webhook signature or timestamp is invalid');
    }
    const parsed = parseWebhookEvent(raw, header(req, WEBHOOK_ID_HEADER));
    if (!parsed.ok) {
      log?.warn({ reason: parsed.message }, 'webhook refused: malformed body');
      countWebhook(undefined, 'bad_request');
      return sendError(res, 400, 'malformed_webhook', parsed.message);
    }
    const event = parsed.event;
    const known =
      BLOCKING_EVENTS.has(event.type) || UNBLOCKING_EVENTS.has(event.type) || RECORDED_EVENTS.has(event.type);
    if (known && event.subject === undefined) {
      log?.warn({ event_id: event.id, type: event.type }, 'webhook refused: no subject');
      countWebhook(event.type, 'bad_request');
      return sendError(res, 400, 'malformed_webhook', 'event names no subject');
    }

    if (!(await opts.store.claimWebhook(event.id, ttl))) {
      log?.info({ event_id: event.id, type: event.type }, 'duplicate webhook ignored');
      countWebhook(event.type, 'duplicate');
      return noContent(res);
    }
    if (!known || event.subject === undefined) {
      log?.info({ event_id: event.id, type: event.type }, 'webhook of an unhandled type recorded');
      countWebhook(event.type, 'ignored');
      return noContent(res);
    }
    const subject = event.subject;
    let state: SubjectState | undefined;
    try {
      state = nextSubjectState(await opts.store.getSubject(subject), event, now());
      if (state !== undefined) await opts.store.setSubject(subject, state);
      await opts.store.invalidateBalance(subject);
    } catch (err) {
      // Not applied: forget the id so the sender's retry is processed, and make it retry.
      await opts.store.releaseWebhook(event.id).catch(() => undefined);
      log?.error({ event_id: event.id, err: errorText(err) }, 'webhook state change failed');
      countWebhook(event.type, 'error');
      return sendError(res, 500, 'state_update_failed', 'subject state could not be saved; retry');
    }
    log?.info(
      {
        event_id: event.id,
        type: event.type,
        subject_type: subject.type,
        subject_id: subject.id,
        blocked: state?.blocked,
      },
      'webhook applied',
    );
    countWebhook(event.type, 'applied');
    if (opts.notify !== undefined) {
      await opts.notify({
        subject_type: subject.type,
        subject_id: subject.id,
        event_id: event.id,
        event_type: event.type,
      });
    }
    return noContent(res);
  };
}

export interface WebhookRoute {
  /** `"POST <webhook_path>"`, the sidecar's route key. */
  readonly key: string;
  readonly handler: WebhookRouteHandler;
  readonly store: StateStore;
  close(): Promise<void>;
}

export interface WebhookRouteOptions {
  readonly log?: Logger;
  /** Where the gateway is reached for the state notice (default: its configured listen address). */
  readonly gatewayUrl?: string | (() => string | undefined);
  /** Replaces the store opened from configuration (tests); not closed by close(). */
  readonly store?: StateStore;
  readonly now?: () => number;
}

/** The sidecar's webhook route, built from configuration: undefined when enforcement is off. */
export async function createWebhookRoute(
  config: RouterConfig,
  opts: WebhookRouteOptions = {},
): Promise<WebhookRoute | undefined> {
  const enforcement = config.billing.balanceEnforcement;
  if (!config.billing.enabled || !enforcement.enabled) return undefined;
  const store =
    opts.store ??
    (await openStateStore(config, {
      role: 'sidecar',
      now: opts.now,
      onError: (err) => opts.log?.error({ err: errorText(err) }, 'state store error'),
    }));
  const notify = createStateNotifier({
    gatewayUrl:
      opts.gatewayUrl ??
      (config.listen.port === 0 ? undefined : loopbackUrl(config.listen.host, config.listen.port)),
    secret: enforcement.webhookSecret,
    log: opts.log,
    now: opts.now,
  });
  const handler = createWebhookHandler({
    config: enforcement,
    store,
    notify,
    log: opts.log,
    now: opts.now,
  });
  return {
    key: `POST ${enforcement.webhookPath}`,
    handler,
    store,
    close: () => (opts.store === undefined ? store.close() : Promise.resolve()),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
}

function errorBody(code: string, message: string): string {
  return JSON.stringify({ error: { message, type: 'webhook_error', code } });
}

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  const text = errorBody(code, message);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function noContent(res: ServerResponse): void {
  res.writeHead(204);
  res.end();
}
