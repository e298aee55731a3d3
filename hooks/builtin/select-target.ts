// Target selection (selectTarget; docs/lifecycle.md). `x-router-provider` names the provider and bypasses the
// model registry entirely (a provider the gateway does not offer is the client's 400); otherwise the
// registry maps the model to an ordered list of candidates (round robin rotates the start, priority keeps
// the file order). Later candidates are retries.

import type { ModelEntry } from '../../common/config-types.ts';
import { clip, GatewayError } from '../../common/errors.ts';
import type { Hook, RequestContext, TargetCandidate, TargetChoice } from '../../common/types.ts';

export interface ModelResolver {
  resolve(model: string): ModelEntry | undefined;
}

/**
 * Whether `x-router-provider` may name a loaded provider, and why not: the gateway holds no credentials
 * for it, or it is a keyless local server the operator has not set up. Decided by providerOffers
 * (proxy/runtime-compile.ts).
 */
export type ProviderOffer = 'offered' | 'no_credentials' | 'not_set_up';

const NOT_OFFERED_REASON = {
  unknown: 'no provider of that name exists',
  no_credentials: 'the gateway has no upstream credentials for it',
  not_set_up: 'it is a local server this gateway is not set up to use',
} as const;

/** The client's 400 for a header naming a provider that is not offered: the header, the reason, the way out. */
function notOffered(name: string, why: keyof typeof NOT_OFFERED_REASON): GatewayError {
  return new GatewayError(
    'provider_not_offered',
    `The x-router-provider header names '${clip(name)}', which this gateway does not offer: ${NOT_OFFERED_REASON[why]}; name another provider, or leave the header out to route by model`,
    'x-router-provider',
  );
}

/** `offers` holds every loaded provider; a name it lacks does not exist. */
export function createSelectTargetHook(
  registry: ModelResolver,
  offers: ReadonlyMap<string, ProviderOffer>,
): Hook {
  const cursors = new WeakMap<ModelEntry, number>();
  const orders = new WeakMap<ModelEntry, readonly TargetCandidate[][]>();

  /** All rotations of an entry's candidate list, computed once per entry. */
  function rotations(entry: ModelEntry, model: string): readonly TargetCandidate[][] {
    let cached = orders.get(entry);
    if (cached === undefined || entry.id.endsWith('*')) {
      const base = entry.routes.map((r) => ({ provider: r.provider, upstreamModel: r.model ?? model }));
      cached =
        entry.strategy === 'round_robin'
          ? base.map((_, i) => [...base.slice(i), ...base.slice(0, i)])
          : [base];
      // Pattern entries map whatever model matched, so their lists cannot be shared across models.
      if (!entry.id.endsWith('*')) orders.set(entry, cached);
    }
    return cached;
  }

  return {
    name: 'select-target',
    selectTarget(ctx: RequestContext): TargetChoice {
      const forced = ctx.headers['x-router-provider'];
      if (typeof forced === 'string' && forced !== '') {
        const offer = offers.get(forced) ?? 'unknown';
        if (offer !== 'offered') throw notOffered(forced, offer);
        return { via: 'header', candidates: [{ provider: forced, upstreamModel: ctx.model }] };
      }
      if (ctx.model === undefined || ctx.model === '') {
        throw new GatewayError(
          'provider_not_selected',
          'The request names no model; give one or name a provider with the x-router-provider header',
          'model',
        );
      }
      const entry = registry.resolve(ctx.model);
      if (entry === undefined) {
        throw new GatewayError('model_not_found', `The model '${ctx.model}' does not exist`, 'model');
      }
      const options = rotations(entry, ctx.model);
      let index = 0;
      if (options.length > 1) {
        index = cursors.get(entry) ?? 0;
        cursors.set(entry, (index + 1) % options.length);
      }
      // The models schema requires at least one route, so every entry has a rotation at `index`.
      return { via: 'registry', candidates: options[index]! };
    },
  } satisfies Hook;
}
