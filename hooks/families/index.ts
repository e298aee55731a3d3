// The wire-family registry: one line per family. Everything the proxy core knows about client wire
// formats (routes, key carriers, forwarded headers, error shapes, model lists, usage presets and
// fields, translators) is read from here.

import type { IncomingHttpHeaders } from 'node:http';
import type { GatewayError } from '../../common/errors.ts';
import type { ApiName, JsonObject, SseOut } from '../../common/types.ts';
import type { StreamTransformFactory } from '../transforms/types.ts';
import { pivotCompositions } from '../translators/compose.ts';
import type { TranslatorFactory } from '../translators/types.ts';
import type { UsagePreset } from '../usage/types.ts';
import { anthropicFamily } from './anthropic/index.ts';
import { countTranslator } from './count-translator.ts';
import { geminiFamily } from './gemini/index.ts';
import { openaiFamily } from './openai/index.ts';
import { responsesFamily } from './responses/index.ts';
import type {
  FamilyTelemetry,
  RealtimeDialect,
  RealtimeTranslatorFactory,
  TokenCount,
  WireFamily,
} from './types.ts';

/** Registration order decides ties; the first family shapes errors of requests no family claims. */
// biome-ignore format: one registration line per family
export const FAMILIES: readonly WireFamily[] = [
  openaiFamily,
  anthropicFamily,
  geminiFamily,
  responsesFamily,
];

const BY_NAME: ReadonlyMap<string, WireFamily> = new Map(FAMILIES.map((f) => [f.name, f]));

/** The family that answers requests no family claims (and raw parser errors). */
export const DEFAULT_FAMILY: WireFamily = FAMILIES[0]!;

/** The family of a client format; the default family for a name no family registered. */
export function familyOf(name: string): WireFamily {
  return BY_NAME.get(name) ?? DEFAULT_FAMILY;
}

/** The body of an error the gateway answers itself, shaped for the client's family. */
export function errorBody(format: string, err: GatewayError, requestId: string): JsonObject {
  return familyOf(format).errorBody(err, requestId);
}

/** The SSE event that ends a stream with an error, in the shape the client's SDK raises. */
export function errorEvent(format: string, err: GatewayError, requestId: string): SseOut {
  return familyOf(format).errorEvent(err, requestId);
}

/** Client headers forwarded upstream: the families' protocol versions and betas, and the user agent. */
export const FORWARDED_REQUEST_HEADERS: readonly string[] = [
  ...new Set([...FAMILIES.flatMap((f) => f.forwardedHeaders), 'user-agent']),
];

/** Query parameters an api's upstream request needs (the client's own query never goes upstream). */
export function upstreamQuery(api: ApiName): Readonly<Record<string, string>> | undefined {
  for (const f of FAMILIES) {
    const query = f.upstreamQuery?.(api);
    if (query !== undefined) return query;
  }
  return undefined;
}

/** Headers that carry an access key, after `Authorization: Bearer`, in registration order. */
export const KEY_HEADERS: readonly string[] = [...new Set(FAMILIES.flatMap((f) => f.keyHeaders))];

/** Query parameters that carry an access key. */
export const KEY_QUERY_PARAMS: readonly string[] = [
  ...new Set(FAMILIES.flatMap((f) => (f.keyQuery === undefined ? [] : [f.keyQuery]))),
];

/**
 * The family whose SDKs the request's key carrier or SDK headers identify, among those that claim shared
 * model-list paths that way (GET /v1/models answers in that family's shape); undefined otherwise.
 */
