// GET /v1/models and one model's entry, in the shape of the family that answers the path
// (proxy/routes.ts picks it; hooks/families/*/index.ts `models` builds the shape).

import type { JsonValue, WireFormat } from '../common/types.ts';
import { FAMILIES } from '../hooks/families/index.ts';
import type { ModelRegistry } from './config/models.ts';

export interface ModelListing {
  list(format: WireFormat): JsonValue;
  /** undefined when the registry has no such model. */
  info(format: WireFormat, id: string): JsonValue | undefined;
}

/** Lists are built once per configuration load; `created` is the load's time. */
export function createModelListing(
  registry: ModelRegistry,
  created = Math.floor(Date.now() / 1000),
): ModelListing {
  const listed = registry.listed().map((e) => ({ id: e.id, ownedBy: e.ownedBy }));
  const lists = new Map<string, JsonValue>();
  for (const family of FAMILIES) {
    if (family.models !== undefined) lists.set(family.name, family.models.list(listed, created));
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
