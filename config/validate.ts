// JSON Schema validation of the YAML files with ajv, and translation of ajv's errors into positioned
// diagnostics. The schemas are the published ones (schema.json and friends), so the editor completion
// operators get and the loader's checks cannot drift apart.

import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { childPointer, displayPath, parentPointer, splitPointer } from '../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../common/config-types.ts';
import { isObject } from '../common/json-guards.ts';
import type { YamlFile } from '../common/yaml-source.ts';

type SchemaNode = { readonly [keyword: string]: unknown };

/** Pointer -> where a value came from when not from the file (`environment variable ROUTER_LISTEN`). */
export type Origins = ReadonlyMap<string, string>;

export interface CompiledSchema {
  /** Validates in place, filling defaults; returns one diagnostic per problem. */
  validate(data: unknown, yaml: YamlFile, origins?: Origins): ConfigDiagnostic[];
  /**
   * A value that came from `${ENV}` interpolation is always a string; where the schema wants an integer
   * or a boolean and the text is one, convert it so `port: ${PORT}` works.
   */
  coerceInterpolated(data: unknown, pointers: Iterable<string>): void;
}

const ajv = new Ajv({
  allErrors: true,
  useDefaults: true,
  allowUnionTypes: true,
  verbose: true,
  strict: true,
});
// Understood by VS Code and yaml-language-server; ajv only needs to accept it.
ajv.addKeyword({ keyword: 'patternErrorMessage', schemaType: 'string' });

function asNode(value: unknown): SchemaNode | undefined {
  return isObject(value) ? (value as SchemaNode) : undefined;
}

function resolveRef(root: SchemaNode, node: SchemaNode | undefined): SchemaNode | undefined {
  let current = node;
  for (let hops = 0; current !== undefined && typeof current.$ref === 'string' && hops < 8; hops++) {
    const ref = current.$ref;
    if (!ref.startsWith('#/')) return undefined;
    let target: unknown = root;
    for (const segment of splitPointer(ref.slice(1))) target = asNode(target)?.[segment];
    current = asNode(target);
  }
  return current;
}

/** The subschema describing the value at `pointer` (properties, items and additionalProperties only). */
function schemaAt(root: SchemaNode, pointer: string): SchemaNode | undefined {
  let node = resolveRef(root, root);
  for (const segment of splitPointer(pointer)) {
    if (node === undefined) return undefined;
    const property = asNode(node.properties)?.[segment];
    const next = property ?? asNode(node.items) ?? asNode(node.additionalProperties);
    node = resolveRef(root, asNode(next));
  }
  return node;
}

function typesOf(node: SchemaNode): string[] {
  const type = node.type;
  if (typeof type === 'string') return [type];
  return Array.isArray(type) ? type.filter((t): t is string => typeof t === 'string') : [];
}

function coerceText(text: string, types: readonly string[]): unknown {
  if (types.includes('string')) return text;
  if (types.includes('integer') && /^-?(0|[1-9][0-9]*)$/.test(text)) return Number(text);
  if (types.includes('number') && text.trim() !== '' && Number.isFinite(Number(text))) return Number(text);
  if (types.includes('boolean')) {
    const lower = text.toLowerCase();
    if (lower === 'true' || lower === '1') return true;
    if (lower === 'false' || lower === '0') return false;
  }
  return text;
}

function setAt(data: unknown, pointer: string, value: unknown): void {
  const segments = splitPointer(pointer);
  const last = segments.pop();
  if (last === undefined) return;
  let parent: unknown = data;
  for (const segment of segments) parent = (parent as Record<string, unknown> | undefined)?.[segment];
  if (typeof parent === 'object' && parent !== null) (parent as Record<string, unknown>)[last] = value;
}