export function carrierFamily(headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined {
  for (const f of FAMILIES) {
    if (f.claimsModelPathsByCarrier !== true) continue;
    if (f.keyHeaders.some((h) => headers[h] !== undefined)) return f.name;
    if (f.sdkHeaders?.some((h) => headers[h] !== undefined) === true) return f.name;
    if (f.keyQuery !== undefined && query.has(f.keyQuery)) return f.name;
  }
  return undefined;
}

/** Every usage preset by its DSL name (`usage_extract <name>`). */
export const USAGE_PRESETS: ReadonlyMap<string, UsagePreset> = new Map(
  FAMILIES.flatMap((f) => f.usagePresets).map((p) => [p.name, p] as const),
);

/**
 * Every translator by its DSL name: each family's own (to and from the pivot, the default family's
 * format), and every client -> provider pair that meets at the pivot (docs/translation.md).
 */
export const TRANSLATORS: ReadonlyMap<string, TranslatorFactory> = (() => {
  const own = FAMILIES.flatMap((f) => f.translators);
  const generation = new Map(
    [...own, ...pivotCompositions(own, DEFAULT_FAMILY.name)].map((t) => [t.name, t] as const),
  );
  for (const t of countTranslators(generation)) generation.set(t.name, t);
  return generation;
})();

/**
 * `<client>_count_to_<provider>` for every pair of families with counting endpoints whose generation
 * translator exists and whose provider side can build a counting request.
 */
function countTranslators(generation: ReadonlyMap<string, TranslatorFactory>): TranslatorFactory[] {
  const out: TranslatorFactory[] = [];
  for (const client of FAMILIES) {
    for (const provider of FAMILIES) {
      const via = generation.get(`${client.name}_to_${provider.name}`);
      if (
        client.tokenCount === undefined ||
        provider.tokenCount?.requestFor === undefined ||
        via === undefined
      )
        continue;
      out.push(
        countTranslator({ ...client.tokenCount, family: client.name }, via, {
          ...provider.tokenCount,
          family: provider.name,
        }),
      );
    }
  }
  return out;
}

const TOKEN_COUNTS: ReadonlyMap<ApiName, TokenCount> = new Map(
  FAMILIES.flatMap((f) => (f.tokenCount === undefined ? [] : [[f.tokenCount.api, f.tokenCount] as const])),
);

/** The counting endpoint an api is, if it is one: not a model call, never billed. */
export function tokenCountOf(api: ApiName): TokenCount | undefined {
  return TOKEN_COUNTS.get(api);
}

/** Every SSE transform that is not a translator, by its DSL name. */
export const TRANSFORMS: ReadonlyMap<string, StreamTransformFactory> = new Map(
  FAMILIES.flatMap((f) => f.transforms ?? []).map((t) => [t.name, t] as const),
);

/** Top-level reply fields that carry usage counts in some family (never generated text). */
export const USAGE_FIELDS: ReadonlySet<string> = new Set(FAMILIES.flatMap((f) => f.usageFields));

/** Usage events of the family's requests carry the completion-style aliases. */
export function completionStyleUsage(format: string): boolean {
  return familyOf(format).completionStyleUsage;
}

/** The telemetry readers of a client format's family (undefined for a family without them). */
export function telemetryOf(format: string): FamilyTelemetry | undefined {
  return familyOf(format).telemetry;
}

export { operationName } from './operations.ts';

/** The realtime dialect whose upgrade path this is, with its family's name (the client format). */
export function realtimeDialectOf(path: string): { dialect: RealtimeDialect; format: string } | undefined {
  for (const f of FAMILIES)
    for (const dialect of f.realtime ?? []) if (dialect.matches(path)) return { dialect, format: f.name };
  return undefined;
}

/** The realtime dialect of an api (`realtime`, `native.live`). */
export function realtimeDialectForApi(api: ApiName): RealtimeDialect | undefined {
  for (const f of FAMILIES) for (const dialect of f.realtime ?? []) if (dialect.api === api) return dialect;
  return undefined;
}

/** Every realtime translator by its DSL name (`req_map` of a realtime rule; docs/realtime.md). */
export const REALTIME_TRANSLATORS: ReadonlyMap<string, RealtimeTranslatorFactory> = new Map(
  FAMILIES.flatMap((f) => f.realtimeTranslators ?? []).map((t) => [t.name, t] as const),
);
