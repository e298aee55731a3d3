// YAML with source positions. js-yaml has no CST, but v5 exposes its flat event stream (offsets into
// the source), so one pass over the events records where every key and value sits, by JSON pointer,
// and the same events are then turned into plain objects. Diagnostics can then point at the exact
// key or value ajv complains about.

import { readFile } from 'node:fs/promises';
import {
  constructFromEvents,
  EVENT_ID,
  type Event,
  getScalarValue,
  parseEvents,
  SCALAR_STYLE,
  YAMLException,
} from 'js-yaml';
import { childPointer, parentPointer } from './config-diagnostics.ts';
import type { ConfigDiagnostic } from './config-types.ts';

export interface SourcePosition {
  /** 1-based; 0 when unknown. */
  readonly line: number;
  /** 1-based; 0 when unknown. */
  readonly col: number;
}

export interface YamlFile {
  readonly file: string;
  /** The document as plain data (mappings are objects); null for an empty document. */
  readonly value: unknown;
  /** Whether the pointer names a node written in the file. */
  has(pointer: string): boolean;
  /**
   * Where the node at `pointer` is written: its key (`'key'`) or its value (the default). A pointer the
   * file does not contain (a default, an override) falls back to the nearest written ancestor.
   */
  locate(pointer: string, part?: 'key' | 'value'): SourcePosition;
  /** A diagnostic at `pointer`. */
  at(pointer: string, message: string, part?: 'key' | 'value'): ConfigDiagnostic;
}

interface NodeOffsets {
  key: number;
  value: number;
}

type Frame =
  | { kind: 'map'; pointer: string; key: string | undefined; keyOffset: number }
  | { kind: 'seq'; pointer: string; index: number }
  // A complex (non-scalar) mapping key: its contents have no addressable pointer.
  | { kind: 'skip' };

function lineStarts(source: string): number[] {
  const starts = [0];
  for (let i = 0; i < source.length; i++) if (source.charCodeAt(i) === 10) starts.push(i + 1);
  return starts;
}

function positionOf(starts: readonly number[], offset: number): SourcePosition {
  if (offset < 0) return { line: 0, col: 0 };
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (starts[mid]! <= offset) low = mid;
    else high = mid - 1;
  }
  return { line: low + 1, col: offset - starts[low]! + 1 };
}

function eventOffset(event: Event): number {
  switch (event.type) {
    case EVENT_ID.SCALAR: {
      if (event.valueStart < 0) return event.tagStart >= 0 ? event.tagStart : event.anchorStart;
      // Point at the opening quote of a quoted scalar, where an editor shows the value to start.
      const quoted = event.style === SCALAR_STYLE.SINGLE_QUOTED || event.style === SCALAR_STYLE.DOUBLE_QUOTED;
      return quoted ? event.valueStart - 1 : event.valueStart;
    }
    case EVENT_ID.MAPPING:
    case EVENT_ID.SEQUENCE:
      return event.start;
    case EVENT_ID.ALIAS:
      return event.anchorStart >= 0 ? event.anchorStart - 1 : -1;
    default:
      return -1;
  }
}

