// Compiling a configuration without opening anything: provider files, the model registry, access keys
// and hook modules, each problem as a `file:line:col: message` diagnostic. `router -t` is checkRuntime;
// buildRuntime (proxy/runtime.ts) starts from the same result.

import type { Logger } from 'pino';
import type { RouterConfig } from '../common/config-types.ts';
import { describeError } from '../common/errors.ts';
import type { Hook } from '../common/types.ts';
import { type Authenticator, createAuthenticator } from '../hooks/builtin/auth.ts';
import { formatDiagnostic, loadProviderDir } from '../hooks/dsl/index.ts';
import type { CompiledProvider, HookRef } from '../hooks/dsl/types.ts';
import { TRANSLATORS, USAGE_PRESETS } from '../hooks/families/index.ts';
import { TRANSFORMS } from '../hooks/transforms/index.ts';
import { compileRegistry, type ModelRegistry } from './config/models.ts';
import { loadHookModule } from './hook-modules.ts';

export interface CompileOptions {
  readonly log: Logger;
  readonly env?: Record<string, string | undefined>;
}

/** What compiling a configuration yields before any resource is opened. */
export interface Compiled {
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
export async function checkRuntime(config: RouterConfig, opts: CompileOptions): Promise<string[]> {
  return (await compileRuntime(config, opts)).diagnostics;
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
