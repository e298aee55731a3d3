// The compiled configuration: everything a request needs, built once per load (start and reload) from
// the validated RouterConfig. Requests only read it. Building it is where every name is resolved
// (providers, translators, transforms, presets, hook modules), so a broken configuration is refused
// before it can serve a request. Compiling is proxy/runtime-compile.ts, each rule's hooks
// proxy/rule-hooks.ts, model lists proxy/model-list.ts, the runtime's endpoints proxy/runtime-endpoints.ts.

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import type { ResponseStore } from '../common/response-store-types.ts';
import type { StateStore, StoreHealth, SubjectRef } from '../common/store-types.ts';
import { openTracing, type Tracing } from '../common/tracing.ts';
import type { ApiName, Hook, JsonValue, Principal, RequestContext, WireFormat } from '../common/types.ts';
import { isPattern } from '../config/models.ts';
import {
  type Authenticator,
  createAuthHook,
  createStoreAuthenticator,
  createStoreAuthHook,
  presentedSecret,
} from '../hooks/builtin/auth.ts';
import {
  type ClientSecrets,
  createClientSecrets,
  withClientSecrets,
} from '../hooks/builtin/client-secrets.ts';
import { createStoredResponsesHooks } from '../hooks/builtin/response-state.ts';
import { createSelectTargetHook } from '../hooks/builtin/select-target.ts';
import { matchRule } from '../hooks/dsl/index.ts';
import type { CompiledProvider, CompiledRule } from '../hooks/dsl/types.ts';
import { tokenCountOf } from '../hooks/families/index.ts';
import { estimateUsageSteps } from '../hooks/usage/estimate.ts';
import { openStateStore } from '../store/index.ts';
import { MemoryResponses } from '../store/memory-response-store.ts';
import { createBillingOffHook } from './enqueue-hook.ts';
import { watchKeysFile } from './keys-watch.ts';
import { settleUsage } from './metering.ts';
import { createGatewayMetrics } from './metrics.ts';
import { createModelListing } from './model-list.ts';
import { limitsConfigured, openRateLimiter } from './rate-limit-wiring.ts';
import { compileRuleHooks, type RuleHooks } from './rule-hooks.ts';
import { checkRuntime, compileRuntime, fileAuthenticator } from './runtime-compile.ts';
import { createEndpoints, type ReadyReport } from './runtime-endpoints.ts';
import type { SidecarStatus } from './sidecar-status.ts';
import { UpstreamClient } from './upstream.ts';
import type { ClusterLink } from './workers/worker-link.ts';

export type { ReadyReport, RuleHooks };
export { checkRuntime };

export interface BillingParts {
  readonly hooks: readonly Hook[];
  /** The queue's pending batch of events (EventQueue.recorded), which a reply's last byte waits for. */
  readonly recorded?: () => Promise<void> | undefined;
  readiness(): Promise<{ pending: number; dead_letter: number } | undefined>;
  /** Shared-store mode: the health of billing's own connection to it, for /readyz. */
  readonly storeHealth?: () => Promise<StoreHealth>;
  /** Balance enforcement: the sidecar's subject state notice (common/internal-notify.ts). */
  readonly stateNotice?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /** What that notice does, for a notice the primary relays to this worker (proxy/workers/). */
  readonly applySubjectState?: (subject: SubjectRef) => Promise<void>;
  close(): Promise<void>;
}