function getAt(data: unknown, pointer: string): unknown {
  let node: unknown = data;
  for (const segment of splitPointer(pointer)) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The closest known key, for "did you mean" hints on typos. */
export function suggestKey(unknown: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const distance = editDistance(unknown.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(unknown.length / 3)) ? best : undefined;
}

function describeError(
  error: ErrorObject,
  redactUnknownKeys: boolean,
): { pointer: string; part: 'key' | 'value'; message: string } {
  const parentSchema = asNode(error.parentSchema);
  // A propertyNames failure is about a key of the mapping at instancePath: point at that key.
  if (error.propertyName !== undefined) {
    const custom = parentSchema?.patternErrorMessage;
    const detail =
      error.keyword === 'pattern' && typeof custom === 'string' ? custom : (error.message ?? 'is invalid');
    return {
      pointer: childPointer(error.instancePath, error.propertyName),
      part: 'key',
      message: `${displayPath(error.instancePath)}: key ${JSON.stringify(error.propertyName)} ${detail}`,
    };
  }
  const pointer = error.instancePath;
  const where = displayPath(pointer);
  switch (error.keyword) {
    case 'additionalProperties': {
      const key = String(error.params.additionalProperty);
      const child = childPointer(pointer, key);
      const known = Object.keys(asNode(parentSchema?.properties) ?? {});
      const hint = suggestKey(key, known);
      const suffix = hint === undefined ? '' : ` (did you mean "${hint}"?)`;
      // In a file of secrets a stray key may itself be a secret pasted in the wrong place.
      const what = redactUnknownKeys
        ? `unknown key in ${displayPath(pointer)}`
        : `unknown key ${displayPath(child)}`;
      return { pointer: child, part: 'key', message: `${what}${suffix}` };
    }
    case 'required':
      return {
        pointer,
        part: 'key',
        message: `${where}: missing required key "${String(error.params.missingProperty)}"`,
      };
    case 'enum': {
      const allowed = Array.isArray(error.params.allowedValues) ? error.params.allowedValues.map(String) : [];
      return { pointer, part: 'value', message: `${where} must be one of: ${allowed.join(', ')}` };
    }
    case 'type': {
      const expected = String(error.params.type).split(',').join(' or ');
      return {
        pointer,
        part: 'value',
        message: `${where} must be ${expected === 'object' ? 'a mapping' : expected === 'array' ? 'a list' : expected}`,
      };
    }
    case 'pattern': {
      const custom = parentSchema?.patternErrorMessage;
      return {
        pointer,
        part: 'value',
        message: `${where} ${typeof custom === 'string' ? custom : 'has an invalid format'}`,
      };
    }
    default:
      return { pointer, part: 'value', message: `${where} ${error.message ?? 'is invalid'}` };
  }
}

function originOf(origins: Origins | undefined, pointer: string): string | undefined {
  if (origins === undefined) return undefined;
  let current = pointer;
  for (;;) {
    const found = origins.get(current);
    if (found !== undefined) return found;
    if (current === '') return undefined;
    current = parentPointer(current);
  }
}

export interface CompileOptions {
  /** Leave unknown key names out of messages (files holding secrets). */
  readonly redactUnknownKeys?: boolean;
}

export function compileSchema(schema: SchemaNode, options: CompileOptions = {}): CompiledSchema {
  // The shared instance keeps compiled schemas by $id; compiling one twice would throw.
  const id = typeof schema.$id === 'string' ? schema.$id : undefined;
  const check: ValidateFunction = (id === undefined ? undefined : ajv.getSchema(id)) ?? ajv.compile(schema);
  return {
    validate(data, yaml, origins) {
      if (check(data)) return [];
      const seen = new Set<string>();
      const diagnostics: ConfigDiagnostic[] = [];
      for (const error of check.errors ?? []) {
        // Its inner error, which names the rule the key broke, is reported instead.
        if (error.keyword === 'propertyNames') continue;
        const { pointer, part, message } = describeError(error, options.redactUnknownKeys === true);
        const origin = originOf(origins, pointer);
        const diagnostic: ConfigDiagnostic =
          origin === undefined
            ? yaml.at(pointer, message, part)
            : { file: yaml.file, line: 0, col: 0, message: `${message} (set by ${origin})` };
        const key = `${diagnostic.line}:${diagnostic.col}:${diagnostic.message}`;
        if (seen.has(key)) continue;
        seen.add(key);
        diagnostics.push(diagnostic);
      }
      return diagnostics.sort((a, b) => a.line - b.line || a.col - b.col);
    },
    coerceInterpolated(data, pointers) {
      for (const pointer of pointers) {
        const value = getAt(data, pointer);
        const node = schemaAt(schema, pointer);
        if (typeof value !== 'string' || node === undefined) continue;
        const coerced = coerceText(value, typesOf(node));
        if (coerced !== value) setAt(data, pointer, coerced);
      }
    },
  };
}
