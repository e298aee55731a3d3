// The wire-family registry: one registration line per family (at the end of this file). Everything the
// proxy core knows about client wire formats (routes, key carriers, forwarded headers, error shapes,
// model lists, body schemas, usage presets and fields, request and reply text, stream framing,
// translators) is read from here.

import type { IncomingHttpHeaders } from 'node:http';
import type { GatewayError } from '../../common/errors.ts';
import type { ApiName, JsonObject, SseOut } from '../../common/types.ts';
import type { StreamTransformFactory } from '../transforms/types.ts';
import { pivotCompositions } from '../translators/compose.ts';
import type { TranslatorFactory } from '../translators/types.ts';
import type { PromptParts, RequestText, UsagePreset } from '../usage/types.ts';
import { anthropicFamily } from './anthropic/index.ts';
import { bedrockWire } from './bedrock/index.ts';
import { countTranslator } from './count-translator.ts';
import { geminiFamily } from './gemini/index.ts';
import { openaiFamily } from './openai/index.ts';
import { responsesFamily } from './responses/index.ts';
import type {
  FamilyTelemetry,
  ProviderWire,
  RateLimitState,
  RealtimeDialect,
  RealtimeTranslatorFactory,
  StreamFraming,
  TokenCount,
  UpstreamErrorStatus,
  WireFamily,
} from './types.ts';
import { vertexWire } from './vertex/index.ts';

// The tables below are filled by registerFamily and read by the core when it compiles (routes, body
// schemas, DSL names): a family is registered before the gateway's modules load, as the built-ins are.

const families: WireFamily[] = [];
const rateLimitPrefixes: string[] = [];
const byName = new Map<string, WireFamily>();
const wires: ProviderWire[] = [];

/** The registered families in registration order, which decides ties. */
export const FAMILIES: readonly WireFamily[] = families;

const forwarded = ['user-agent'];
/** Client headers forwarded upstream: the families' protocol versions and betas, and the user agent. */
export const FORWARDED_REQUEST_HEADERS: readonly string[] = forwarded;

const keyHeaders: string[] = [];
/** Headers that carry an access key, after `Authorization: Bearer`, in registration order. */
export const KEY_HEADERS: readonly string[] = keyHeaders;

const keyQuery: string[] = [];
/** Query parameters that carry an access key. */
export const KEY_QUERY_PARAMS: readonly string[] = keyQuery;

const presets = new Map<string, UsagePreset>();
/** Every usage preset by its DSL name (`usage_extract <name>`). */
export const USAGE_PRESETS: ReadonlyMap<string, UsagePreset> = presets;

const translators = new Map<string, TranslatorFactory>();
/**
 * Every translator by its DSL name: each family's own (to and from the pivot, the default family's
 * format), and every client -> provider pair that meets at the pivot (docs/translation.md).
 */
export const TRANSLATORS: ReadonlyMap<string, TranslatorFactory> = translators;

const transforms = new Map<string, StreamTransformFactory>();
/** Every SSE transform that is not a translator, by its DSL name. */
export const TRANSFORMS: ReadonlyMap<string, StreamTransformFactory> = transforms;

const realtimeTranslators = new Map<string, RealtimeTranslatorFactory>();
/** Every realtime translator by its DSL name (`req_map` of a realtime rule; docs/realtime.md). */
export const REALTIME_TRANSLATORS: ReadonlyMap<string, RealtimeTranslatorFactory> = realtimeTranslators;

const framings = new Map<string, StreamFraming>();
/** Binary stream framings by the reply content type they decode (the relay's alternative to SSE). */
export const STREAM_FRAMINGS: ReadonlyMap<string, StreamFraming> = framings;

const errorStatuses = new Map<string, UpstreamErrorStatus['status']>();
/**
 * The status the client gets for an upstream error reply of an upstream format (a translator's `to`),
 * when its provider wire names errors beside the status; undefined: the upstream's status stands.
 */
export function upstreamErrorStatus(format: string): UpstreamErrorStatus['status'] | undefined {
  return errorStatuses.get(format);
}

/** The framing of a reply's `content-type` header (parameters and case ignored), when one is registered. */
export function framingOf(contentType: string | undefined): StreamFraming | undefined {
  if (contentType === undefined || framings.size === 0) return undefined;
  return framings.get(contentType.split(';', 1)[0]!.trim().toLowerCase());
}

const usageFields = new Set<string>();
/** Top-level reply fields that carry usage counts in some family (never generated text). */
export const USAGE_FIELDS: ReadonlySet<string> = usageFields;

const replyTextFields = new Set<string>();
/** Reply fields whose strings are generated text in some family (whole replies and stream events). */
export const REPLY_TEXT_FIELDS: ReadonlySet<string> = replyTextFields;

const streamEnds = new Set<string>();
/** Event data that ends a stream in some family and carries nothing else (`[DONE]`). */
export const STREAM_END_MARKERS: ReadonlySet<string> = streamEnds;

const TOKEN_COUNTS = new Map<ApiName, TokenCount>();

