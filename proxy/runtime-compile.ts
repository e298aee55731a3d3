// Compiling a configuration without opening anything: provider files, the model registry, access keys
// and hook modules, each problem as a `file:line:col: message` diagnostic. `router -t` is checkRuntime;
// buildRuntime (proxy/runtime.ts) starts from the same result.

import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import { errorText } from '../common/errors.ts';
import { providerKeyEnvName } from '../common/provider-key-env.ts';
import type { Hook } from '../common/types.ts';
import { compileRegistry, type ModelRegistry } from '../config/models.ts';
import { type Authenticator, createAuthenticator } from '../hooks/builtin/auth.ts';
import type { ProviderOffer } from '../hooks/builtin/select-target.ts';
import {
  credentialSources,
  isCloudAuthOp,
  type ProviderCredentials,
  resolveProviderCredentials,
  ruleHasCredential,
} from '../hooks/credentials/index.ts';
import {
  baseUrlEnvName,
  formatDiagnostic,
  loadProviderDir,
  realtimeTranslatorApis,
} from '../hooks/dsl/index.ts';
import type { CompiledProvider, HookRef } from '../hooks/dsl/types.ts';
import { TRANSFORMS, TRANSLATORS, USAGE_PRESETS } from '../hooks/families/index.ts';
import { loadHookModule } from './hook-modules.ts';

export interface CompileOptions {
  readonly log: Logger;
  readonly env?: Record<string, string | undefined>;
}

/** What `router -t` asks of checkRuntime: the same, and a list for the configuration's warnings. */
export interface CheckOptions extends CompileOptions {
  /** Receives what is valid but will fail requests (a routed provider without its upstream key). */
  readonly warnings?: string[];
}

/** What compiling a configuration yields before any resource is opened. */
export interface Compiled {
  readonly diagnostics: string[];
  readonly providers: ReadonlyMap<string, CompiledProvider>;
  readonly registry: ModelRegistry;
  readonly authenticator: Authenticator;
  readonly globalCustom: Hook[];
  readonly ruleCustom: Map<HookRef, Hook>;
  /** Valid, but requests will fail: one line per routed provider without an upstream key. */
  readonly warnings: string[];
  /** What `x-router-provider` may name (providerOffers). */
  readonly offers: ReadonlyMap<string, ProviderOffer>;
  /** Each provider's cloud credentials and settings (hooks/credentials). */
  readonly credentials: ReadonlyMap<string, ProviderCredentials>;
}

/**
 * The configuration's problems as `file:line:col: message`, found by compiling it (provider files,
 * registry, keys, hook modules) without opening anything: no outbox, store, billing or network
 * connection, no file watch. `router -t` is this.
 */
export async function checkRuntime(config: RouterConfig, opts: CheckOptions): Promise<string[]> {
  const compiled = await compileRuntime(config, opts);
  opts.warnings?.push(...compiled.warnings);
  return compiled.diagnostics;
}

/** A provider the model registry routes to, whose rules send a credential, with no upstream key. */
export interface MissingProviderKey {
  readonly provider: string;
  /**
   * The variable that gives it a key (`ROUTER_PROVIDER_<NAME>_API_KEY`); undefined when the variable
   * alone would name another provider (a name with capitals, `_` or `.`: only the keys file can).
   */
  readonly variable: string | undefined;
  /** The keys file of the configuration, if it has one. */
  readonly keysFile: string | undefined;
  /** Registry ids routed to it, in the registry's order. */
  readonly models: readonly string[];
  /** Where its cloud credentials would come from, when its auth blocks name a cloud directive. */
  readonly cloud?: readonly string[];
  /** Its auth blocks also send a key (the cloud credentials' fallback). */
  readonly keyFallback?: boolean;
}

/** How many model ids a warning names before "and N more". */
const MODELS_NAMED = 3;

/** Whether a rule of the provider sends a credential (auth_bearer, auth_header_key, auth_query_key). */
function sendsCredential(provider: CompiledProvider): boolean {
  return provider.rules.some((rule) => rule.auth.some((op) => op.op !== 'auth_none'));
}

/**
 * Whether the gateway holds the credentials the provider's rules send (true when they send none). The one
 * place that decides it: an upstream key today; cloud credentials (Bedrock, Vertex, Entra) belong here.
 */
