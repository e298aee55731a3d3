// Usage presets: how to read token counts from one provider family's replies, JSON or streamed.
// Named in provider files as `metrics { usage_extract <preset>; }`.

import type { JsonObject, JsonValue, Usage } from '../../common/types.ts';

/** A count `usage_path <field> "<json path>";` reads (docs/dsl.md). */
export type UsageField =
  | 'input_tokens'
  | 'output_tokens'
  | 'total_tokens'
  | 'cache_read_tokens'
  | 'cache_creation_tokens'
  | 'reasoning_tokens';

/** Per-request, incremental reader of usage from SSE events (constant memory). */
export interface UsageSniffer {
  /** Feed one SSE event (data text without the `data: ` prefix). Must never throw. */
  event(event: string | undefined, data: string): void;
  /** Usage seen so far, or undefined if the upstream reported none. */
  result(): Usage | undefined;
  /**
   * True once the upstream's closing report was read, so result() is the final count; false while it
   * is a running one (a stream cut or failed before its end reports less than was generated).
   */
  final(): boolean;
}

/**
 * Where a request body of one api holds the text the model reads, for estimating input tokens
 * (estimate.ts). The wire families declare it; hooks/families/index.ts `requestTextOf` hands it out.
 */
export interface RequestText {
  /** Top-level fields that hold the text; `model`, sampling options and the like are not read. */
  readonly fields: readonly string[];
  /** Keys below them whose values are (or contain) text; others (ids, URLs, data) are skipped. */
  readonly keys: ReadonlySet<string>;
  /** Part types and keys that hold media the estimator cannot count (images, files, audio). */
  readonly mediaTypes: ReadonlySet<string>;
  readonly mediaKeys: ReadonlySet<string>;
  /** Tokens the provider adds around the messages (roles, separators, reply priming). */
  framing(body: JsonObject): number;
  /**
   * What the key walk cannot reach, by the provider's published counting rules: tool definitions, tool
   * call inputs held as objects, the tool-use system prompt. The model picks the rule's constants.
   */
  parts(body: JsonObject, model: string): PromptParts;
}

/** Texts to count and tokens added as they are. */
export interface PromptParts {
  readonly texts: string[];
  tokens: number;
}

/** The client's request as a preset may read it for quantities the reply does not carry. */
export interface UsageRequest {
  /** Parsed JSON body (JSON endpoints). */
  readonly body: JsonObject | undefined;
  /** Raw bytes (multipart endpoints). */
  readonly rawBody: Buffer;
  readonly contentType: string;
}

export interface RequestUsage {
  readonly usage: Usage;
  /**
   * The quantity that is an estimate (audio length judged from the uploaded file): then a reply that
   * reports usage of its own replaces this one; exact quantities (image size, characters) are merged
   * under the reply's.
   */
  readonly estimated?: keyof Usage;
}

export interface UsagePreset {
  readonly name: string;
  /** Quantities of the request (images asked for, characters to speak, audio sent). Must never throw. */
  fromRequest?(request: UsageRequest): RequestUsage | undefined;
  /** Usage from a complete JSON reply, or undefined when it carries none. Must never throw. */
  fromJson(body: JsonValue): Usage | undefined;
  createSniffer(): UsageSniffer;
  /**
   * A stream's first event already reports the input tokens (Gemini's usageMetadata on every chunk,
   * Anthropic's message_start): no count needs asking alongside the generation (proxy/early-count.ts).
   */
  readonly inputFirst?: boolean;
}
