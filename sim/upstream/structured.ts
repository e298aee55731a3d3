// Structured output: a request that asks for a JSON schema gets JSON built from the schema, so tests can
// tell that a translated schema reached the upstream in the field its vendor reads. Strings are the
// prompt's first words, numbers 42, booleans true, arrays one element, enums their first value.

import { asArray, asObject, asString, echoWords } from './text.ts';

/** What the request asked for: a schema, plain JSON mode, or nothing. */
export type JsonRequest = { schema: Record<string, unknown> } | 'json' | undefined;

export function structuredText(request: JsonRequest, userText: string): string | undefined {
  if (request === undefined) return undefined;
  const words = echoWords(userText);
  return JSON.stringify(request === 'json' ? { echo: words } : sample(request.schema, words, 0));
}

function sample(schema: Record<string, unknown>, words: string, depth: number): unknown {
  if (depth > 16) return null;
  const values = asArray(schema.enum);
  if (values.length > 0) return values[0];
  // Gemini's OpenAPI subset writes types in upper case (OBJECT, STRING, ...).
  const type = asString(schema.type)?.toLowerCase();
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [name, sub] of Object.entries(asObject(schema.properties) ?? {})) {
        out[name] = sample(asObject(sub) ?? {}, words, depth + 1);
      }
      return out;
    }
    case 'string':
      return words;
    case 'integer':
    case 'number':
      return 42;
    case 'boolean':
      return true;
    case 'array':
      return [sample(asObject(schema.items) ?? {}, words, depth + 1)];
    default:
      return null;
  }
}

/** Chat completions: `response_format`. */
export function chatJsonRequest(body: Record<string, unknown>): JsonRequest {
  const format = asObject(body.response_format);
  if (format?.type === 'json_object') return 'json';
  const schema = asObject(asObject(format?.json_schema)?.schema);
  return format?.type === 'json_schema' && schema ? { schema } : undefined;
}

/** Responses: `text.format`. */
export function responsesJsonRequest(body: Record<string, unknown>): JsonRequest {
  const format = asObject(asObject(body.text)?.format);
  if (format?.type === 'json_object') return 'json';
  const schema = asObject(format?.schema);
  return format?.type === 'json_schema' && schema ? { schema } : undefined;
}

/** Anthropic Messages: `output_config.format`. */
export function anthropicJsonRequest(body: Record<string, unknown>): JsonRequest {
  const format = asObject(asObject(body.output_config)?.format);
  const schema = asObject(format?.schema);
  return format?.type === 'json_schema' && schema ? { schema } : undefined;
}

/** Gemini: `responseJsonSchema`, else `responseSchema`, else JSON mode by `responseMimeType`. */
export function geminiJsonRequest(body: Record<string, unknown>): JsonRequest {
  const config = asObject(body.generationConfig) ?? asObject(body.generation_config);
  const schema =
    asObject(config?.responseJsonSchema) ??
    asObject(config?.response_json_schema) ??
    asObject(config?.responseSchema) ??
    asObject(config?.response_schema);
  if (schema) return { schema };
  const mime = asString(config?.responseMimeType) ?? asString(config?.response_mime_type);
  return mime === 'application/json' ? 'json' : undefined;
}