export function holdsCredentials(
  config: RouterConfig,
  provider: CompiledProvider,
  credentials?: ReadonlyMap<string, ProviderCredentials>,
): boolean {
  const creds = credentials?.get(provider.name);
  // Cloud credentials that are set but unusable (router -t names them): not offered.
  if (creds !== undefined && creds.problems.length > 0) return false;
  const keys = config.keys.providerKeys.get(provider.name) ?? [];
  return provider.rules.every((rule) => ruleHasCredential(rule.auth, creds, keys));
}

/** Each provider's cloud credentials, from the keys file and the environment (nothing is fetched). */
export function providerCredentials(
  config: RouterConfig,
  providers: ReadonlyMap<string, CompiledProvider>,
  env: Record<string, string | undefined>,
): Map<string, ProviderCredentials> {
  const out = new Map<string, ProviderCredentials>();
  for (const [name, provider] of providers) {
    out.set(
      name,
      resolveProviderCredentials({
        provider,
        keys: config.keys.providerKeys.get(name) ?? [],
        file: config.keys.cloudCredentials?.get(name),
        env,
        connectTimeoutMs: config.limits.upstreamConnectTimeoutMs,
      }),
    );
  }
  return out;
}

/**
 * What `x-router-provider` may name, for every loaded provider: one whose credentials the gateway holds.
 * One whose rules send none (a local server) only when the registry routes to it or
 * ROUTER_PROVIDER_<NAME>_BASE_URL is set: otherwise a client could send the gateway to a default address
 * (127.0.0.1:11434) that the operator never chose.
 */
export function providerOffers(
  config: RouterConfig,
  providers: ReadonlyMap<string, CompiledProvider>,
  env: Record<string, string | undefined>,
  credentials?: ReadonlyMap<string, ProviderCredentials>,
): Map<string, ProviderOffer> {
  const routed = new Set(config.models.entries.flatMap((entry) => entry.routes.map((r) => r.provider)));
  const offers = new Map<string, ProviderOffer>();
  for (const [name, provider] of providers) {
    let offer: ProviderOffer = 'offered';
    if (!holdsCredentials(config, provider, credentials)) offer = 'no_credentials';
    else if (!sendsCredential(provider) && !routed.has(name) && (env[baseUrlEnvName(name)] ?? '') === '')
      offer = 'not_set_up';
    offers.set(name, offer);
  }
  return offers;
}

/**
 * Providers that requests will reach (the registry routes to them) and that will refuse every such request
 * with 503 provider_key_missing: a rule of theirs sends a credential (auth_bearer, auth_header_key,
 * auth_query_key) and neither the keys file nor ROUTER_PROVIDER_<NAME>_API_KEY gives them a key. A provider
 * whose rules send none (no auth block, or auth_none: a local server) needs no key.
 */
export function missingProviderKeys(
  config: RouterConfig,
  providers: ReadonlyMap<string, CompiledProvider>,
  credentials?: ReadonlyMap<string, ProviderCredentials>,
): MissingProviderKey[] {
  const routed = new Map<string, string[]>();
  for (const entry of config.models.entries) {
    for (const route of entry.routes) {
      const models = routed.get(route.provider) ?? [];
      if (!models.includes(entry.id)) models.push(entry.id);
      routed.set(route.provider, models);
    }
  }
  const missing: MissingProviderKey[] = [];
  for (const [name, models] of routed) {
    const provider = providers.get(name);
    // An unknown provider is a diagnostic of its own.
    if (provider === undefined) continue;
    if (holdsCredentials(config, provider, credentials)) continue;
    // Set but unusable cloud credentials have their own warning.
    if ((credentials?.get(name)?.problems.length ?? 0) > 0) continue;
    const variable = providerKeyEnvName(name);
    // The keys loader gives the variable to the provider of this spelling when the keys file names none.
    const reaches = variable
      .slice('ROUTER_PROVIDER_'.length, -'_API_KEY'.length)
      .toLowerCase()
      .replaceAll('_', '-');
    const cloud = new Map<string, string>();
    for (const rule of provider.rules)
      for (const op of rule.auth) if (isCloudAuthOp(op)) cloud.set(op.op, credentialSources(op, name));
    missing.push({
      provider: name,
      variable: reaches === name ? variable : undefined,
      keysFile: config.keys.file,
      models,
      ...(cloud.size > 0
        ? {
            cloud: [...cloud.values()],
            keyFallback: provider.rules.some((rule) =>
              rule.auth.some((op) => !isCloudAuthOp(op) && op.op !== 'auth_none'),
            ),
          }
        : {}),
    });
  }
  return missing;
}

