// GET /v1/models and one model's entry, in the shape of the family that answers the path
// (proxy/routes.ts picks it; hooks/families/*/index.ts `models` builds the shape).

import type { ApiName, JsonValue, WireFormat } from '../common/types.ts';
import type { ModelRegistry } from '../config/models.ts';
import { FAMILIES } from '../hooks/families/index.ts';

export interface ModelListing {
  list(format: WireFormat): JsonValue;
  /** undefined when the registry has no such model. */
  info(format: WireFormat, id: string): JsonValue | undefined;
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
  for (const family of FAMILIES) {
    const shape = family.models;
    if (shape === undefined) continue;
    const callable = registry
      .listed()
      .filter((e) => e.routes.some((r) => shape.apis.some((api) => serves(r.provider, api))))
      .map((e) => ({ id: e.id, ownedBy: e.ownedBy }));
    lists.set(family.name, shape.list(callable, created));
  }
  const shapes = (format: WireFormat) =>
    FAMILIES.find((f) => f.name === format && f.models !== undefined)?.models;
  return {
    list(format) {
      // Routes name only families that list models.
      return lists.get(format) ?? null;
    },
    info(format, id) {
      const bare = id.startsWith('models/') ? id.slice('models/'.length) : id;
      const entry = registry.resolve(bare);
      const shape = shapes(format);
      if (entry === undefined || shape === undefined) return undefined;
      return shape.item({ id: bare, ownedBy: entry.ownedBy }, created);
    },
  };
}