export interface Runtime {
  readonly config: RouterConfig;
  readonly log: Logger;
  readonly providers: ReadonlyMap<string, CompiledProvider>;
  readonly upstream: UpstreamClient;
  readonly metrics: GatewayMetrics;
  /** Traces (common/tracing.ts); `enabled` false when off. */
  readonly tracing: Tracing;
  /** onRequest and selectTarget hooks, in order. */
  readonly requestHooks: readonly Hook[];
  /** onComplete hooks of requests that never reached a rule. */
  readonly completeHooks: readonly Hook[];
  matchRule(
    provider: CompiledProvider,
    api: ApiName,
    stream: boolean,
    model?: string,
  ): CompiledRule | undefined;
  ruleHooks(provider: string, rule: CompiledRule): RuleHooks;
  /** Authenticate a request outside the proxy pipeline (GET /v1/models), with the same key sources. */
  authenticate(headers: IncomingHttpHeaders, query: URLSearchParams): Promise<Principal>;
  /** Short-lived secrets for realtime sessions (POST /v1/realtime/client_secrets). */
  readonly clientSecrets: ClientSecrets;
  /** The family's model list as the principal may see it (a key's model list hides the others). */
  modelList(format: WireFormat, principal?: Principal): JsonValue;
  modelInfo(format: WireFormat, id: string, principal?: Principal): JsonValue | undefined;
  readiness(): Promise<ReadyReport>;
  metricsText(): Promise<string>;
  forwardWebhook(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** The sidecar's subject state notice; 404 unless balance enforcement is on. */
  stateNotice(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** Reload a subject's state and drop its cached balance (a relayed notice); no-op without enforcement. */
  applySubjectState(subject: SubjectRef): Promise<void>;
  /**
   * Settle the request's usage (proxy/metering.ts); a promise when the estimate runs over several
   * event-loop turns, which the caller awaits before reporting.
   */
  settle(ctx: RequestContext): Promise<void> | undefined;
  observe(ctx: RequestContext, durationMs: number): void;
  /**
   * After a request completed: the promise that its usage event is on record, when the queue batches
   * (the reply's last byte waits for it); undefined when it already is, or billing is off.
   */
  recorded(): Promise<void> | undefined;
  /** A realtime session ended: what it holds of the rate limits is released. */
  endSession(ctx: RequestContext): void;
  /** Throws model_not_allowed when the principal's model list does not allow the model. */
  checkModel(principal: Principal | undefined, model: string): void;
  /**
   * Stored responses (hooks/builtin/response-state.ts): the shared store's, or file mode's in-process
   * one (the primary's with workers); undefined when responses.store_ttl_s is 0.
   */
  readonly responses: ResponseStore | undefined;
  close(): Promise<void>;
}

export interface BuildOptions {
  readonly log: Logger;
  readonly env?: Record<string, string | undefined>;
  /** Reuse across reloads so keep-alive pools and counters survive. */
  readonly upstream?: UpstreamClient;
  readonly metrics?: GatewayMetrics;
  /** One per process (reloads reuse it: telemetry changes take a restart); opened from the configuration when not given. */
  readonly tracing?: Tracing;
  /** Built by the billing wiring (proxy/billing-wiring.ts) when billing is enabled. */
  readonly billing?: (
    config: RouterConfig,
    log: Logger,
    metrics: GatewayMetrics,
  ) => Promise<BillingParts | undefined>;
  /** Extra hooks placed after auth (tests, embedders). */
  readonly extraHooks?: readonly Hook[];
  /** The supervised sidecar: readiness waits for it, webhooks wait briefly for it. */
  readonly sidecar?: SidecarStatus;
  /** Set in a worker of `workers: n`: /metrics and /readyz speak for all workers. */
  readonly cluster?: ClusterLink;
  /** File mode's stored responses of this process, kept across reloads (made when not given). */
  readonly responseStore?: ResponseStore;
}

export interface BuildResult {
  readonly runtime: Runtime | undefined;
  /** `file:line:col: message` lines. */
  readonly diagnostics: string[];
}

export async function buildRuntime(config: RouterConfig, opts: BuildOptions): Promise<BuildResult> {
  const compiled = await compileRuntime(config, opts);
  const { diagnostics, providers, registry, globalCustom, ruleCustom } = compiled;
  if (diagnostics.length > 0) return { runtime: undefined, diagnostics };
  const log = opts.log;
  const metrics = opts.metrics ?? createGatewayMetrics();
  const billing =
    config.billing.enabled && opts.billing !== undefined
      ? await opts.billing(config, log, metrics)
      : undefined;
  // Billing off still counts what it serves (proxy/enqueue-hook.ts), for the served-billed gap.
  const billingHooks = billing?.hooks ?? [createBillingOffHook(metrics)];
  const upstream =
    opts.upstream ?? new UpstreamClient({ connectTimeoutMs: config.limits.upstreamConnectTimeoutMs });
  const keys = await openAccessKeys(config, opts, compiled.authenticator, metrics);
  // file_only keys with a shared store: the counters are still the store's, opened only when some limit
  // is configured (a connection, and a wait for it at every start, that nothing else needs).
  const limitStore =
    keys.store ??
    (config.store.enabled && limitsConfigured(config)
      ? await openStateStore(config, { role: 'gateway', logger: log, onStoreError: storeError(metrics) })
      : undefined);
  const limiter = openRateLimiter(config, limitStore, opts.cluster, metrics);
  const responseState =
    config.responses.storeTtlS > 0 && config.store.enabled
      ? (keys.store ??
        limitStore ??
        (await openStateStore(config, { role: 'gateway', logger: log, onStoreError: storeError(metrics) })))
      : undefined;
  const responses =
    config.responses.storeTtlS <= 0
      ? undefined
      : config.store.enabled
        ? responseState?.responses
        : (opts.cluster?.responses ?? opts.responseStore ?? new MemoryResponses());
  const stored = createStoredResponsesHooks({ store: responses, config: config.responses });

  const requestHooks: Hook[] = [
    keys.hook,
    limiter.hook,
    ...billingHooks.filter((h) => h.onRequest !== undefined),
    ...(opts.extraHooks ?? []),
    // Before the configured hooks: they see the request as it will go upstream, references resolved.
    stored.request,
    ...globalCustom,
    createSelectTargetHook(registry, compiled.offers),
  ];
  // Billing goes first: its synchronous part (building the event and writing it to the outbox) must run
  // before the reply's last byte, nothing awaited ahead of it (proxy/request-completion.ts finish()).
  const billingComplete = billingHooks.filter((h) => h.onComplete !== undefined);
  const completeHooks: Hook[] = [
    ...billingComplete,
    limiter.hook,
    ...globalCustom.filter((h) => h.onComplete !== undefined),
  ];
  const perRule = compileRuleHooks(config, providers, {
    ruleCustom,
    globalCustom,
    billingComplete,
    limiter: limiter.hook,
    credentials: compiled.credentials,
    storedRecorder: stored.recorder,
  });
  const models = createModelListing(registry, (name, api) => {
    const provider = providers.get(name);
    return provider?.rules.some((r) => r.api === api) === true;
  });
  // The GenAI metrics label a request's model only by an id listed exactly (clients choose the rest).
  const modelIds: ReadonlySet<string> = new Set(
    config.models.entries.filter((e) => !isPattern(e.id)).map((e) => e.id),
  );
  const endpoints = createEndpoints({
    config,
    log,
    providerCount: providers.size,
    billing,
    storeHealth: sharedStoreHealth(config, [keys.store, limitStore, responseState], billing),
    sidecar: opts.sidecar,
    cluster: opts.cluster,
  });

  // An estimate that settle() left running, until the same completion's recorded() takes it.
  let settling: Promise<void> | undefined;
  const tracing = opts.tracing ?? openTracing(config.telemetry.traces, { logger: log });
  metrics.trackTraces(tracing.spans);
  const runtime: Runtime = {
    config,
    log,
    providers,
    upstream,
    tracing,
    metrics,
    requestHooks,
    completeHooks,
    matchRule,
    ruleHooks(_provider, rule) {
      const hooks = perRule.get(rule);
      if (hooks === undefined) throw new Error('rule not compiled into this runtime');
      return hooks;
    },
    authenticate: keys.authenticate,
    clientSecrets: keys.clientSecrets,
    modelList: (format, principal) => models.list(format, limiter.modelsFor(principal)),
    modelInfo: (format, id, principal) => models.info(format, id, limiter.modelsFor(principal)),
    readiness: endpoints.readiness,
    metricsText() {
      return opts.cluster === undefined ? metrics.registry.metrics() : opts.cluster.metricsText();
    },
    stateNotice: endpoints.stateNotice,
    async applySubjectState(subject) {
      await billing?.applySubjectState?.(subject);
    },
    forwardWebhook: endpoints.forwardWebhook,
    settle(ctx) {
      if (!config.billing.enabled || tokenCountOf(ctx.api) !== undefined) return undefined;
      const pending = settleUsage(ctx, estimateUsageSteps);
      if (pending !== undefined) {
        // recorded() is asked right after settle() by the same completion (proxy/request-completion.ts).
        settling = pending;
        queueMicrotask(() => {
          if (settling === pending) settling = undefined;
        });
      }
      return pending;
    },
    observe(ctx, durationMs) {
      metrics.observeRequest(ctx, durationMs, modelIds);
    },
    recorded() {
      const pending = settling;
      settling = undefined;
      // The event is queued when the estimate is done (the completion resumes before this callback).
      if (pending !== undefined) return pending.then(() => billing?.recorded?.());
      return billing?.recorded?.();
    },
    endSession: limiter.release,
    checkModel: limiter.checkModel,
    responses,
    async close() {
      keys.close();
      limiter.close();
      if (limitStore !== keys.store) await limitStore?.close();
      if (responseState !== keys.store && responseState !== limitStore) await responseState?.close();
      await billing?.close();
      await keys.store?.close();
    },
  };
  return { runtime, diagnostics };
}

/** Counts a failed shared-store operation in router_store_errors_total{operation}. */
export function storeError(metrics: GatewayMetrics): (operation: string) => void {
  return (operation) => metrics.storeErrors.inc({ operation });
}

/**
 * The shared store's health for /readyz from a connection this runtime already holds (any will do: they
 * reach the one store), so file_only keys report it too; undefined in file mode.
 */
function sharedStoreHealth(
  config: RouterConfig,
  stores: readonly (StateStore | undefined)[],
  billing: BillingParts | undefined,
): (() => Promise<StoreHealth>) | undefined {
  if (!config.store.enabled) return undefined;
  const store = stores.find((s) => s !== undefined);
  if (store !== undefined) return () => store.health();
  return billing?.storeHealth;
}

/** Access keys while this runtime serves: the auth hook, authenticate() and what to close. */
interface AccessKeys {
  readonly hook: Hook;
  readonly clientSecrets: ClientSecrets;
  readonly store: StateStore | undefined;
  authenticate(headers: IncomingHttpHeaders, query: URLSearchParams): Promise<Principal>;
  close(): void;
}

/**
 * What client secrets are signed with: material every instance and worker of a deployment shares and no
 * client knows (the store's hash secret, else the configured keys and master key).
 */
function clientSecretMaterial(config: RouterConfig): string {
  if (config.store.enabled && config.store.accessKeyHashSecret !== '')
    return config.store.accessKeyHashSecret;
  const parts = config.keys.accessKeys.map((k) => `${k.name}:${k.hash ?? k.value ?? ''}`).sort();
  return [...parts, config.masterKey ?? ''].join('\n');
}

async function openAccessKeys(
  config: RouterConfig,
  opts: BuildOptions,
  fromFile: Authenticator,
  metrics: GatewayMetrics,
): Promise<AccessKeys> {
  const log = opts.log;
  // Access keys of the keys file follow the file while this runtime serves (proxy/keys-watch.ts).
  let fileAuth = fromFile;
  const authenticator: Authenticator = {
    get configured() {
      return fileAuth.configured;
    },
    authenticate: (secret) => fileAuth.authenticate(secret),
  };
  // Shared-store mode looks access keys up in the store; redis_only ignores the file's keys.
  const storeKeys = config.store.enabled && config.store.accessKeyMode !== 'file_only';
  const keyStore = storeKeys
    ? await openStateStore(config, { role: 'gateway', logger: log, onStoreError: storeError(metrics) })
    : undefined;
  const storeAuth =
    keyStore === undefined
      ? undefined
      : createStoreAuthenticator(authenticator, {
          store: keyStore,
          mode: config.store.accessKeyMode,
          hashSecret: config.store.accessKeyHashSecret,
          previousHashSecret: config.store.previousAccessKeyHashSecret,
          masterKey: config.masterKey,
          subjectType: config.billing.subjectType,
          currency: config.billing.balanceEnforcement.enabled
            ? config.billing.balanceEnforcement.currency
            : undefined,
        });
  const keysFile = config.keys.file;
  const keysWatch =
    keysFile === undefined || (config.store.enabled && config.store.accessKeyMode === 'redis_only')
      ? undefined
      : watchKeysFile({
          file: keysFile,
          env: opts.env ?? process.env,
          log,
          registry: metrics.registry,
          hashSecret: config.store.accessKeyHashSecret,
          masterKey: config.masterKey,
          apply(keys) {
            fileAuth = fileAuthenticator(config, keys);
          },
        });
  const clientSecrets = createClientSecrets(clientSecretMaterial(config));
  return {
    hook: withClientSecrets(
      keyStore === undefined || storeAuth === undefined
        ? createAuthHook(authenticator)
        : createStoreAuthHook(storeAuth, keyStore),
      clientSecrets,
    ),
    clientSecrets,
    store: keyStore,
    async authenticate(headers, query) {
      const secret = presentedSecret(headers, query);
      if (storeAuth === undefined || keyStore === undefined) return authenticator.authenticate(secret);
      return storeAuth.authenticate(
        secret,
        (q) => keyStore.view(q),
        () => log,
      );
    },
    close: () => keysWatch?.close(),
  };
}