/** The one-line warning for a provider without its key: what fails, and the variable or entry to set. */
export function missingProviderKeyWarning(m: MissingProviderKey): string {
  const named = m.models.slice(0, MODELS_NAMED).join(', ');
  const more = m.models.length - MODELS_NAMED;
  const models = more > 0 ? `${named} and ${more} more` : named;
  const entry =
    m.keysFile === undefined
      ? `providers.${m.provider}.api_key to a keys file (\`keys:\` of the main file)`
      : `providers.${m.provider}.api_key to the keys file ${m.keysFile}`;
  const fix = m.variable === undefined ? `add ${entry}` : `set ${m.variable} or add ${entry}`;
  if (m.cloud !== undefined) {
    const key = m.keyFallback === true ? `; or ${fix}` : '';
    return `provider '${m.provider}' has no credentials: requests for ${models} will be refused with 503 provider_key_missing; set ${m.cloud.join('; or ')}${key}`;
  }
  return `provider '${m.provider}' has no upstream API key: requests for ${models} will be refused with 503 provider_key_missing; ${fix}`;
}

/** The access keys of the keys file (and ROUTER_ACCESS_KEY_*) as the gateway checks them. */
export function fileAuthenticator(config: RouterConfig, keys: RouterConfig['keys']): Authenticator {
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

export async function compileRuntime(config: RouterConfig, opts: CompileOptions): Promise<Compiled> {
  const diagnostics: string[] = [];
  const env = opts.env ?? process.env;
  const log = opts.log;
  const registries = {
    translators: new Set(TRANSLATORS.keys()),
    transforms: new Set([...TRANSFORMS.keys(), ...TRANSLATORS.keys()]),
    usagePresets: new Set(USAGE_PRESETS.keys()),
    realtimeTranslators: realtimeTranslatorApis(),
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
  // With `workers: n` every worker compiles the same configuration: the first one says what is wrong.
  const workerId = (opts.env ?? process.env).ROUTER_WORKER_ID;
  const warn = (fields: object, msg: string) =>
    workerId === undefined || workerId === '1' ? log.warn(fields, msg) : log.debug(fields, msg);
  if (!authenticator.configured && !storeKeys) {
    warn({}, 'no access keys and no master key are configured: every request will be refused with 401');
  }

  const globalCustom: Hook[] = [];
  for (const ref of config.hooks) {
    try {
      globalCustom.push(await loadHookModule(ref.module, ref.options, config.file));
    } catch (err) {
      diagnostics.push(`${config.file}:0:0: hook ${ref.module}: ${errorText(err)}`);
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
            `${ref.loc.file}:${ref.loc.line}:${ref.loc.col}: hook ${ref.module}: ${errorText(err)}`,
          );
        }
      }
    }
  }
  const warnings: string[] = [];
  const credentials = providerCredentials(config, providers, env);
  if (diagnostics.length === 0) {
    for (const [provider, creds] of credentials) {
      for (const problem of creds.problems) {
        const warning = `${problem}; the provider is not offered until this is fixed`;
        warnings.push(warning);
        warn({ provider }, warning);
      }
    }
    for (const missing of missingProviderKeys(config, providers, credentials)) {
      const warning = missingProviderKeyWarning(missing);
      warnings.push(warning);
      warn(
        {
          provider: missing.provider,
          variable: missing.variable,
          keysFile: missing.keysFile,
          models: missing.models.slice(0, MODELS_NAMED),
          moreModels: Math.max(0, missing.models.length - MODELS_NAMED),
        },
        warning,
      );
    }
  }
  const offers = providerOffers(config, providers, env, credentials);
  return {
    diagnostics,
    providers,
    registry,
    authenticator,
    globalCustom,
    ruleCustom,
    warnings,
    offers,
    credentials,
  };
}
