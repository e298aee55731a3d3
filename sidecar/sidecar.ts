// The billing sidecar (router-billing) in-process: the delivery worker plus a small HTTP server for
// /healthz and /readyz. Routing is a plain map of "METHOD /path" -> handler so the webhook listener
// (balance enforcement) plugs in with one more entry.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { type BillingClient, createBillingClient } from '../billing/billing-client.ts';
import { acquireEventSpool } from '../billing/event-spool.ts';
import type { OutboxStatusView } from '../billing/outbox/status.ts';
import type { BillingConfig, ListenAddress, RouterConfig, StoreConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { openTracing } from '../common/tracing.ts';
import { createReplayRoute } from './dead-letter-route.ts';
import type { DeliveryWorker, DeliveryWorkerOptions } from './delivery-worker.ts';
import { createSidecarMetrics, streamConsumerSources } from './sidecar-metrics.ts';
import { startSlottedDelivery } from './slotted-delivery.ts';
import { type StreamConsumer, startShardedConsumers } from './stream-consumer.ts';
import { createWebhookRoute, type WebhookRoute, type WebhookRouteOptions } from './webhook-handler.ts';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** Keyed `"GET /healthz"`: method, one space, exact path (query string ignored). */
export type SidecarRoutes = Map<string, RouteHandler>;

export interface SidecarOptions {
  logger?: Logger;
  /** Overrides billing.listen (tests pass port 0). */
  listen?: ListenAddress;
  /** Extra routes, added to (and overriding) the built-in ones. */
  routes?: Iterable<[string, RouteHandler]>;
  /** Replaces the undici client (tests). */
  client?: BillingClient;
  /** Delivery tuning (window, checkpoint cadence, jitter source ...). */
  worker?: Omit<DeliveryWorkerOptions, 'config' | 'client' | 'logger'>;
  /** Balance enforcement webhook listener: gateway URL for the state notice, store override (tests). */
  webhook?: Omit<WebhookRouteOptions, 'log'>;
}

export interface Sidecar {
  /** Undefined when billing is disabled: the sidecar then only answers health checks. */
  readonly worker: DeliveryWorker | undefined;
  /** Shared-store mode: the billing stream consumer instead of the outbox worker. */
  readonly consumer: StreamConsumer | undefined;
  /** http://host:port of the listener. */
  readonly url: string;
  readonly routes: SidecarRoutes;
  /** Stops accepting connections, lets the in-flight delivery end, writes the checkpoint. */
  close(): Promise<void>;
}

/** Billing can actually deliver: on, and every value the ingest call needs is present. */
export function isBillingConfigured(billing: BillingConfig): boolean {
  return (
    billing.enabled &&
    billing.baseUrl !== '' &&
    billing.projectId !== '' &&
    billing.apiKey !== '' &&
    billing.extractorRuleSetId !== ''
  );
}

/**
 * Billing alone, without the rest of a configuration (tests and tools): the billing stream of `store`
 * when given, else the outbox; no webhook listener and no tracing.
 */
export interface BillingOnlyConfig {
  readonly kind: 'billing-only';
  readonly billing: BillingConfig;
  readonly store?: StoreConfig | undefined;
}

/** Where the sidecar delivers from: the shared store's billing stream, or this host's outbox. */
export type DeliveryEngine =
  | { readonly kind: 'stream'; readonly store: StoreConfig }
  | { readonly kind: 'outbox' };

function isBillingOnly(config: RouterConfig | BillingOnlyConfig): config is BillingOnlyConfig {
  return (config as Partial<BillingOnlyConfig>).kind === 'billing-only';
}

export function deliveryEngine(config: RouterConfig | BillingOnlyConfig): DeliveryEngine {
  const store = config.store;
  return store?.enabled === true ? { kind: 'stream', store } : { kind: 'outbox' };
}

export async function startSidecar(
  config: RouterConfig | BillingOnlyConfig,
  opts: SidecarOptions = {},
): Promise<Sidecar> {
  const billing = config.billing;
  const whole = isBillingOnly(config) ? undefined : config;
  const engine = deliveryEngine(config);
  const log = opts.logger;
  const configured = isBillingConfigured(billing);
  let client: BillingClient | undefined;
  const ownsClient = opts.client === undefined;
  let worker: DeliveryWorker | undefined;
  let status: OutboxStatusView | undefined;
  let consumer: StreamConsumer | undefined;
  let spool: { release(): Promise<void> } | undefined;
  // Deliveries join their requests' traces when telemetry is configured (docs/operations.md "Tracing").
  const tracing =
    whole !== undefined && ownsClient
      ? openTracing(whole.telemetry.traces, {
          attributes: { 'router.component': 'billing-sidecar' },
          logger: log,
        })
      : undefined;
  if (configured) {
    client =
      opts.client ??
      createBillingClient(billing, {
        connections: opts.worker?.window ?? 16,
        logger: log,
        ...(tracing === undefined ? {} : { tracing }),
      });
    if (engine.kind === 'stream') {
      consumer = await startShardedConsumers({
        store: engine.store,
        billing,
        client,
        logger: log,
        window: opts.worker?.window,
      });
      // Events a gateway of this host spooled while Redis was away, and left behind when it stopped,
      // reach the stream from here too, not only when a gateway starts again.
      spool = await acquireEventSpool(billing.outboxDir, engine.store, log);
    } else {
      // The outbox directory and every slot other gateway processes of this host write.
      const slotted = await startSlottedDelivery({ ...opts.worker, config: billing, client, logger: log });
      worker = slotted;
      status = slotted.status;
    }
  } else if (billing.enabled) {
    log?.error('billing.enabled is true but base_url, project_id, api_key or extractor_rule_set_id is empty');
  }

  let closing = false;
  const routes: SidecarRoutes = new Map<string, RouteHandler>([
    ['GET /healthz', (_req, res) => sendJson(res, 200, { status: 'ok' })],
    [
      'GET /readyz',
      async (_req, res) => {
        const body: Record<string, unknown> = {
          status: closing ? 'stopping' : 'ready',
          billing: { enabled: billing.enabled, configured },
        };
        if (worker && status) {
          const c = worker.counters();
          const disk = await status.read();
          body.delivery = {
            pending: await worker.pending(),
            dead_lettered: disk.deadLettered,
            quarantined: disk.quarantined,
            ...deliveryCounters(c),
          };
        }
        if (consumer) {
          const c = consumer.counters();
          const s = await consumer.status().catch(() => undefined);
          body.store = { connected: s !== undefined };
          body.delivery = {
            consumer: consumer.name,
            pending: s?.pending ?? null,
            claimed: s?.claimed ?? null,
            dead_lettered: s?.deadLetter ?? null,
            reclaimed: c.reclaimed,
            ...deliveryCounters(c),
          };
        }
        sendJson(res, closing ? 503 : 200, body);
      },
    ],
  ]);
  const fromStream = consumer === undefined ? undefined : streamConsumerSources(consumer);
  const metrics = createSidecarMetrics(
    worker ?? fromStream?.delivery,
    status ?? fromStream?.deadLetters,
    tracing?.spans,
  );
  routes.set('GET /metrics', async (_req, res) => {
    const text = await metrics.text();
    res.writeHead(200, { 'content-type': metrics.contentType });
    res.end(text);
  });
  // The webhook listener needs the whole configuration (store block, gateway address).
  let webhook: WebhookRoute | undefined;
  if (whole !== undefined) {
    webhook = await createWebhookRoute(whole, { ...opts.webhook, log });
    if (webhook !== undefined) routes.set(webhook.key, webhook.handler);
  }
  if (worker) routes.set(...createReplayRoute(worker));
  for (const [key, handler] of opts.routes ?? []) routes.set(key, handler);

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    const handler = routes.get(`${req.method} ${path}`);
    if (!handler) {
      sendJson(res, 404, {
        error: { message: 'not found', type: 'invalid_request_error', code: 'not_found' },
      });
      return;
    }
    Promise.resolve()
      .then(() => handler(req, res))
      .catch((err: unknown) => {
        log?.error({ err: errorText(err), path }, 'sidecar route failed');
        if (!res.headersSent)
          sendJson(res, 500, { error: { message: 'internal error', type: 'server_error' } });
        else res.destroy();
      });
  });
  const listen = opts.listen ?? billing.listen;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(listen.port, listen.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await worker?.stop();
    await consumer?.stop();
    await spool?.release();
    if (ownsClient) await client?.close();
    await webhook?.close();
    throw err;
  }
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;
  log?.info({ url, billing_configured: configured }, 'router-billing listening');

  let closed: Promise<void> | undefined;
  function close(): Promise<void> {
    closed ??= (async () => {
      closing = true;
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await worker?.stop();
      await consumer?.stop();
      await spool?.release();
      if (ownsClient) await client?.close();
      await tracing?.shutdown().catch(() => undefined);
      server.closeAllConnections();
      await serverClosed;
      await webhook?.close();
      log?.info(worker ? { delivered: worker.counters().delivered } : {}, 'router-billing stopped');
    })();
    return closed;
  }

  return { worker, consumer, url, routes, close } satisfies Sidecar;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The counters both delivery paths report in /readyz. */
function deliveryCounters(c: {
  delivered: number;
  failedAttempts: number;
  inFlight: number;
  lastError: { code: string; at: string } | undefined;
}): Record<string, unknown> {
  return {
    delivered: c.delivered,
    failed_attempts: c.failedAttempts,
    in_flight: c.inFlight,
    last_error_code: c.lastError?.code ?? null,
    last_error_at: c.lastError?.at ?? null,
  };
}
