// The compiled configuration: everything a request needs, built once per load (start and reload) from
// the validated RouterConfig. Requests only read it. Building it is where every name is resolved
// (providers, translators, transforms, presets, hook modules), so a broken configuration is refused
// before it can serve a request.

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import { describeError } from '../common/errors.ts';
import type { GatewayMetrics } from '../common/gateway-metrics.ts';
import type { StoreHealth } from '../common/store-types.ts';
import type {
  ApiName,
  Hook,
  HookModule,
  JsonValue,
  Principal,
  RequestContext,
  WireFormat,
} from '../common/types.ts';
import {
  type Authenticator,
  createAuthenticator,
  createAuthHook,
  createStoreAuthenticator,
  createStoreAuthHook,
  presentedSecret,
} from '../hooks/builtin/auth.ts';
import { createRuleHook } from '../hooks/builtin/provider-rule.ts';
import { createSelectTargetHook } from '../hooks/builtin/select-target.ts';
import { createUsageMeterHook, rulePreset } from '../hooks/builtin/usage-meter.ts';
import { formatDiagnostic, loadProviderDir, matchRule } from '../hooks/dsl/index.ts';
import type { CompiledProvider, CompiledRule, HookRef } from '../hooks/dsl/types.ts';
import { TRANSFORMS } from '../hooks/transforms/index.ts';
import { TRANSLATORS } from '../hooks/translators/index.ts';
import { estimateUsageSteps } from '../hooks/usage/estimate.ts';
import { createPathExtractor, USAGE_PRESETS } from '../hooks/usage/presets.ts';
import { openStateStore } from '../store/index.ts';
import { compileRegistry, type ModelRegistry } from './config/models.ts';
import { watchKeysFile } from './keys-watch.ts';
import { settleUsage } from './metering.ts';
import { createGatewayMetrics } from './metrics.ts';
import type { SidecarStatus } from './sidecar-status.ts';
import { UpstreamClient, type UpstreamTimeouts } from './upstream.ts';
import { forwardToSidecar } from './webhook-forward.ts';

/** The hooks that apply to one matched rule, in stage order, computed once per rule. */
export interface RuleHooks {
  readonly rewrite: readonly Hook[];
  /** Response hooks: the usage meter first (it reads the upstream's own format), then transforms. */
  readonly response: readonly Hook[];
  readonly complete: readonly Hook[];
  /** Every response hook only observes: upstream bytes go to the client untouched. */
  readonly observeOnly: boolean;
  /** Keep delivered output for usage estimation (billing on). */
  readonly keepDelivered: boolean;
  readonly timeouts: UpstreamTimeouts;
}

export interface ReadyReport {
  ready: boolean;
  providers: number;
  billing: { configured: boolean; enabled: boolean; pending?: number; dead_letter?: number };
  store: { enabled: boolean; connected?: boolean };
  [key: string]: JsonValue;
}

/** Pieces billing plugs in (outbox, enqueue hook, readiness counts); absent when billing is off. */
export interface BillingParts {
  readonly hooks: readonly Hook[];
  /** The queue's pending batch of events (EventQueue.recorded), which a reply's last byte waits for. */
  readonly recorded?: () => Promise<void> | undefined;
  readiness(): Promise<{ pending: number; dead_letter: number } | undefined>;
  /** Balance enforcement: the sidecar's subject state notice (common/internal-notify.ts). */
  readonly stateNotice?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  close(): Promise<void>;
}

