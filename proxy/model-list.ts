// GET /v1/models and one model's entry, in the shape of the family that answers the path
// (proxy/routes.ts picks it; hooks/families/*/index.ts `models` builds the shape).

import type { ApiName, JsonValue, WireFormat } from '../common/types.ts';
import type { ModelRegistry } from '../config/models.ts';
import { FAMILIES } from '../hooks/families/index.ts';
import type { ListedModel } from '../hooks/families/types.ts';

export interface ModelListing {
  /** The family's list; with `allowed`, only the models it allows (a key's model list). */
  list(format: WireFormat, allowed?: (model: string) => boolean): JsonValue;
  /** undefined when the registry has no such model (or `allowed` refuses it). */
  info(format: WireFormat, id: string, allowed?: (model: string) => boolean): JsonValue | undefined;
}

/**
 * Lists are built once per configuration load; `created` is the load's time. Each family lists the
 * models it can call: those with a provider that has a rule for one of the family's apis.
 */
export function createModelListing(
  registry: ModelRegistry,
  serves: (provider: string, api: ApiName) => boolean,
  created = Math.floor(Date.now() / 1000),
): ModelListing {
  const lists = new Map<string, JsonValue>();
  const callableBy = new Map<string, ListedModel[]>();
  for (const family of FAMILIES) {
    const shape = family.models;
    if (shape === undefined) continue;
    const callable = registry
      .listed()
      .filter((e) => e.routes.some((r) => shape.apis.some((api) => serves(r.provider, api))))
      .map((e) => ({ id: e.id, ownedBy: e.ownedBy }));
    callableBy.set(family.name, callable);
    lists.set(family.name, shape.list(callable, created));
  }
  const shapes = (format: WireFormat) =>
    FAMILIES.find((f) => f.name === format && f.models !== undefined)?.models;
  return {
    list(format, allowed) {
      // Routes name only families that list models.
      if (allowed === undefined) return lists.get(format) ?? null;
      const shape = shapes(format);
      const callable = callableBy.get(format);
      if (shape === undefined || callable === undefined) return null;
      return shape.list(
        callable.filter((m) => allowed(m.id)),
        created,
      );
    },
    info(format, id, allowed) {
      const bare = id.startsWith('models/') ? id.slice('models/'.length) : id;
      const entry = registry.resolve(bare);
      const shape = shapes(format);
      if (entry === undefined || shape === undefined || allowed?.(bare) === false) return undefined;
      return shape.item({ id: bare, ownedBy: entry.ownedBy }, created);
    },
  };
}
