// Target selection (selectTarget; docs/lifecycle.md). `x-router-provider` names the provider and bypasses the
// model registry entirely; otherwise the registry maps the model to an ordered list of candidates
// (round robin rotates the start, priority keeps the file order). Later candidates are retries.

import type { ModelEntry } from '../../common/config-types.ts';
import { clip, GatewayError } from '../../common/errors.ts';
import type { Hook, RequestContext, TargetCandidate, TargetChoice } from '../../common/types.ts';

export interface ModelResolver {
  resolve(model: string): ModelEntry | undefined;
}

export function createSelectTargetHook(registry: ModelResolver, providers: ReadonlySet<string>): Hook {
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
        if (!providers.has(forced))
          throw new GatewayError('unknown_provider', `Unknown provider '${clip(forced)}'`);
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