// One set of text keys and media markers for every family's bodies, as the estimator has always walked.
const TEXT_KEYS = new Set<string>();
const MEDIA_TYPES = new Set<string>();
const MEDIA_KEYS = new Set<string>();
const REQUEST_TEXT = new Map<WireFamily, ReadonlyMap<ApiName, RequestText>>();
const noFraming = () => 0;
const noParts = (): PromptParts => ({ texts: [], tokens: 0 });
/** An api its family does not describe: the fields most bodies carry text in, no framing. */
const OTHER_REQUEST_TEXT: RequestText = {
  fields: ['prompt', 'input', 'messages', 'contents'],
  keys: TEXT_KEYS,
  mediaTypes: MEDIA_TYPES,
  mediaKeys: MEDIA_KEYS,
  framing: noFraming,
  parts: noParts,
};

/**
 * Adds a wire family: its routes, carriers, shapes, presets and translators join the tables above. The
 * first family registered is the default one (and the pivot of translation).
 */
export function registerFamily(family: WireFamily): void {
  if (byName.has(family.name)) throw new Error(`wire family ${family.name} is registered twice`);
  families.push(family);
  byName.set(family.name, family);
  // The user agent stays last.
  for (const name of family.forwardedHeaders)
    if (!forwarded.includes(name)) forwarded.splice(forwarded.length - 1, 0, name);
  addNew(keyHeaders, family.keyHeaders);
  addNew(rateLimitPrefixes, family.rateLimitHeaderPrefixes ?? []);
  if (family.keyQuery !== undefined) addNew(keyQuery, [family.keyQuery]);
  addNamed(presets, family.usagePresets, 'usage preset');
  addNamed(transforms, family.transforms ?? [], 'transform');
  addNamed(realtimeTranslators, family.realtimeTranslators ?? [], 'realtime translator');
  if (family.tokenCount !== undefined) TOKEN_COUNTS.set(family.tokenCount.api, family.tokenCount);
  for (const field of family.usageFields) usageFields.add(field);
  for (const field of family.replyTextFields) replyTextFields.add(field);
  if (family.streamEnd !== undefined) streamEnds.add(family.streamEnd);
  const text = family.requestText;
  for (const key of text?.keys ?? []) TEXT_KEYS.add(key);
  for (const type of text?.mediaTypes ?? []) MEDIA_TYPES.add(type);
  for (const key of text?.mediaKeys ?? []) MEDIA_KEYS.add(key);
  const byApi = new Map<ApiName, RequestText>();
  for (const [api, shape] of Object.entries(text?.apis ?? {})) {
    byApi.set(api as ApiName, {
      fields: shape.fields,
      keys: TEXT_KEYS,
      mediaTypes: MEDIA_TYPES,
      mediaKeys: MEDIA_KEYS,
      framing: shape.framing ?? noFraming,
      parts: shape.parts ?? noParts,
    });
  }
  REQUEST_TEXT.set(family, byApi);
  rebuildTranslators();
}

/**
 * Adds the wire of upstreams no client speaks (Bedrock): its translators (composed with every family's
 * through the pivot), transforms, usage presets and stream framings; no routes or shapes of its own.
 */
export function registerProviderWire(wire: ProviderWire): void {
  addNamed(presets, wire.usagePresets, 'usage preset');
  addNamed(transforms, wire.transforms ?? [], 'transform');
  for (const framing of wire.framings ?? []) {
    if (framings.has(framing.contentType))
      throw new Error(`stream framing ${framing.contentType} is declared twice`);
    framings.set(framing.contentType, framing);
  }
  for (const format of wire.errorStatus?.formats ?? []) errorStatuses.set(format, wire.errorStatus!.status);
  wires.push(wire);
  rebuildTranslators();
}

/** The compositions and counting translators span every pair of families and wires: built anew. */
function rebuildTranslators(): void {
  translators.clear();
  const own = [...families.flatMap((f) => f.translators), ...wires.flatMap((w) => w.translators)];
  for (const t of [...own, ...pivotCompositions(own, families[0]!.name)]) translators.set(t.name, t);
  for (const w of wires) for (const t of w.derive?.(translators) ?? []) translators.set(t.name, t);
  for (const t of countTranslators(translators)) translators.set(t.name, t);
}

function addNew(list: string[], items: readonly string[]): void {
  for (const item of items) if (!list.includes(item)) list.push(item);
}

function addNamed<T extends { readonly name: string }>(
  table: Map<string, T>,
  items: readonly T[],
  what: string,
): void {
  for (const item of items) {
    if (table.has(item.name)) throw new Error(`${what} ${item.name} is declared by two wire families`);
    table.set(item.name, item);
  }
}

/** The family of a client format; the default family for a name no family registered. */
export function familyOf(name: string): WireFamily {
  return byName.get(name) ?? families[0]!;
}

/** The gateway's rate-limit headers in the client family's names, added to `out` (none when it has none). */
export function rateLimitHeaders(
  format: string,
  state: RateLimitState,
  now: number,
  out: Record<string, string> = {},
): Record<string, string> {
  return familyOf(format).rateLimitHeaders?.(state, now, out) ?? out;
}

