// Function (tool) definitions as OpenAI counts them: the recipe of OpenAI's cookbook "How to count tokens
// with tiktoken" (section "Counting tokens for chat completions with tool calls"), which matches the
// API's prompt_tokens for gpt-4o and gpt-4 (test/fixtures/usage/counting-rules.md). Per function: a fixed
// start, then "name:description"; per property "key:type:description" after a fixed start, enum items
// each with a fixed cost; one fixed end for the whole list. A trailing "." of a description is dropped.
//
// The recipe reads top-level properties only; nested objects (a property's own `properties`, or those of
// an array's `items`) are counted here the same way one level down, since the model is shown them too.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import type { PromptParts } from '../../usage/types.ts';

interface FunctionConstants {
  readonly funcInit: number;
  readonly propInit: number;
  readonly propKey: number;
  readonly enumInit: number;
  readonly enumItem: number;
  readonly funcEnd: number;
}

/** gpt-4o and later (o200k_base). */
const O200K: FunctionConstants = {
  funcInit: 7,
  propInit: 3,
  propKey: 3,
  enumInit: -3,
  enumItem: 3,
  funcEnd: 12,
};
/** gpt-3.5-turbo and gpt-4 (cl100k_base). */
const CL100K: FunctionConstants = { ...O200K, funcInit: 10 };

const MAX_DEPTH = 8;

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(value: JsonValue | undefined): string {
  return typeof value === 'string' ? value : '';
}

function withoutFinalDot(description: string): string {
  return description.endsWith('.') ? description.slice(0, -1) : description;
}

function typeName(type: JsonValue | undefined): string {
  if (typeof type === 'string') return type;
  if (Array.isArray(type)) return type.filter((t) => typeof t === 'string').join(' | ');
  return '';
}

function propertyParts(properties: JsonObject, c: FunctionConstants, out: PromptParts, depth: number): void {
  const keys = Object.keys(properties);
  if (keys.length === 0 || depth > MAX_DEPTH) return;
  out.tokens += c.propInit;
  for (const key of keys) {
    const schema = properties[key];
    out.tokens += c.propKey;
    if (!isObject(schema)) {
      out.texts.push(`${key}::`);
      continue;
    }
    if (Array.isArray(schema['enum'])) {
      out.tokens += c.enumInit;
      for (const item of schema['enum']) {
        out.tokens += c.enumItem;
        out.texts.push(typeof item === 'string' ? item : JSON.stringify(item));
      }
    }
    out.texts.push(`${key}:${typeName(schema['type'])}:${withoutFinalDot(text(schema['description']))}`);
    const items = schema['items'];
    const nested = isObject(schema['properties'])
      ? schema['properties']
      : isObject(items) && isObject(items['properties'])
        ? items['properties']
        : undefined;
    if (nested !== undefined) propertyParts(nested, c, out, depth + 1);
  }
}

/** One function definition ({name, description, parameters}) into `out`, by the cookbook's recipe. */
export function functionParts(fn: JsonObject, cl100k: boolean, out: PromptParts): void {
  const c = cl100k ? CL100K : O200K;
  out.tokens += c.funcInit;
  out.texts.push(`${text(fn['name'])}:${withoutFinalDot(text(fn['description']))}`);
  const parameters = fn['parameters'];
  if (isObject(parameters) && isObject(parameters['properties'])) {
    propertyParts(parameters['properties'], c, out, 0);
  }
}

/**
 * A tools list: chat's `{type: "function", function: {...}}` or Responses' flat `{type: "function",
 * name, ...}`. Tools of other types (built-in ones) are counted as their JSON.
 */
export function toolListParts(tools: JsonValue | undefined, cl100k: boolean, out: PromptParts): void {
  if (!Array.isArray(tools) || tools.length === 0) return;
  for (const tool of tools) {
    if (!isObject(tool)) continue;
    const fn = isObject(tool['function']) ? tool['function'] : tool;
    if (typeof fn['name'] === 'string') functionParts(fn, cl100k, out);
    else out.texts.push(JSON.stringify(tool));
  }
  out.tokens += (cl100k ? CL100K : O200K).funcEnd;
}