export interface Runtime {
  readonly config: RouterConfig;
  readonly log: Logger;
  readonly providers: ReadonlyMap<string, CompiledProvider>;
  readonly upstream: UpstreamClient;
  readonly metrics: GatewayMetrics;
  /** onRequest and selectTarget hooks, in order. */
  readonly requestHooks: readonly Hook[];
  /** onComplete hooks of requests that never reached a rule. */
  readonly completeHooks: readonly Hook[];
  matchRule(provider: CompiledProvider, api: ApiName, stream: boolean): CompiledRule | undefined;
  ruleHooks(provider: string, rule: CompiledRule): RuleHooks;
  /** Authenticate a request outside the proxy pipeline (GET /v1/models), with the same key sources. */
  authenticate(headers: IncomingHttpHeaders, query: URLSearchParams): Promise<Principal>;
  modelList(format: WireFormat): JsonValue;
  modelInfo(format: WireFormat, id: string): JsonValue | undefined;
  readiness(): Promise<ReadyReport>;
  metricsText(): Promise<string>;
  forwardWebhook(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** The sidecar's subject state notice; 404 unless balance enforcement is on. */
  stateNotice(req: IncomingMessage, res: ServerResponse): Promise<void>;
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
  close(): Promise<void>;
}

export interface BuildOptions {
  readonly log: Logger;
  readonly env?: Record<string, string | undefined>;
  /** Reuse across reloads so keep-alive pools and counters survive. */
  readonly upstream?: UpstreamClient;
  readonly metrics?: GatewayMetrics;
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
}

export interface BuildResult {
  readonly runtime: Runtime | undefined;
  /** `file:line:col: message` lines. */
  readonly diagnostics: string[];
}

/**
 * A hook module's URL: a file path as it is, a bare package name resolved the way Node resolves it
 * from `fromFile`'s folder (the configuration or provider file naming it), not from the gateway's.
 */
export function hookModuleUrl(module: string, fromFile: string): string {
  if (isAbsolute(module)) return pathToFileURL(module).href;
  try {
    return pathToFileURL(createRequire(resolve(fromFile)).resolve(module)).href;
  } catch (err) {
    // Node's message goes on with a require stack; a diagnostic is one line.
    throw new Error(
      `${describeError(err).message.split('\n')[0]} (looked up from ${dirname(resolve(fromFile))})`,
    );
  }
}

/** Load a custom hook module: `createHook(options)` (named or default export). */
export async function loadHookModule(
  module: string,
  options: Readonly<Record<string, JsonValue>>,
  fromFile: string,
): Promise<Hook> {
  const mod = (await import(hookModuleUrl(module, fromFile))) as Partial<HookModule> & {
    default?: Partial<HookModule>;
  };
  const create = mod.createHook ?? mod.default?.createHook;
  if (typeof create !== 'function') throw new Error(`${module}: exports no createHook(options) function`);
  const hook = await create(options);
  if (hook === null || typeof hook !== 'object' || typeof hook.name !== 'string') {
    throw new Error(`${module}: createHook() must return an object with a name`);
  }
  return hook;
}

/** What compiling a configuration yields before any resource is opened. */
interface Compiled {
  readonly diagnostics: string[];
  readonly providers: ReadonlyMap<string, CompiledProvider>;
  readonly registry: ModelRegistry;
  readonly authenticator: Authenticator;
  readonly globalCustom: Hook[];
  readonly ruleCustom: Map<HookRef, Hook>;
}

/**
 * The configuration's problems as `file:line:col: message`, found by compiling it (provider files,
 * registry, keys, hook modules) without opening anything: no outbox, store, billing or network
 * connection, no file watch. `router -t` is this.
 */
export async function checkRuntime(
  config: RouterConfig,
  opts: Pick<BuildOptions, 'log' | 'env'>,
): Promise<string[]> {
  return (await compileRuntime(config, opts)).diagnostics;
}

/** The access keys of the keys file (and ROUTER_ACCESS_KEY_*) as the gateway checks them. */
function fileAuthenticator(config: RouterConfig, keys: RouterConfig['keys']): Authenticator {
  return createAuthenticator({
    keys:
      config.store.enabled && config.store.accessKeyMode === 'redis_only'
        ? { ...keys, accessKeys: [] }
        : keys,
    masterKey: config.masterKey,
    subjectType: config.billing.subjectType,
    fallbackSubjectId: config.billing.fallbackSubjectId,
    hashSecret: config.store.accessKeyHashSecret === '' ? undefined : config.store.accessKeyHashSecret,
  });
}

async function compileRuntime(
  config: RouterConfig,
  opts: Pick<BuildOptions, 'log' | 'env'>,
): Promise<Compiled> {
  const diagnostics: string[] = [];
  const env = opts.env ?? process.env;
  const log = opts.log;
  const registries = {
    translators: new Set(TRANSLATORS.keys()),
    transforms: new Set([...TRANSFORMS.keys(), ...TRANSLATORS.keys()]),
    usagePresets: new Set(USAGE_PRESETS.keys()),
  };
  const loaded = await loadProviderDir(config.providersDir, { registries, env });
  for (const d of loaded.diagnostics) diagnostics.push(formatDiagnostic(d));
  const providers = loaded.providers;

  const registry: ModelRegistry = compileRegistry(config.models.entries);
  for (const entry of config.models.entries) {
    for (const route of entry.routes) {
      if (!providers.has(route.provider)) {
        diagnostics.push(
          `${config.models.file ?? config.file}:0:0: model '${entry.id}' routes to unknown provider '${route.provider}'`,
        );
      }
    }
  }

  // Shared-store mode looks access keys up in the store (docs/operations.md "Managing access keys");
  // redis_only ignores the file's keys.
  const storeKeys = config.store.enabled && config.store.accessKeyMode !== 'file_only';
  const authenticator = fileAuthenticator(config, config.keys);
  if (!authenticator.configured && !storeKeys) {
    log.warn('no access keys and no master key are configured: every request will be refused with 401');
  }

  const globalCustom: Hook[] = [];
  for (const ref of config.hooks) {
    try {
      globalCustom.push(await loadHookModule(ref.module, ref.options, config.file));
    } catch (err) {
      diagnostics.push(`${config.file}:0:0: hook ${ref.module}: ${describeError(err).message}`);
    }
  }
  const ruleCustom = new Map<HookRef, Hook>();
  for (const provider of providers.values()) {
    for (const rule of provider.rules) {
      for (const ref of rule.hooks) {
        if (ruleCustom.has(ref)) continue;
        try {
          ruleCustom.set(ref, await loadHookModule(ref.module, ref.options, ref.loc.file));
        } catch (err) {
          diagnostics.push(
            `${ref.loc.file}:${ref.loc.line}:${ref.loc.col}: hook ${ref.module}: ${describeError(err).message}`,
          );
        }
      }
    }
  }
  return { diagnostics, providers, registry, authenticator, globalCustom, ruleCustom };
}

export async function buildRuntime(config: RouterConfig, opts: BuildOptions): Promise<BuildResult> {
  const compiled = await compileRuntime(config, opts);
  const { diagnostics, providers, registry, globalCustom, ruleCustom } = compiled;
  if (diagnostics.length > 0) return { runtime: undefined, diagnostics };
  const log = opts.log;
  const storeKeys = config.store.enabled && config.store.accessKeyMode !== 'file_only';

  const metrics = opts.metrics ?? createGatewayMetrics();
  // Access keys of the keys file follow the file while this runtime serves (proxy/keys-watch.ts).
  let fileAuth = compiled.authenticator;
  const authenticator: Authenticator = {
    get configured() {
      return fileAuth.configured;
    },
    authenticate: (secret) => fileAuth.authenticate(secret),
  };
  const billing =
    config.billing.enabled && opts.billing !== undefined
      ? await opts.billing(config, log, metrics)
      : undefined;
  const billingHooks = billing?.hooks ?? [];
  const upstream =
    opts.upstream ?? new UpstreamClient({ connectTimeoutMs: config.limits.upstreamConnectTimeoutMs });

  const keyStore = storeKeys ? await openStateStore(config, { role: 'gateway', logger: log }) : undefined;
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
  const requestHooks: Hook[] = [
    keyStore === undefined || storeAuth === undefined
      ? createAuthHook(authenticator)
      : createStoreAuthHook(storeAuth, keyStore),
    ...billingHooks.filter((h) => h.onRequest !== undefined),
    ...(opts.extraHooks ?? []),
    ...globalCustom,
    createSelectTargetHook(registry, new Set(providers.keys())),
  ];
  const globalResponse = globalCustom.filter(
    (h) => h.onResponseChunk !== undefined || h.onResponseEnd !== undefined || h.onResponseHead !== undefined,
  );
  const globalRewrite = globalCustom.filter((h) => h.rewriteBody !== undefined);
  // Billing goes first: its synchronous part (building the event and writing it to the outbox) must
  // run before the reply's last byte, with nothing awaited ahead of it (proxy/server.ts finish()).
  const billingComplete = billingHooks.filter((h) => h.onComplete !== undefined);
  const globalComplete = globalCustom.filter((h) => h.onComplete !== undefined);
  const completeHooks: Hook[] = [...billingComplete, ...globalComplete];

  const perRule = new Map<CompiledRule, RuleHooks>();
  for (const [name, provider] of providers) {
    const keys = config.keys.providerKeys.get(name) ?? [];
    for (const rule of provider.rules) {
      const ruleHook = createRuleHook(rule, {
        provider: name,
        translators: TRANSLATORS,
        transforms: TRANSFORMS,
        keys,
      });
      const custom = rule.hooks.map((ref) => ruleCustom.get(ref)!);
      const preset = rulePreset(rule, { presets: USAGE_PRESETS, pathExtractor: createPathExtractor });
      const response: Hook[] = [];
      if (preset !== undefined) response.push(createUsageMeterHook(preset));
      if (ruleHook.onResponseChunk !== undefined) response.push(ruleHook);
      response.push(
        ...custom.filter(
          (h) =>
            h.onResponseChunk !== undefined ||
            h.onResponseEnd !== undefined ||
            h.onResponseHead !== undefined,
        ),
      );
      response.push(...globalResponse);
      perRule.set(rule, {
        rewrite: [ruleHook, ...custom.filter((h) => h.rewriteBody !== undefined), ...globalRewrite],
        response,
        complete: [
          ...billingComplete,
          ...custom.filter((h) => h.onComplete !== undefined),
          ...globalComplete,
        ],
        observeOnly: response.every((h) => h.responseMode === 'observe'),
        keepDelivered: config.billing.enabled,
        timeouts: {
          headersTimeoutMs: rule.upstreamConfig.headersTimeoutMs ?? config.limits.upstreamHeadersTimeoutMs,
          bodyTimeoutMs: rule.upstreamConfig.bodyTimeoutMs ?? config.limits.upstreamBodyTimeoutMs,
        },
      });
    }
  }

  const created = Math.floor(Date.now() / 1000);
  const listed = registry.listed();
  const openaiModel = (id: string, ownedBy: string | undefined): JsonValue => ({
    id,
    object: 'model',
    created,
    owned_by: ownedBy ?? 'router',
  });
  const geminiModel = (id: string): JsonValue => ({
    name: `models/${id}`,
    version: '1',
    displayName: id,
    supportedGenerationMethods: id.includes('embedding')
      ? ['embedContent', 'batchEmbedContents']
      : ['generateContent', 'streamGenerateContent'],
  });
  const openaiList: JsonValue = { object: 'list', data: listed.map((e) => openaiModel(e.id, e.ownedBy)) };
  const geminiList: JsonValue = { models: listed.map((e) => geminiModel(e.id)) };

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
  // An estimate that settle() left running, until the same completion's recorded() takes it.
  let settling: Promise<void> | undefined;
  const runtime: Runtime = {
    config,
    log,
    providers,
    upstream,
    metrics,
    requestHooks,
    completeHooks,
    matchRule,
    ruleHooks(_provider, rule) {
      const hooks = perRule.get(rule);
      if (hooks === undefined) throw new Error('rule not compiled into this runtime');
      return hooks;
    },
    async authenticate(headers, query) {
      const secret = presentedSecret(headers, query);
      if (storeAuth === undefined || keyStore === undefined) return authenticator.authenticate(secret);
      return storeAuth.authenticate(secret, (q) => keyStore.view(q), log);
    },
    modelList(format) {
      return format === 'gemini' ? geminiList : openaiList;
    },
    modelInfo(format, id) {
      const bare = id.startsWith('models/') ? id.slice('models/'.length) : id;
      const entry = registry.resolve(bare);
      if (entry === undefined) return undefined;
      return format === 'gemini' ? geminiModel(bare) : openaiModel(bare, entry.ownedBy);
    },
    async readiness() {
      const counts = billing === undefined ? undefined : await billing.readiness().catch(() => undefined);
      const sidecar = opts.sidecar?.supervised === true ? opts.sidecar.state : undefined;
      return {
        ready: providers.size > 0 && (sidecar === undefined || sidecar === 'up'),
        providers: providers.size,
        ...(sidecar === undefined ? {} : { sidecar: { supervised: true, state: sidecar } }),
        billing: {
          configured: config.billing.enabled && config.billing.baseUrl !== '',
          enabled: config.billing.enabled,
          ...(counts === undefined ? {} : { pending: counts.pending, dead_letter: counts.dead_letter }),
        },
        store: {
          enabled: config.store.enabled,
          ...(keyStore === undefined ? {} : storeReadiness(await keyStore.health())),
        },
      };
    },
    metricsText() {
      return metrics.registry.metrics();
    },
    async stateNotice(req, res) {
      if (billing?.stateNotice !== undefined) return billing.stateNotice(req, res);
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"Unknown endpoint","type":"invalid_request_error","code":"not_found"}}');
    },
    async forwardWebhook(req, res) {
      await forwardToSidecar(config, req, res, log, opts.sidecar);
    },
    settle(ctx) {
      if (!config.billing.enabled) return undefined;
      const pending = settleUsage(ctx, estimateUsageSteps);
      if (pending !== undefined) {
        // recorded() is asked right after settle() by the same completion (proxy/server.ts).
        settling = pending;
        queueMicrotask(() => {
          if (settling === pending) settling = undefined;
        });
      }
      return pending;
    },
    observe(ctx, durationMs) {
      metrics.observeRequest(ctx, durationMs);
    },
    recorded() {
      const pending = settling;
      settling = undefined;
      // The event is queued when the estimate is done (the completion resumes before this callback).
      if (pending !== undefined) return pending.then(() => billing?.recorded?.());
      return billing?.recorded?.();
    },
    async close() {
      keysWatch?.close();
      await billing?.close();
      await keyStore?.close();
    },
  };
  return { runtime, diagnostics };
}

/** The store block of /readyz: connected, and the view cache's state in Redis mode. */
function storeReadiness(health: StoreHealth): Record<string, unknown> {
  if (health.viewCache === undefined) return { connected: health.connected };
  return {
    connected: health.connected,
    view_cache: {
      live: health.viewCache.live,
      entries: health.viewCache.entries,
      invalidations: health.viewCache.invalidations,
    },
  };
}
