// The hooks of every compiled rule, in stage order, computed once per configuration load: a request
// looks its rule up and runs arrays (docs/architecture.md "The hook pipeline").

import type { RouterConfig } from '../common/config-types.ts';
import type { Hook } from '../common/types.ts';
import { createRuleHook } from '../hooks/builtin/provider-rule.ts';
import { createUsageMeterHook, rulePreset } from '../hooks/builtin/usage-meter.ts';
import {
  type ProviderCredentials,
  ruleAuthorizer,
  type UpstreamAuthorizer,
} from '../hooks/credentials/index.ts';
import type { CompiledProvider, CompiledRule, HookRef } from '../hooks/dsl/types.ts';
import { TRANSFORMS, TRANSLATORS, USAGE_PRESETS } from '../hooks/families/index.ts';
import { storedResponsesOf } from '../hooks/families/response-state.ts';
import { createPathExtractor } from '../hooks/usage/path-extractor.ts';
import type { UpstreamTimeouts } from './upstream.ts';

/** The hooks that apply to one matched rule, in stage order, computed once per rule. */
export interface RuleHooks {
  readonly rewrite: readonly Hook[];
  /** Response hooks: the usage meter first (it reads the upstream's own format), then transforms. */
  readonly response: readonly Hook[];
  /** The response hooks with onResponseHead, after the rate limiter's (its headers on the reply). */
  readonly head: readonly Hook[];
  readonly complete: readonly Hook[];
  /** Every response hook only observes: upstream bytes go to the client untouched. */
  readonly observeOnly: boolean;
  /** Keep delivered output for usage estimation (billing on). */
  readonly keepDelivered: boolean;
  readonly timeouts: UpstreamTimeouts;
  /** The rule's cloud credential, applied to the request after every rewrite (hooks/credentials). */
  readonly authorizer: UpstreamAuthorizer | undefined;
}

export interface RuleHookSources {
  /** Hook modules named by rules, loaded once per reference. */
  readonly ruleCustom: ReadonlyMap<HookRef, Hook>;
  /** Hook modules of the configuration's `hooks:` list. */
  readonly globalCustom: readonly Hook[];
  /** Billing's onComplete hooks, which run first (proxy/request-completion.ts finish()). */
  readonly billingComplete: readonly Hook[];
  /** The rate limiter: its headers on the reply, its settlement once billing has the usage. */
  readonly limiter?: Hook;
  /** Each provider's cloud credentials and settings (proxy/runtime-compile.ts). */
  readonly credentials?: ReadonlyMap<string, ProviderCredentials>;
  /** Stores the replies of apis whose clients name them later (the last response hook of their rules). */
  readonly storedRecorder?: Hook;
}

const isResponseHook = (h: Hook) =>
  h.onResponseChunk !== undefined || h.onResponseEnd !== undefined || h.onResponseHead !== undefined;

export function compileRuleHooks(
  config: RouterConfig,
  providers: ReadonlyMap<string, CompiledProvider>,
  sources: RuleHookSources,
): Map<CompiledRule, RuleHooks> {
  const { ruleCustom, globalCustom, billingComplete } = sources;
  const limiter = sources.limiter === undefined ? [] : [sources.limiter];
  const globalResponse = globalCustom.filter(isResponseHook);
  const globalRewrite = globalCustom.filter((h) => h.rewriteBody !== undefined);
  const globalComplete = globalCustom.filter((h) => h.onComplete !== undefined);
  const perRule = new Map<CompiledRule, RuleHooks>();
  for (const [name, provider] of providers) {
    const keys = config.keys.providerKeys.get(name) ?? [];
    const creds = sources.credentials?.get(name);
    for (const rule of provider.rules) {
      const authorizer = ruleAuthorizer(rule.auth, creds);
      const ruleHook = createRuleHook(rule, {
        provider: name,
        translators: TRANSLATORS,
        transforms: TRANSFORMS,
        keys,
        cloudAuth: authorizer !== undefined,
        settings: creds?.settings,
        unavailable: (creds?.problems.length ?? 0) > 0,
      });
      const custom = rule.hooks.map((ref) => ruleCustom.get(ref)!);
      const preset = rulePreset(rule, { presets: USAGE_PRESETS, pathExtractor: createPathExtractor });
      const response: Hook[] = [];
      if (preset !== undefined) response.push(createUsageMeterHook(preset));
      if (ruleHook.onResponseChunk !== undefined) response.push(ruleHook);
      response.push(...custom.filter(isResponseHook));
      response.push(...globalResponse);
      // Last: it keeps the reply as the client got it, after every translation and transform.
      if (sources.storedRecorder !== undefined && storedResponsesOf(rule.api) !== undefined) {
        response.push(sources.storedRecorder);
      }
      perRule.set(rule, {
        rewrite: [ruleHook, ...custom.filter((h) => h.rewriteBody !== undefined), ...globalRewrite],
        response,
        head: [...limiter, ...response.filter((h) => h.onResponseHead !== undefined)],
        complete: [
          ...billingComplete,
          ...limiter,
          ...custom.filter((h) => h.onComplete !== undefined),
          ...globalComplete,
        ],
        observeOnly: response.every((h) => h.responseMode === 'observe'),
        keepDelivered: config.billing.enabled,
        timeouts: {
          headersTimeoutMs: rule.upstreamConfig.headersTimeoutMs ?? config.limits.upstreamHeadersTimeoutMs,
          bodyTimeoutMs: rule.upstreamConfig.bodyTimeoutMs ?? config.limits.upstreamBodyTimeoutMs,
        },
        authorizer,
      });
    }
  }
  return perRule;
}
