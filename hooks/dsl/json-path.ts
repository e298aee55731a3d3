// The small JSON path subset of the DSL: `$`, `.key`, `["key"]` / `['key']` and `[index]`. Paths are
// compiled once; get/set/delete walk plain JSON values. Keys are only ever read as own properties and
// written with defineProperty, so `__proto__` in a path cannot reach or change a prototype.

import { isObject } from '../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../common/types.ts';
import type { JsonPath } from './types.ts';

export type JsonPathParse =
  | { readonly ok: true; readonly path: JsonPath }
  | {
      readonly ok: false;
      readonly message: string /** Offset in the source text. */;
      readonly index: number;
    };

/** Parses a path, reporting the offset of the first problem (the compiler turns it into a line:col). */
export function parseJsonPath(source: string): JsonPathParse {
  if (source[0] !== '$') return { ok: false, message: 'JSON path must start with "$"', index: 0 };
  const path: (string | number)[] = [];
  let i = 1;
  while (i < source.length) {
    const c = source[i];
    if (c === '.') {
      let j = i + 1;
      while (j < source.length && source[j] !== '.' && source[j] !== '[') j += 1;
      if (j === i + 1) return { ok: false, message: 'empty key after "."', index: i };
      path.push(source.slice(i + 1, j));
      i = j;
      continue;
    }
    if (c === '[') {
      const q = source[i + 1];
      if (q === '"' || q === "'") {
        let key = '';
        let j = i + 2;
        while (j < source.length && source[j] !== q) {
          if (source[j] === '\\' && j + 1 < source.length) j += 1;
          key += source[j];
          j += 1;
        }
        if (source[j] !== q || source[j + 1] !== ']') {
          return { ok: false, message: 'unterminated quoted key', index: i };
        }
        path.push(key);
        i = j + 2;
        continue;
      }
      const m = /^\[(0|[1-9][0-9]*)\]/.exec(source.slice(i));
      if (!m) return { ok: false, message: 'expected an array index or a quoted key after "["', index: i };
      const n = Number(m[1]);
      if (!Number.isSafeInteger(n)) return { ok: false, message: 'array index too large', index: i };
      path.push(n);
      i += m[0].length;
      continue;
    }
    return { ok: false, message: `unexpected "${c}" in JSON path`, index: i };
  }
  return { ok: true, path };
}

/** Compiles `$.a.b[0]` to `['a', 'b', 0]`. Throws on a malformed path. */
export function compileJsonPath(source: string): JsonPath {
  const r = parseJsonPath(source);
  if (!r.ok) throw new Error(`${r.message} (at offset ${r.index} of ${JSON.stringify(source)})`);
  return r.path;
}

function child(v: JsonValue | undefined, seg: string | number): JsonValue | undefined {
  if (typeof seg === 'number') return Array.isArray(v) && seg < v.length ? v[seg] : undefined;
  return isObject(v) && Object.hasOwn(v, seg) ? v[seg] : undefined;
}

function put(container: JsonObject | JsonValue[], seg: string | number, value: JsonValue): void {
  if (Array.isArray(container) && typeof seg === 'number') {
    while (container.length < seg) container.push(null);
    container[seg] = value;
    return;
  }
  Object.defineProperty(container, String(seg), {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** The value at `path`, or undefined when any step is missing. */
export function jsonGet(root: JsonValue | undefined, path: JsonPath): JsonValue | undefined {
  let v = root;
  for (const seg of path) {
    v = child(v, seg);
    if (v === undefined) return undefined;
  }
  return v;
}

/**
 * Sets `path` in `root` (in place), creating missing containers: an array when the next segment is an
 * index, an object otherwise. A step that exists but has the wrong type is replaced. The empty path
 * cannot be set (there is no parent to write into) and throws.
 */
export function jsonSet(root: JsonObject, path: JsonPath, value: JsonValue): void {
  if (path.length === 0) throw new Error('cannot set the root of a JSON document');
  let container: JsonObject | JsonValue[] = root;
  for (let k = 0; k < path.length - 1; k += 1) {
    const seg = path[k]!;
    const wantArray = typeof path[k + 1] === 'number';
    const existing = Array.isArray(container) && typeof seg === 'string' ? undefined : child(container, seg);
    let nextContainer: JsonObject | JsonValue[];
    if (wantArray ? Array.isArray(existing) : isObject(existing)) {
      nextContainer = existing as JsonObject | JsonValue[];
    } else {
      nextContainer = wantArray ? [] : {};
      putInto(container, seg, nextContainer);
    }
    container = nextContainer;
  }
  putInto(container, path[path.length - 1]!, value);
}

/** Writes into a container; a string key on an array is ignored rather than turning it into an object. */
function putInto(container: JsonObject | JsonValue[], seg: string | number, value: JsonValue): void {
  if (Array.isArray(container) && typeof seg === 'string') return;
  put(container, seg, value);
}

/** Removes the value at `path`; returns whether something was removed. Array items are spliced out. */
export function jsonDelete(root: JsonValue | undefined, path: JsonPath): boolean {
  if (path.length === 0) return false;
  const parent = jsonGet(root, path.slice(0, -1));
  const last = path[path.length - 1];
  if (Array.isArray(parent) && typeof last === 'number') {
    if (last >= parent.length) return false;
    parent.splice(last, 1);
    return true;
  }
  if (isObject(parent) && typeof last === 'string' && Object.hasOwn(parent, last)) {
    delete parent[last];
    return true;
  }
  return false;
}

/**
 * `root` with the containers on the way to `path`'s last step (the first `depth` steps) copied, so
 * writing along that path leaves the original document untouched.
 */
function copyAlong(root: JsonObject, path: JsonPath, depth: number): JsonObject {
  const out: JsonObject = { ...root };
  let container: JsonObject | JsonValue[] = out;
  for (let k = 0; k < depth; k += 1) {
    const seg = path[k]!;
    const existing = child(container, seg);
    if (existing === null || typeof existing !== 'object') break;
    const copy: JsonObject | JsonValue[] = Array.isArray(existing) ? [...existing] : { ...existing };
    put(container, seg, copy);
    container = copy;
  }
  return out;
}

/** jsonSet without mutating `root`: returns a new document sharing every part off the path. */
export function jsonSetCopy(root: JsonObject, path: JsonPath, value: JsonValue): JsonObject {
  const out = copyAlong(root, path, path.length - 1);
  jsonSet(out, path, value);
  return out;
}

/** jsonDelete without mutating `root`: `root` itself when there is nothing to remove. */
export function jsonDeleteCopy(root: JsonObject, path: JsonPath): JsonObject {
  if (path.length === 0 || jsonGet(root, path) === undefined) return root;
  const out = copyAlong(root, path, path.length - 1);
  jsonDelete(out, path);
  return out;
}