/** Whether a response header (its lower-case name) is a vendor's rate-limit header (any family's). */
export function isRateLimitHeader(name: string): boolean {
  // Indexed: it runs for every header of a limited reply, and an array iterator costs more than the test.
  for (let i = 0; i < rateLimitPrefixes.length; i++) if (name.startsWith(rateLimitPrefixes[i]!)) return true;
  return false;
}

/** The body of an error the gateway answers itself, shaped for the client's family. */
export function errorBody(format: string, err: GatewayError, requestId: string): JsonObject {
  return familyOf(format).errorBody(err, requestId);
}

/** The SSE event that ends a stream with an error, in the shape the client's SDK raises. */
export function errorEvent(
  format: string,
  err: GatewayError,
  requestId: string,
  eventsSent?: number,
): SseOut {
  return familyOf(format).errorEvent(err, requestId, eventsSent);
}

/** Query parameters an api's upstream request needs (the client's own query never goes upstream). */
export function upstreamQuery(api: ApiName): Readonly<Record<string, string>> | undefined {
  for (const f of families) {
    const query = f.upstreamQuery?.(api);
    if (query !== undefined) return query;
  }
  return undefined;
}

/**
 * The family whose SDKs the request's key carrier or SDK headers identify, among those that claim shared
 * model-list paths that way (GET /v1/models answers in that family's shape); undefined otherwise.
 */
export function carrierFamily(headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined {
  for (const f of families) {
    if (f.claimsModelPathsByCarrier !== true) continue;
    if (f.keyHeaders.some((h) => headers[h] !== undefined)) return f.name;
    if (f.sdkHeaders?.some((h) => headers[h] !== undefined) === true) return f.name;
    if (f.keyQuery !== undefined && query.has(f.keyQuery)) return f.name;
  }
  return undefined;
}

/**
 * `<client>_count_to_<provider>` for every pair of families with counting endpoints whose generation
 * translator exists and whose provider side can build a counting request.
 */
function countTranslators(generation: ReadonlyMap<string, TranslatorFactory>): TranslatorFactory[] {
  const out: TranslatorFactory[] = [];
  for (const client of families) {
    for (const provider of families) {
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
    for (const count of wires.flatMap((w) => w.tokenCounts ?? [])) {
      const via = generation.get(`${client.name}_to_${count.format}`);
      if (client.tokenCount === undefined || via === undefined) continue;
      out.push(
        countTranslator({ ...client.tokenCount, family: client.name }, via, {
          ...count,
          family: count.format,
        }),
      );
    }
  }
  return out;
}

/** The counting endpoint an api is, if it is one: not a model call, never billed. */
export function tokenCountOf(api: ApiName): TokenCount | undefined {
  return TOKEN_COUNTS.get(api);
}

/**
 * The counting endpoint of a client format whose streams state the input first (Anthropic's
 * message_start) and count the bodies of `api`: what a translated stream of it asks the serving
 * provider alongside the generation. Undefined for every other format and api.
 */
export function earlyInputCount(format: string, api: ApiName): TokenCount | undefined {
  const family = familyOf(format);
  if (family.streamStatesInput !== true) return undefined;
  return family.tokenCount?.countedApi === api ? family.tokenCount : undefined;
}

/** Counting endpoints that take a completion-style (pivot) body through a request translation. */
export function pivotTokenCounts(): TokenCount[] {
  return [...TOKEN_COUNTS.values()].filter((count) => count.fromPivot !== undefined);
}

/** Where a request body of a client format's api holds the text the model reads (usage estimation). */
export function requestTextOf(format: string, api: ApiName): RequestText {
  return REQUEST_TEXT.get(familyOf(format))?.get(api) ?? OTHER_REQUEST_TEXT;
}

/**
 * Where the generation bodies of a wire format hold text, as its providers count them: the serving
 * provider's framing for a body translated to it. Undefined for a format no family describes.
 */
export function generationTextOf(format: string): RequestText | undefined {
  const family = byName.get(format);
  if (family === undefined) return undefined;
  const byApi = REQUEST_TEXT.get(family);
  const api = family.tokenCount?.countedApi ?? byApi?.keys().next().value;
  return api === undefined ? undefined : byApi?.get(api);
}

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
  for (const f of families)
    for (const dialect of f.realtime ?? []) if (dialect.matches(path)) return { dialect, format: f.name };
  return undefined;
}

/** The realtime dialect of an api (`realtime`, `native.live`). */
export function realtimeDialectForApi(api: ApiName): RealtimeDialect | undefined {
  for (const f of families) for (const dialect of f.realtime ?? []) if (dialect.api === api) return dialect;
  return undefined;
}

// The built-in families, one line each; the first is the default family and the pivot.
registerFamily(openaiFamily);
registerFamily(anthropicFamily);
registerFamily(geminiFamily);
registerFamily(responsesFamily);
registerProviderWire(bedrockWire);
registerProviderWire(vertexWire);

/** The family that answers requests no family claims (and raw parser errors). */
export const DEFAULT_FAMILY: WireFamily = families[0]!;
