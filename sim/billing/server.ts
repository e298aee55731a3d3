// The billing service simulator: a node:http stand-in for the billing service's ingest, wallet and usage
// endpoints (docs/billing.md), with signed webhooks, failure injection and state accessors for tests.
// It is on the benchmark's hot path (100,000 ingests), so the ingest route avoids needless work.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { type IngestFailure, type LookupFailure, parseFailureMode } from './failure-modes.ts';
import {
  BodyTooLargeError,
  baseUrl,
  closeServer,
  listen,
  readBody,
  sendError,
  sendHtml,
  sendJson,
} from './http-util.ts';
import { type BalanceChange, formatMoney, Ledger, type Money, parseMoney, parseWalletKey } from './ledger.ts';
import { chargeItems, chargeTotals } from './pricing.ts';
import type {
  BillingSim,
  BillingSimOptions,
  BillingSimState,
  FailureMode,
  RuleSetMode,
  RuleSetStatus,
  SendWebhookOptions,
  Subject,
  WebhookDelivery,
} from './types.ts';
import { parseUsageQuery, summarize } from './usage-query.ts';
import { validateEvent } from './validate-event.ts';
import { WebhookSender } from './webhook-sender.ts';

export type * from './types.ts';
export { signWebhook } from './webhook-sender.ts';

const BODY_LIMIT = 1024 * 1024;
const DETAILS_DEFAULT_LIMIT = 20;
const DETAILS_MAX_LIMIT = 1000;

export const RULE_SET_NOT_PUBLISHED = 'extractor rule set is not published';

const PORTAL_404 =
  '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>404 Not Found</title></head>' +
  '<body><h1>404</h1><p>This page could not be found.</p></body></html>\n';

interface Waiter {
  count: number;
  resolve: () => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

interface Held {
  res: ServerResponse;
  timer: NodeJS.Timeout | undefined;
}

interface Route {
  kind: 'ingest' | 'balance' | 'credit' | 'details' | 'summary';
  method: 'GET' | 'POST';
  projectId: string;
  ruleSetId?: string;
}

function splitUrl(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Matches /v1/projects/{project_id}/... routes; undefined for anything else. */
function matchRoute(path: string): Route | undefined {
  const parts = path.split('/');
  if (parts[0] !== '' || parts[1] !== 'v1' || parts[2] !== 'projects' || parts.length < 5) return undefined;
  const projectId = decodeSegment(parts[3]!);
  if (projectId === undefined) return undefined;
  const rest = parts.slice(4).join('/');
  if (
    parts[4] === 'extractor-rule-sets' &&
    parts.length === 8 &&
    parts[6] === 'events' &&
    parts[7] === 'ingest'
  ) {
    const ruleSetId = decodeSegment(parts[5]!);
    return ruleSetId === undefined ? undefined : { kind: 'ingest', method: 'POST', projectId, ruleSetId };
  }
  if (rest === 'wallets/realtime/amount') return { kind: 'balance', method: 'GET', projectId };
  if (rest === 'wallets/credit') return { kind: 'credit', method: 'POST', projectId };
  if (rest === 'usage/events/details') return { kind: 'details', method: 'GET', projectId };
  if (rest === 'usage/summary') return { kind: 'summary', method: 'GET', projectId };
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseJson(buffer: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(buffer.toString('utf8')) };
  } catch {
    return { ok: false };
  }
}

class BillingSimulator implements BillingSim {
  url = '';
  portalUrl = '';
  readonly projectId: string;
  readonly #options: BillingSimOptions;
  readonly #ruleSetMode: RuleSetMode;
  readonly #currency: string;
  readonly #keepEvents: boolean;
  #detailsIgnoreOffset: boolean;
  readonly #ingestBodyLimit: number;
  readonly #oversize: 'reset' | '413';
  readonly #now: () => number;
  readonly #thresholds: Money[];
  readonly #api: Server;
  readonly #portal: Server;
  readonly #ledger = new Ledger();
  readonly #sender: WebhookSender;
  readonly #held = new Set<Held>();
  readonly #seenKeys = new Set<string>();
  #ruleSets = new Map<string, RuleSetStatus>();
  #events: UsageEvent[] = [];
  #receivedAt: number[] = [];
  #accepted = 0;
  #ingestCalls = 0;
  #duplicates = 0;
  #missingIdempotencyHeader = 0;
  #lookups = 0;
  #ingestFailure: IngestFailure = { kind: 'none' };
  #ingestMode: FailureMode = 'none';
  #lookupFailure: LookupFailure = { kind: 'none' };
  #lookupMode: FailureMode = 'none';
  #eventWaiters: Waiter[] = [];
  #webhookWaiters: Waiter[] = [];
  #settledWebhooks: WebhookDelivery[] = [];
  #closed = false;

