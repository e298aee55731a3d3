// `usage_path` directives: a usage preset built from JSON paths the provider file names
// (`metrics { usage_path <field> "<json path>"; }`).

import { asObject } from '../../common/json-guards.ts';
import type { JsonValue, Usage } from '../../common/types.ts';
import { buildUsage, count, parseJson } from './sniffers.ts';
import type { UsageField, UsagePreset } from './types.ts';

type PathSegments = readonly (string | number)[];

/** Minimal path getter (negative indexes count from the end). Kept local so presets have no DSL dependency. */
function getAtPath(root: JsonValue, path: PathSegments): JsonValue | undefined {
  let node: JsonValue | undefined = root;
  for (const segment of path) {
    if (typeof segment === 'number') {
      if (!Array.isArray(node)) return undefined;
      node = node[segment < 0 ? node.length + segment : segment];
    } else {
      const record = asObject(node);
      if (!record || !Object.hasOwn(record, segment)) return undefined;
      node = record[segment];
    }
    if (node === undefined) return undefined;
  }
  return node;
}

const FIELD_KEYS: Record<UsageField, keyof Usage> = {
  input_tokens: 'inputTokens',
  output_tokens: 'outputTokens',
  total_tokens: 'totalTokens',
  cache_read_tokens: 'cacheReadTokens',
  cache_creation_tokens: 'cacheCreationTokens',
  reasoning_tokens: 'reasoningTokens',
};

export interface UsagePathSpec {
  readonly field: UsageField;
  readonly path: PathSegments;
}

/**
 * A preset from `usage_path <field> "<json path>";` directives. Missing input or output count as 0;
 * totalTokens defaults to input + output. Streams: each event that mentions one of the paths' last keys
 * is parsed and found values overwrite earlier ones (later reports win).
 */
export function createPathExtractor(paths: readonly UsagePathSpec[]): UsagePreset {
  const specs = paths.map((p) => ({ key: FIELD_KEYS[p.field], path: [...p.path] }));
  const needles = [
    ...new Set(
      specs.map((s) => {
        const last = s.path.findLast((segment) => typeof segment === 'string');
        return last === undefined ? '' : JSON.stringify(last);
      }),
    ),
  ];

  function collect(body: JsonValue, into: Partial<Record<keyof Usage, number>>): boolean {
    let found = false;
    for (const spec of specs) {
      const value = count(getAtPath(body, spec.path));
      if (value !== undefined) {
        into[spec.key] = value;
        found = true;
      }
    }
    return found;
  }

  function toUsage(found: Partial<Record<keyof Usage, number>>): Usage {
    return buildUsage(found.inputTokens ?? 0, found.outputTokens ?? 0, found.totalTokens, {
      cacheRead: found.cacheReadTokens,
      cacheCreation: found.cacheCreationTokens,
      reasoning: found.reasoningTokens,
    });
  }

  return {
    name: 'usage_path',
    fromJson(body) {
      const found: Partial<Record<keyof Usage, number>> = {};
      return collect(body, found) ? toUsage(found) : undefined;
    },
    createSniffer() {
      const found: Partial<Record<keyof Usage, number>> = {};
      let seen = false;
      return {
        event(_event, data) {
          if (typeof data !== 'string' || !needles.some((needle) => data.includes(needle))) return;
          const body = parseJson(data);
          if (body !== undefined && collect(body, found)) seen = true;
        },
        result: () => (seen ? toUsage(found) : undefined),
        // The format is the operator's: a report is taken as final. A stream cut by the transport or
        // the client is still settled as partial (proxy/metering.ts).
        final: () => seen,
      };
    },
  };
}
