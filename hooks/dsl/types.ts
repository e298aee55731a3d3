// The compiled form of a provider file. The parser produces an AST with source locations; the compiler
// validates it against the registries of translators, transforms, usage presets and hook modules and
// produces these plain objects once per configuration load. Requests only read them.

import type { ApiName, JsonValue } from '../../common/types.ts';
import type { UsageField } from '../usage/types.ts';

export type { UsageField };

export interface SourceLoc {
  readonly file: string;
  readonly line: number;
  readonly col: number;
}

/** A diagnostic, printed as `file:line:col: message`. */
export interface DslDiagnostic extends SourceLoc {
  readonly message: string;
}

/**
 * A string template: literal text and `${...}` variables, compiled once.
 * Variables: request.model, request.model_mapped, request.id, request.api, provider.name,
 * provider.region, provider.project, provider.location, env.NAME (env is read at compile time).
 */
export type TemplatePart = { readonly text: string } | { readonly variable: TemplateVariable };
export type TemplateVariable =
  | 'request.model'
  | 'request.model_mapped'
  | 'request.id'
  | 'request.api'
  | 'provider.name'
  | 'provider.region'
  | 'provider.project'
  | 'provider.location';
export interface CompiledTemplate {
  readonly source: string;
  readonly parts: readonly TemplatePart[];
  /** True when the template has no variables (render is then the literal). */
  readonly constant: boolean;
}

/** `$.a.b[0].c` compiled to its segments. */
export type JsonPath = readonly (string | number)[];

export type AuthOp =
  | { readonly op: 'auth_bearer' }
  | { readonly op: 'auth_header_key'; readonly header: string }
  | { readonly op: 'auth_query_key'; readonly param: string }
  | { readonly op: 'auth_none' }
  /** Cloud credentials (hooks/credentials): tried in written order, the first one configured is used. */
  | { readonly op: 'auth_sigv4'; readonly service: string }
  | { readonly op: 'auth_google' }
  | { readonly op: 'auth_entra' };

/** The auth directives whose credentials come from the keys file or the cloud's own variables. */
export type CloudAuthOp = Extract<AuthOp, { op: 'auth_sigv4' | 'auth_google' | 'auth_entra' }>;

export type RequestOp =
  | { readonly op: 'set_header'; readonly name: string; readonly value: CompiledTemplate }
  | { readonly op: 'pass_header'; readonly name: string }
  | { readonly op: 'del_header'; readonly name: string }
  | { readonly op: 'json_set'; readonly path: JsonPath; readonly value: JsonValue | CompiledTemplate }
  | { readonly op: 'json_del'; readonly path: JsonPath }
  | { readonly op: 'req_map'; readonly translator: string };

export type UpstreamOp =
  | { readonly op: 'set_path'; readonly value: CompiledTemplate }
  | { readonly op: 'set_query'; readonly name: string; readonly value: CompiledTemplate }
  | { readonly op: 'del_query'; readonly name: string };

export type ResponseOp =
  | { readonly op: 'resp_passthrough' }
  | { readonly op: 'resp_map'; readonly translator: string }
  | { readonly op: 'sse_parse'; readonly transform: string };

export type MetricsOp =
  | { readonly op: 'usage_extract'; readonly preset: string }
  /** `usage_path input_tokens "$.usage.in";` read one field from the JSON reply (or each stream event). */
  | { readonly op: 'usage_path'; readonly field: UsageField; readonly path: JsonPath };

export interface HookRef {
  /** Module path, resolved relative to the provider file. */
  readonly module: string;
  readonly options: Readonly<Record<string, JsonValue>>;
  readonly loc: SourceLoc;
}

export interface UpstreamConfig {
  /** Scheme, host, port and optional path prefix, e.g. "https://api.openai.com" or "http://h:8000/openai". */
  readonly baseUrl: string;
  readonly connectTimeoutMs?: number;
  /** Time allowed until the upstream's response headers arrive. */
  readonly headersTimeoutMs?: number;
  /** Maximum idle time between two body chunks of the upstream reply. */
  readonly bodyTimeoutMs?: number;
}

/** Directives of a `defaults` block or a `match` block. */
export interface RuleBody {
  readonly upstreamConfig: Partial<UpstreamConfig> | undefined;
  readonly auth: readonly AuthOp[] | undefined;
  readonly request: readonly RequestOp[] | undefined;
  readonly upstream: readonly UpstreamOp[] | undefined;
  readonly response: readonly ResponseOp[] | undefined;
  readonly metrics: readonly MetricsOp[] | undefined;
  readonly hooks: readonly HookRef[] | undefined;
}

/**
 * A match rule with the defaults merged in. Merge rules: upstream_config merges key by key (rule wins);
 * request and upstream ops concatenate (defaults first); auth, response, metrics and hooks: the rule's
 * block replaces the defaults' block when present.
 */
export interface CompiledRule {
  readonly api: ApiName;
  /** undefined = the rule does not test `stream`. */
  readonly stream: boolean | undefined;
  /** `match model = "<glob>"`: the rule applies only to upstream model ids matching it. */
  readonly model?: string;
  readonly modelMatch?: RegExp;
  readonly loc: SourceLoc;
  readonly upstreamConfig: UpstreamConfig;
  readonly auth: readonly AuthOp[];
  readonly request: readonly RequestOp[];
  readonly upstream: readonly UpstreamOp[];
  readonly response: readonly ResponseOp[];
  readonly metrics: readonly MetricsOp[];
  readonly hooks: readonly HookRef[];
}

export interface CompiledProvider {
  readonly name: string;
  readonly file: string;
  readonly syntax: string;
  /** Rules in file order; the first whose api (and stream and model, when given) matches wins. */
  readonly rules: readonly CompiledRule[];
  /**
   * `${provider.region}` / `${provider.location}` written in a base_url, filled in at load time (an
   * unset one leaves the provider not offered: hooks/credentials).
   */
  readonly baseUrlSettings?: readonly ('region' | 'location')[];
}

/** Names the compiler accepts; anything else is a diagnostic at the directive's location. */
export interface DslRegistries {
  readonly translators: ReadonlySet<string>;
  readonly transforms: ReadonlySet<string>;
  readonly usagePresets: ReadonlySet<string>;
  /** Realtime translators (`req_map` of a realtime rule), each with the api of its clients. */
  readonly realtimeTranslators?: ReadonlyMap<string, ApiName>;
}