  constructor(options: BillingSimOptions) {
    if (!options.apiKey) throw new Error('billing simulator: apiKey is required');
    this.#options = options;
    this.#ruleSetMode = options.ruleSetMode ?? 'items';
    this.projectId = options.projectId ?? 'proj_local';
    this.#currency = options.currency ?? 'USD';
    this.#keepEvents = options.keepEvents ?? true;
    this.#detailsIgnoreOffset = options.detailsIgnoreOffset ?? false;
    this.#ingestBodyLimit = options.ingestBodyLimitBytes ?? BODY_LIMIT;
    this.#oversize = options.oversize ?? 'reset';
    this.#now = options.now ?? Date.now;
    this.#thresholds = (options.thresholds ?? []).map(parseMoney);
    this.#sender = new WebhookSender({
      url: options.webhook?.url,
      secret: options.webhook?.secret,
      attempts: options.webhookAttempts ?? 3,
      retryDelayMs: options.webhookRetryDelayMs ?? 50,
      now: this.#now,
      onSettled: (delivery) => this.#onWebhookSettled(delivery),
    });
    this.#loadInitialState();
    this.#api = createServer((req, res) => this.#handleApi(req, res));
    this.#portal = createServer(function portal(req, res) {
      req.resume();
      sendHtml(res, 404, PORTAL_404);
    });
  }

  async start(): Promise<void> {
    const host = this.#options.host ?? '127.0.0.1';
    const apiAddress = await listen(this.#api, this.#options.port ?? 0, host);
    const portalAddress = await listen(this.#portal, this.#options.portalPort ?? 0, host);
    this.url = baseUrl(host, apiAddress);
    this.portalUrl = baseUrl(host, portalAddress);
  }

  get events(): readonly UsageEvent[] {
    return this.#events;
  }
  get accepted(): number {
    return this.#accepted;
  }
  get ingestCalls(): number {
    return this.#ingestCalls;
  }
  get duplicates(): number {
    return this.#duplicates;
  }
  get missingIdempotencyHeader(): number {
    return this.#missingIdempotencyHeader;
  }
  get lookups(): number {
    return this.#lookups;
  }
  get webhooksSent(): readonly WebhookDelivery[] {
    return this.#sender.deliveries;
  }

  balance(subjectType: string, subjectId: string, currency = this.#currency): string {
    const wallet = this.#ledger.get(subjectType, subjectId, currency);
    if (!wallet) throw new Error(`no ${currency} wallet for ${subjectType}:${subjectId}`);
    return formatMoney(wallet.balance);
  }

  credit(subjectType: string, subjectId: string, amount: string, currency = this.#currency): string {
    const value = parseMoney(amount);
    if (!value.greaterThan(0)) throw new Error('credit amount must be greater than zero');
    const change = this.#ledger.apply(subjectType, subjectId, currency, value, true)!;
    if (!change.before.greaterThan(0) && change.after.greaterThan(0)) {
      this.#walletWebhook('wallet.balance_changed', change);
    }
    return formatMoney(change.after);
  }

  setWallet(subjectType: string, subjectId: string, balance: string, currency = this.#currency): void {
    this.#ledger.set(subjectType, subjectId, currency, parseMoney(balance));
  }

  setRuleSet(ruleSetId: string, status: RuleSetStatus): void {
    this.#ruleSets.set(ruleSetId, status);
  }

  setFailure(mode: FailureMode): void {
    const parsed = parseFailureMode(mode);
    if (parsed.slot === 'both') {
      this.#ingestFailure = { kind: 'none' };
      this.#ingestMode = 'none';
      this.#lookupFailure = { kind: 'none' };
      this.#lookupMode = 'none';
    } else if (parsed.slot === 'ingest') {
      this.#ingestFailure = parsed.failure;
      this.#ingestMode = parsed.mode;
    } else {
      this.#lookupFailure = parsed.failure;
      this.#lookupMode = parsed.mode;
    }
  }

  sendWebhook(type: string, subject: Subject, opts: SendWebhookOptions = {}): Promise<WebhookDelivery> {
    return this.#sender.send(type, subject, { attempts: 1, ...opts });
  }

  replayWebhook(delivery: WebhookDelivery): Promise<WebhookDelivery> {
    return this.#sender.replay(delivery);
  }

  waitForEvents(n: number, timeoutMs: number): Promise<void> {
    if (this.#accepted >= n) return Promise.resolve();
    return this.#wait(this.#eventWaiters, n, timeoutMs, () => `${this.#accepted} of ${n} events accepted`);
  }

  async waitForWebhooks(n: number, timeoutMs: number): Promise<WebhookDelivery[]> {
    if (this.#settledWebhooks.length < n) {
      await this.#wait(
        this.#webhookWaiters,
        n,
        timeoutMs,
        () => `${this.#settledWebhooks.length} of ${n} webhooks settled`,
      );
    }
    return this.#settledWebhooks.slice(0, n);
  }

  state(): BillingSimState {
    return {
      accepted: this.#accepted,
      ingestCalls: this.#ingestCalls,
      duplicates: this.#duplicates,
      lookups: this.#lookups,
      webhooks: this.#sender.deliveries.length,
      failure: { ingest: this.#ingestMode, lookup: this.#lookupMode },
      wallets: this.#ledger.all().map((wallet) => ({
        subject_type: wallet.subjectType,
        subject_id: wallet.subjectId,
        currency: wallet.currency,
        balance: formatMoney(wallet.balance),
      })),
    };
  }

  setDetailsIgnoreOffset(ignore: boolean): void {
    this.#detailsIgnoreOffset = ignore;
  }

  deleteEvents(requestIds: readonly string[]): number {
    const wanted = new Set(requestIds);
    let deleted = 0;
    for (let i = this.#events.length - 1; i >= 0; i -= 1) {
      const event = this.#events[i]!;
      if (!wanted.has(event.external_event_id)) continue;
      this.#events.splice(i, 1);
      this.#receivedAt.splice(i, 1);
      this.#seenKeys.delete(event.idempotency_key);
      deleted += 1;
    }
    return deleted;
  }

  reset(): void {
    this.#dropHeld();
    this.#sender.reset();
    this.#settledWebhooks = [];
    this.#events = [];
    this.#receivedAt = [];
    this.#seenKeys.clear();
    this.#accepted = 0;
    this.#ingestCalls = 0;
    this.#duplicates = 0;
    this.#missingIdempotencyHeader = 0;
    this.#lookups = 0;
    this.setFailure('none');
    this.#loadInitialState();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#dropHeld();
    for (const waiter of [...this.#eventWaiters, ...this.#webhookWaiters]) {
      clearTimeout(waiter.timer);
      waiter.reject(new Error('billing simulator closed'));
    }
    this.#eventWaiters = [];
    this.#webhookWaiters = [];
    await Promise.all([closeServer(this.#api), closeServer(this.#portal), this.#sender.close()]);
  }

  #loadInitialState(): void {
    this.#ruleSets = new Map(Object.entries(this.#options.ruleSets ?? { rs_router: 'published' }));
    this.#ledger.clear();
    for (const [key, balance] of Object.entries(this.#options.wallets ?? {})) {
      const { subjectType, subjectId } = parseWalletKey(key);
      this.#ledger.set(subjectType, subjectId, this.#currency, parseMoney(balance));
    }
  }

  #wait(list: Waiter[], count: number, timeoutMs: number, progress: () => string): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('billing simulator closed'));
    return new Promise(function register(resolve, reject) {
      const waiter: Waiter = {
        count,
        resolve,
        reject,
        timer: setTimeout(function expire() {
          const index = list.indexOf(waiter);
          if (index >= 0) list.splice(index, 1);
          reject(new Error(`timed out after ${timeoutMs} ms: ${progress()}`));
        }, timeoutMs),
      };
      list.push(waiter);
    });
  }

  #notify(list: Waiter[], current: number): void {
    if (list.length === 0) return;
    for (let i = list.length - 1; i >= 0; i -= 1) {
      const waiter = list[i]!;
      if (current >= waiter.count) {
        list.splice(i, 1);
        clearTimeout(waiter.timer);
        waiter.resolve();
      }
    }
  }

  #onWebhookSettled(delivery: WebhookDelivery): void {
    this.#settledWebhooks.push(delivery);
    this.#notify(this.#webhookWaiters, this.#settledWebhooks.length);
  }

  #walletWebhook(type: string, change: BalanceChange, extra: Record<string, unknown> = {}): void {
    const { wallet } = change;
    // Fire and forget, as the real service does; the delivery is recorded in webhooksSent.
    void this.#sender.send(
      type,
      { subject_type: wallet.subjectType, subject_id: wallet.subjectId },
      { data: { balance: formatMoney(change.after), currency: wallet.currency, ...extra } },
    );
  }

  #hold(res: ServerResponse, timer?: NodeJS.Timeout): Held {
    const held: Held = { res, timer };
    this.#held.add(held);
    // A delayed answer stays scheduled when its client leaves (its timer removes it); a hung one is done.
    res.on('close', () => {
      if (!held.timer) this.#held.delete(held);
    });
    return held;
  }

  #dropHeld(): void {
    for (const held of this.#held) {
      if (held.timer) clearTimeout(held.timer);
      held.res.socket?.destroy();
    }
    this.#held.clear();
  }

  #authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (header === undefined || !/^bearer /i.test(header)) return false;
    return header.slice(7) === this.#options.apiKey;
  }

  async #handleApi(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const { path, query } = splitUrl(req.url ?? '/');
      if (path.startsWith('/_sim/')) {
        await this.#handleAdmin(req, res, path);
        return;
      }
      if (this.#ingestFailure.kind === 'reset') {
        // A service dying under load: the connection is accepted, then dropped with no answer.
        req.socket.destroy();
        return;
      }
      const route = matchRoute(path);
      if (!route) {
        req.resume();
        sendError(res, 404, 'not_found', 'route not found');
        return;
      }
      if (req.method !== route.method) {
        req.resume();
        sendError(res, 405, 'method_not_allowed', `use ${route.method}`);
        return;
      }
      switch (route.kind) {
        case 'ingest':
          await this.#ingestWithFailures(req, res, route);
          return;
        case 'balance':
          this.#lookupWithFailures(req, res, route, query);
          return;
        case 'credit':
          await this.#creditRoute(req, res, route);
          return;
        case 'details':
          this.#detailsRoute(req, res, route, query);
          return;
        case 'summary':
          this.#summaryRoute(req, res, route, query);
          return;
      }
    } catch (error) {
      if (error instanceof BodyTooLargeError) sendError(res, 413, 'body_too_large', error.message);
      else sendError(res, 500, 'internal_error', 'billing simulator error');
    }
  }

  /** Auth and project checks shared by the /v1 routes; answers and returns false when they fail. */
  #admit(req: IncomingMessage, res: ServerResponse, route: Route): boolean {
    if (!this.#authorized(req)) {
      req.resume();
      sendError(res, 401, 'unauthorized', 'invalid or missing API key');
      return false;
    }
    if (route.projectId !== this.projectId) {
      req.resume();
      sendError(res, 404, 'project_not_found', 'project not found');
      return false;
    }
    return true;
  }

  async #ingestWithFailures(req: IncomingMessage, res: ServerResponse, route: Route): Promise<void> {
    this.#ingestCalls += 1;
    const failure = this.#ingestFailure;
    switch (failure.kind) {
      case 'none':
        await this.#ingest(req, res, route);
        return;
      case 'error500':
        req.resume();
        sendError(res, 500, 'internal_error', 'injected failure');
        return;
      case 'error500-times':
        if (failure.remaining > 0) {
          failure.remaining -= 1;
          req.resume();
          sendError(res, 500, 'internal_error', 'injected failure');
          return;
        }
        await this.#ingest(req, res, route);
        return;
      case 'hang':
        req.resume();
        this.#hold(res);
        return;
      case 'reset':
        return; // #handleApi dropped the connection
      case 'slow': {
        // The body is read now; the event is processed when the answer goes out, even if the client has
        // given up by then (a timed-out delivery that was accepted, as happens with the real service).
        const body = await readBody(req, this.#ingestBodyLimit, this.#oversize);
        const held = this.#hold(res);
        held.timer = setTimeout(() => {
          this.#held.delete(held);
          this.#acceptBody(req, res, route, body);
        }, failure.ms);
        return;
      }
    }
  }

  async #ingest(req: IncomingMessage, res: ServerResponse, route: Route): Promise<void> {
    const body = await readBody(req, this.#ingestBodyLimit, this.#oversize);
    this.#acceptBody(req, res, route, body);
  }

  #acceptBody(req: IncomingMessage, res: ServerResponse, route: Route, body: Buffer): void {
    if (!this.#authorized(req)) {
      sendError(res, 401, 'unauthorized', 'invalid or missing API key');
      return;
    }
    if (route.projectId !== this.projectId) {
      sendError(res, 404, 'project_not_found', 'project not found');
      return;
    }
    const status = this.#ruleSets.get(route.ruleSetId ?? '');
    if (status === undefined) {
      sendError(res, 404, 'rule_set_not_found', 'extractor rule set not found');
      return;
    }
    if (status !== 'published') {
      sendError(res, 409, 'rule_set_not_published', RULE_SET_NOT_PUBLISHED);
      return;
    }
    const parsed = parseJson(body);
    if (!parsed.ok) {
      sendError(res, 400, 'invalid_json', 'request body is not valid JSON');
      return;
    }
    const validation = validateEvent(parsed.value);
    if (!validation.ok) {
      sendError(res, 400, 'invalid_event', validation.message);
      return;
    }
    const event = validation.event;
    const headerKey = req.headers['idempotency-key'];
    if (typeof headerKey === 'string' && headerKey !== event.idempotency_key) {
      sendError(
        res,
        400,
        'idempotency_key_mismatch',
        'Idempotency-Key header does not match idempotency_key',
      );
      return;
    }
    if (this.#seenKeys.has(event.idempotency_key)) {
      this.#duplicates += 1;
      sendJson(res, 202, { accepted: true, duplicate: true, idempotency_key: event.idempotency_key });
      return;
    }
    this.#seenKeys.add(event.idempotency_key);
    this.#accepted += 1;
    if (headerKey === undefined) this.#missingIdempotencyHeader += 1;
    if (this.#keepEvents) {
      this.#events.push(event);
      this.#receivedAt.push(this.#now());
    }
    this.#debit(event);
    sendJson(res, 202, {
      accepted: true,
      duplicate: false,
      event_id: `uev_${this.#accepted}`,
      idempotency_key: event.idempotency_key,
    });
    this.#notify(this.#eventWaiters, this.#accepted);
  }

  #debit(event: UsageEvent): void {
    if (!event['x-billing']) return;
    for (const [currency, amount] of chargeTotals(chargeItems(event, this.#ruleSetMode))) {
      if (amount.isZero()) continue;
      const change = this.#ledger.apply(
        event.subject_type,
        event.subject_id,
        currency,
        amount.negated(),
        false,
      );
      if (!change) continue;
      for (const threshold of this.#thresholds) {
        if (change.before.greaterThan(threshold) && change.after.lessThanOrEqualTo(threshold)) {
          this.#walletWebhook('wallet.available_balance.threshold_crossed', change, {
            threshold: formatMoney(threshold),
          });
        }
      }
      if (change.before.greaterThan(0) && !change.after.greaterThan(0)) {
        this.#walletWebhook('wallet.insufficient_balance', change);
      }
    }
  }

  #lookupWithFailures(req: IncomingMessage, res: ServerResponse, route: Route, query: string): void {
    this.#lookups += 1;
    req.resume();
    if (this.#lookupFailure.kind === 'lookup-error') {
      sendError(res, 500, 'internal_error', 'injected failure');
      return;
    }
    if (this.#lookupFailure.kind === 'lookup-hang') {
      this.#hold(res);
      return;
    }
    if (!this.#admit(req, res, route)) return;
    const params = new URLSearchParams(query);
    const subjectType = params.get('subject_type');
    const subjectId = params.get('subject_id');
    if (!subjectType || !subjectId) {
      sendError(res, 400, 'invalid_request', 'subject_type and subject_id are required');
      return;
    }
    const currency = params.get('currency') || this.#currency;
    const wallet = this.#ledger.get(subjectType, subjectId, currency);
    if (!wallet) {
      sendError(res, 404, 'wallet_not_found', 'wallet not found');
      return;
    }
    sendJson(res, 200, { account_id: wallet.accountId, currency, balance: formatMoney(wallet.balance) });
  }

  async #creditRoute(req: IncomingMessage, res: ServerResponse, route: Route): Promise<void> {
    if (!this.#admit(req, res, route)) return;
    const parsed = parseJson(await readBody(req, BODY_LIMIT));
    if (!parsed.ok || !isRecord(parsed.value)) {
      sendError(res, 400, 'invalid_json', 'request body is not a JSON object');
      return;
    }
    const { subject_type: subjectType, subject_id: subjectId, amount, currency } = parsed.value;
    if (typeof subjectType !== 'string' || !subjectType || typeof subjectId !== 'string' || !subjectId) {
      sendError(res, 400, 'invalid_request', 'subject_type and subject_id are required');
      return;
    }
    if (currency !== undefined && (typeof currency !== 'string' || !currency)) {
      sendError(res, 400, 'invalid_request', 'currency must be a string');
      return;
    }
    let balance: string;
    try {
      if (typeof amount !== 'string') throw new Error('amount must be a decimal string');
      balance = this.credit(subjectType, subjectId, amount, currency ?? this.#currency);
    } catch (error) {
      sendError(res, 400, 'invalid_amount', error instanceof Error ? error.message : 'invalid amount');
      return;
    }
    const wallet = this.#ledger.get(subjectType, subjectId, currency ?? this.#currency)!;
    sendJson(res, 200, { account_id: wallet.accountId, currency: wallet.currency, balance });
  }

  #detailsRoute(req: IncomingMessage, res: ServerResponse, route: Route, query: string): void {
    req.resume();
    if (!this.#admit(req, res, route)) return;
    const params = new URLSearchParams(query);
    const limitText = params.get('limit');
    const limit = limitText === null ? DETAILS_DEFAULT_LIMIT : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > DETAILS_MAX_LIMIT) {
      sendError(res, 400, 'invalid_request', `limit must be an integer from 1 to ${DETAILS_MAX_LIMIT}`);
      return;
    }
    const offsetText = params.get('offset');
    const offset = offsetText === null || this.#detailsIgnoreOffset ? 0 : Number(offsetText);
    if (!Number.isInteger(offset) || offset < 0) {
      sendError(res, 400, 'invalid_request', 'offset must be an integer of 0 or more');
      return;
    }
    // Newest first: `offset` skips that many of the newest.
    const data: Array<Record<string, unknown>> = [];
    for (let i = this.#events.length - 1 - offset; i >= 0 && data.length < limit; i -= 1) {
      const event = this.#events[i]!;
      const amounts: Record<string, string> = {};
      for (const [currency, amount] of chargeTotals(chargeItems(event, this.#ruleSetMode)))
        amounts[currency] = formatMoney(amount);
      data.push({ ...event, received_at: Math.floor(this.#receivedAt[i]! / 1000), amounts });
    }
    sendJson(res, 200, {
      data,
      limit,
      offset,
      total: this.#events.length,
      has_more: this.#events.length > offset + data.length,
    });
  }

  #summaryRoute(req: IncomingMessage, res: ServerResponse, route: Route, query: string): void {
    req.resume();
    if (!this.#admit(req, res, route)) return;
    const params = new URLSearchParams(query);
    const parsed = parseUsageQuery(params.get('filter'), params.get('group_by'));
    if (!parsed.ok) {
      sendError(res, 400, 'invalid_query', parsed.message);
      return;
    }
    sendJson(res, 200, {
      group_by: 'metric',
      data: summarize(this.#events, parsed.filter, this.#ruleSetMode),
    });
  }

  async #handleAdmin(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const key = `${req.method} ${path}`;
    if (key === 'GET /_sim/state') {
      req.resume();
      sendJson(res, 200, this.state());
      return;
    }
    if (key === 'POST /_sim/reset') {
      req.resume();
      this.reset();
      sendJson(res, 200, this.state());
      return;
    }
    const handlers: Record<string, (body: Record<string, unknown>) => Promise<unknown> | unknown> = {
      'POST /_sim/failure': (body) => {
        if (typeof body.mode !== 'string') throw new Error('mode is required');
        this.setFailure(body.mode as FailureMode);
        return this.state().failure;
      },
      'POST /_sim/wallets': (body) => {
        const { subject_type: type, subject_id: id, balance, currency } = body;
        if (typeof type !== 'string' || typeof id !== 'string' || typeof balance !== 'string') {
          throw new Error('subject_type, subject_id and balance (decimal string) are required');
        }
        const cur = typeof currency === 'string' ? currency : this.#currency;
        this.setWallet(type, id, balance, cur);
        return { subject_type: type, subject_id: id, currency: cur, balance: this.balance(type, id, cur) };
      },
      'POST /_sim/events/delete': (body) => {
        const ids = body.request_ids;
        if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string'))
          throw new Error('request_ids (a list of strings) is required');
        return { deleted: this.deleteEvents(ids as string[]) };
      },
      'POST /_sim/rule-sets': (body) => {
        if (typeof body.id !== 'string' || (body.status !== 'published' && body.status !== 'draft')) {
          throw new Error('id and status (published | draft) are required');
        }
        this.setRuleSet(body.id, body.status);
        return { id: body.id, status: body.status };
      },
      'POST /_sim/webhooks': async (body) => {
        const { type, subject_type: subjectType, subject_id: subjectId, id, data } = body;
        if (typeof type !== 'string' || typeof subjectType !== 'string' || typeof subjectId !== 'string') {
          throw new Error('type, subject_type and subject_id are required');
        }
        const delivery = await this.sendWebhook(
          type,
          { subject_type: subjectType, subject_id: subjectId },
          { id: typeof id === 'string' ? id : undefined, data: isRecord(data) ? data : undefined },
        );
        return { id: delivery.id, url: delivery.url, status: delivery.status, delivered: delivery.delivered };
      },
    };
    const handler = handlers[key];
    if (!handler) {
      req.resume();
      sendError(res, 404, 'not_found', 'unknown simulator admin route');
      return;
    }
    const parsed = parseJson(await readBody(req, BODY_LIMIT));
    if (!parsed.ok || !isRecord(parsed.value)) {
      sendError(res, 400, 'invalid_json', 'request body is not a JSON object');
      return;
    }
    try {
      sendJson(res, 200, await handler(parsed.value));
    } catch (error) {
      sendError(res, 400, 'invalid_request', error instanceof Error ? error.message : 'invalid request');
    }
  }
}

/** Starts the API and portal listeners; resolves once both listen. */
export async function startBillingSim(opts: BillingSimOptions): Promise<BillingSim> {
  const sim = new BillingSimulator(opts);
  try {
    await sim.start();
  } catch (error) {
    await sim.close();
    throw error;
  }
  return sim;
}