/** Walks the events of the first document and records the offsets of every key and value. */
function collectOffsets(source: string, events: readonly Event[]): Map<string, NodeOffsets> {
  const offsets = new Map<string, NodeOffsets>();
  const stack: Frame[] = [];
  let documents = 0;
  for (const event of events) {
    if (event.type === EVENT_ID.DOCUMENT) {
      documents++;
      if (documents > 1) break;
      continue;
    }
    if (event.type === EVENT_ID.POP) {
      stack.pop();
      continue;
    }
    const offset = eventOffset(event);
    const top = stack.at(-1);
    let pointer: string | undefined;
    if (top === undefined) {
      pointer = '';
      offsets.set(pointer, { key: offset, value: offset });
    } else if (top.kind === 'map' && top.key === undefined) {
      // This node is a key.
      if (event.type === EVENT_ID.SCALAR) {
        top.key = getScalarValue(source, event);
        top.keyOffset = offset;
      } else {
        top.key = '?';
        top.keyOffset = offset;
        if (event.type === EVENT_ID.MAPPING || event.type === EVENT_ID.SEQUENCE) stack.push({ kind: 'skip' });
      }
      continue;
    } else if (top.kind === 'map') {
      pointer = childPointer(top.pointer, top.key ?? '?');
      // An empty value (`key:`) has no offset of its own; the key stands for it.
      offsets.set(pointer, { key: top.keyOffset, value: offset >= 0 ? offset : top.keyOffset });
      top.key = undefined;
    } else if (top.kind === 'seq') {
      pointer = childPointer(top.pointer, top.index++);
      offsets.set(pointer, { key: offset, value: offset });
    }
    if (event.type === EVENT_ID.MAPPING) {
      stack.push(
        pointer === undefined ? { kind: 'skip' } : { kind: 'map', pointer, key: undefined, keyOffset: -1 },
      );
    } else if (event.type === EVENT_ID.SEQUENCE) {
      stack.push(pointer === undefined ? { kind: 'skip' } : { kind: 'seq', pointer, index: 0 });
    }
  }
  return offsets;
}

function makeYamlFile(
  file: string,
  value: unknown,
  offsets: Map<string, NodeOffsets>,
  starts: number[],
): YamlFile {
  function locate(pointer: string, part: 'key' | 'value' = 'value'): SourcePosition {
    let current = pointer;
    for (;;) {
      const found = offsets.get(current);
      if (found !== undefined) return positionOf(starts, part === 'key' ? found.key : found.value);
      if (current === '') return { line: 0, col: 0 };
      current = parentPointer(current);
      // An ancestor is reported at its key: that is the block the missing entry belongs in.
      part = 'key';
    }
  }
  return {
    file,
    value,
    has: (pointer) => offsets.has(pointer),
    locate,
    at(pointer, message, part) {
      const { line, col } = locate(pointer, part);
      return { file, line, col, message };
    },
  };
}

/**
 * Parses one YAML document. Syntax errors become a diagnostic with the parser's position; the source
 * snippet js-yaml would print is left out because the offending line may hold a secret.
 */
export function parseYaml(
  source: string,
  file: string,
): { yaml: YamlFile | undefined; diagnostics: ConfigDiagnostic[] } {
  const starts = lineStarts(source);
  try {
    const events = parseEvents(source, { filename: file });
    const documents = constructFromEvents(events, { source, filename: file });
    if (documents.length > 1) {
      return {
        yaml: undefined,
        diagnostics: [{ file, line: 0, col: 0, message: 'expected a single YAML document, found several' }],
      };
    }
    const value = documents.length === 0 ? null : documents[0];
    return { yaml: makeYamlFile(file, value, collectOffsets(source, events), starts), diagnostics: [] };
  } catch (error) {
    if (error instanceof YAMLException) {
      const { line, col } =
        error.mark !== undefined ? positionOf(starts, error.mark.position) : { line: 0, col: 0 };
      return {
        yaml: undefined,
        diagnostics: [{ file, line, col, message: `YAML syntax error: ${error.reason}` }],
      };
    }
    throw error;
  }
}

/** Reads and parses a YAML file; an unreadable file is a diagnostic, not an exception. */
export async function readYaml(
  file: string,
  what: string,
): Promise<{ yaml: YamlFile | undefined; diagnostics: ConfigDiagnostic[] }> {
  let source: string;
  try {
    source = await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is a directory' : (code ?? 'unreadable');
    return {
      yaml: undefined,
      diagnostics: [{ file, line: 0, col: 0, message: `cannot read ${what}: ${reason}` }],
    };
  }
  return parseYaml(source, file);
}

export { isObject as isPlainObject } from './json-guards.ts';
