// Helpers shared by the Gemini translator directions: reading Gemini JSON (which accepts both camelCase
// and snake_case field names, because the REST API is proto3 JSON), usage and error mapping, and the
// JSON-schema <-> Gemini Schema conversions used by function declarations and structured output.

import { GatewayError, withRequestId } from '../../../common/errors.ts';
import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, Usage } from '../../../common/types.ts';
import { isThrottled, THROTTLED_CODE } from '../../translators/json.ts';
import { openaiErrorType } from '../openai/errors.ts';
import { geminiErrorBody, googleStatusName } from './errors.ts';

export function asNumber(value: JsonValue | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

export function asArray(value: JsonValue | undefined): JsonValue[] {
  return Array.isArray(value) ? value : [];
}

function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/**
 * Read a Gemini field by its camelCase name, falling back to snake_case: curl examples and some SDKs
 * send `system_instruction`, `inline_data`, `function_call`, and the API accepts both.
 */
export function field(object: JsonObject, camelName: string): JsonValue | undefined {
  const value = object[camelName];
  if (value !== undefined) return value;
  return object[snakeCase(camelName)];
}

export function parseJson(text: string): JsonValue | undefined {
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return undefined;
  }
}

/** Normalized usage from a Gemini `usageMetadata`; thinking tokens are billed as output. */
export function usageFromGemini(meta: JsonObject): Usage {
  const input = asNumber(field(meta, 'promptTokenCount')) ?? 0;
  const candidates = asNumber(field(meta, 'candidatesTokenCount')) ?? 0;
  const thoughts = asNumber(field(meta, 'thoughtsTokenCount'));
  const cached = asNumber(field(meta, 'cachedContentTokenCount'));
  const output = candidates + (thoughts ?? 0);
  const usage: Usage = {
    inputTokens: input,
    outputTokens: output,
    totalTokens: asNumber(field(meta, 'totalTokenCount')) ?? input + output,
  };
  if (cached !== undefined) usage.cacheReadTokens = cached;
  if (thoughts !== undefined) usage.reasoningTokens = thoughts;
  return usage;
}

/** Normalized usage from a completion-style `usage` object. */
export function usageFromOpenai(usage: JsonObject): Usage {
  const input = asNumber(usage.prompt_tokens) ?? 0;
  const output = asNumber(usage.completion_tokens) ?? 0;
  const result: Usage = {
    inputTokens: input,
    outputTokens: output,
    totalTokens: asNumber(usage.total_tokens) ?? input + output,
  };
  const promptDetails = usage.prompt_tokens_details;
  const cached = isObject(promptDetails) ? asNumber(promptDetails.cached_tokens) : undefined;
  if (cached !== undefined) result.cacheReadTokens = cached;
  const completionDetails = usage.completion_tokens_details;
  const reasoning = isObject(completionDetails) ? asNumber(completionDetails.reasoning_tokens) : undefined;
  if (reasoning !== undefined) result.reasoningTokens = reasoning;
  return result;
}

// ---------------------------------------------------------------------------------------------------
// Errors

/** HTTP status guessed from a completion-style error that arrived without one (mid-stream). */
export function statusFromOpenaiError(error: JsonObject): number {
  const code = asNumber(error.code) ?? asNumber(error.status);
  if (code !== undefined && code >= 400 && code < 600) return code;
  const hint = `${asString(error.type) ?? ''} ${asString(error.code) ?? ''}`;
  if (/auth|api_key/.test(hint)) return 401;
  if (/permission/.test(hint)) return 403;
  if (/not_found/.test(hint)) return 404;
  if (/rate_limit|quota/.test(hint)) return 429;
  if (/invalid_request/.test(hint)) return 400;
  return 500;
}

/**
 * Upstream messages can quote the gateway's own upstream key (OpenAI's "Incorrect API key provided:
 * sk-proj-****abcd"); the client must not learn even a fragment of it.
 */
const SECRET_PATTERN = /\b(?:sk-[\w*-]{4,}|AIza[\w-]{10,}|ak_[\w-]{8,}|Bearer\s+\S+)/g;

function clientMessage(message: string, requestId: string): string {
  return withRequestId(message.replace(SECRET_PATTERN, '[redacted]').trimEnd(), requestId);
}

/**
 * The `error` object of a Gemini error body (`{error:{code,message,status}}`; streamGenerateContent
 * without alt=sse wraps it in an array). Anything else is not trusted as a message: it may be an HTML
 * page from a proxy.
 */
function geminiErrorObject(body: JsonValue | string): JsonObject | undefined {
  let value: JsonValue | undefined = body;
  if (typeof value === 'string') value = parseJson(value);
  if (Array.isArray(value)) value = value[0];
  if (isObject(value) && isObject(value.error)) return value.error;
  return undefined;
}

/** A Gemini error (body or stream chunk) as a completion-style error body. */
export function openaiErrorFromGemini(
  status: number,
  body: JsonValue | string,
  requestId: string,
): JsonObject {
  const error = geminiErrorObject(body);
  const httpStatus = (error && asNumber(error.code)) ?? status;
  const statusName = (error && asString(error.status)) ?? googleStatusName(httpStatus);
  const message = (error && asString(error.message)) ?? `upstream error (HTTP ${httpStatus})`;
  return {
    error: {
      message: clientMessage(message, requestId),
      type: openaiErrorType(httpStatus),
      code: error !== undefined && isThrottled(error) ? THROTTLED_CODE : statusName.toLowerCase(),
    },
  };
}

/** A completion-style error (body or stream chunk) as a Gemini error body. */
export function geminiErrorFromOpenai(
  status: number,
  body: JsonValue | string,
  requestId: string,
): JsonObject {
  let value: JsonValue | undefined = body;
  if (typeof value === 'string') value = parseJson(value);
  const error = isObject(value) && isObject(value.error) ? value.error : undefined;
  const httpStatus = status >= 400 ? status : error ? statusFromOpenaiError(error) : 500;
  const message = (error && asString(error.message)) ?? `upstream error (HTTP ${httpStatus})`;
  if (error !== undefined && isThrottled(error))
    return geminiErrorBody(new GatewayError(THROTTLED_CODE, clientMessage(message, requestId)), requestId);
  return {
    error: {
      code: httpStatus,
      message: clientMessage(message, requestId),
      status: googleStatusName(httpStatus),
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Schemas

/**
 * Keys of the OpenAPI-subset Schema the Gemini API accepts in `parameters` and `responseSchema`.
 * Anything else (additionalProperties, $schema, $id, strict, patternProperties, ...) makes it reject
 * the request, so the conversion keeps an allowlist instead of a denylist.
 */
const GEMINI_SCHEMA_KEYS = new Set([
  'type',
  'format',
  'title',
  'description',
  'nullable',
  'enum',
  'maxItems',
  'minItems',
  'properties',
  'required',
  'minProperties',
  'maxProperties',
  'minLength',
  'maxLength',
  'pattern',
  'example',
  'anyOf',
  'propertyOrdering',
  'default',
  'items',
  'minimum',
  'maximum',
]);

/** The only `format` values Gemini accepts per type; other formats (uri, email, ...) are rejected. */
const GEMINI_FORMATS: Record<string, readonly string[]> = {
  string: ['enum', 'date-time'],
  integer: ['int32', 'int64'],
  number: ['float', 'double'],
};

/** Refs are inlined at most this deep: recursive schemas cannot be expressed and get cut off. */
const MAX_REF_DEPTH = 8;

function resolveRef(ref: string, root: JsonObject): JsonObject | undefined {
  const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  if (!match) return undefined;
  const defs = root[match[1]!];
  const target = isObject(defs) ? defs[match[2]!.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  return isObject(target) ? target : undefined;
}

function convertToGemini(schema: JsonObject, root: JsonObject, depth: number): JsonObject {
  let source = schema;
  const ref = asString(schema.$ref);
  if (ref !== undefined) {
    const target = depth < MAX_REF_DEPTH ? resolveRef(ref, root) : undefined;
    if (!target) return { type: 'object' };
    source = { ...target, ...schema };
    delete source.$ref;
    return convertToGemini(source, root, depth + 1);
  }
  const allOf = asArray(schema.allOf);
  if (allOf.length === 1 && isObject(allOf[0])) {
    source = { ...allOf[0], ...schema };
    delete source.allOf;
    return convertToGemini(source, root, depth);
  }
  const out: JsonObject = {};
  // JSON schema `type: ["string", "null"]` is Gemini's `type: "string", nullable: true`.
  const type = source.type;
  if (Array.isArray(type)) {
    const concrete = type.filter((entry) => entry !== 'null');
    if (concrete.length < type.length) out.nullable = true;
    if (concrete.length === 1) out.type = concrete[0]!;
    else if (concrete.length > 1) out.anyOf = concrete.map((entry) => ({ type: entry }));
  } else if (typeof type === 'string') {
    out.type = type;
  }
  if (source.const !== undefined && source.const !== null) {
    out.enum = [String(source.const)];
    out.type ??= 'string';
  }
  const anyOf = asArray(source.anyOf).concat(asArray(source.oneOf));
  if (anyOf.length > 0) {
    const branches = anyOf.filter(isObject);
    const nonNull = branches.filter((branch) => branch.type !== 'null');
    if (nonNull.length < branches.length) out.nullable = true;
    const converted = nonNull.map((branch) => convertToGemini(branch, root, depth));
    if (converted.length === 1) Object.assign(out, converted[0], out.nullable ? { nullable: true } : {});
    else if (converted.length > 1) out.anyOf = converted;
  }
  for (const [key, value] of Object.entries(source)) {
    if (!GEMINI_SCHEMA_KEYS.has(key) || key === 'type' || key === 'anyOf' || out[key] !== undefined) continue;
    if (key === 'properties' && isObject(value)) {
      const properties: JsonObject = {};
      for (const [name, property] of Object.entries(value)) {
        properties[name] = isObject(property) ? convertToGemini(property, root, depth) : {};
      }
      out.properties = properties;
    } else if (key === 'items' && isObject(value)) {
      out.items = convertToGemini(value, root, depth);
    } else if (key === 'format') {
      const allowed = typeof out.type === 'string' ? GEMINI_FORMATS[out.type] : undefined;
      if (typeof value === 'string' && allowed?.includes(value)) out.format = value;
    } else if (key === 'enum' && Array.isArray(value)) {
      // Gemini enums are string-only.
      out.enum = value.filter((entry) => entry !== null).map((entry) => String(entry));
    } else {
      out[key] = value;
    }
  }
  return out;
}

/** A JSON schema (tool parameters, response_format) reduced to the Schema subset Gemini accepts. */
export function jsonSchemaToGemini(schema: JsonObject): JsonObject {
  return convertToGemini(schema, schema, 0);
}

/** A Gemini Schema (upper-case OpenAPI types, `nullable`) as a JSON schema for OpenAI-style upstreams. */
export function geminiSchemaToJsonSchema(schema: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    switch (key) {
      case 'type':
        if (typeof value === 'string' && value !== 'TYPE_UNSPECIFIED') out.type = value.toLowerCase();
        break;
      case 'nullable':
      case 'propertyOrdering':
      case 'property_ordering':
      case 'example':
        break;
      case 'properties':
        if (isObject(value)) {
          const properties: JsonObject = {};
          for (const [name, property] of Object.entries(value)) {
            properties[name] = isObject(property) ? geminiSchemaToJsonSchema(property) : {};
          }
          out.properties = properties;
        }
        break;
      case 'items':
        if (isObject(value)) out.items = geminiSchemaToJsonSchema(value);
        break;
      case 'anyOf':
      case 'any_of':
        out.anyOf = asArray(value)
          .filter(isObject)
          .map((branch) => geminiSchemaToJsonSchema(branch));
        break;
      default: {
        const name = snakeToCamel(key);
        // proto3 JSON writes int64 fields (minItems, maxLength, ...) as strings.
        out[name] = INT64_SCHEMA_KEYS.has(name) && typeof value === 'string' ? Number(value) : value;
      }
    }
  }
  if (schema.nullable === true && typeof out.type === 'string') {
    out.type = [out.type, 'null'];
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
  }
  return out;
}

const INT64_SCHEMA_KEYS = new Set([
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'minProperties',
  'maxProperties',
]);

function snakeToCamel(name: string): string {
  return name.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase());
}
