// Helpers around ConfigDiagnostic: JSON-pointer paths (the addressing ajv uses) and how a path is shown
// to an operator. Messages built here name keys, never values, so secrets cannot leak into them.

import type { ConfigDiagnostic } from './config-types.ts';

/** `file:line:col: message`, the format editors and CI annotators understand. */
export function formatDiagnostic(diagnostic: ConfigDiagnostic): string {
  return `${diagnostic.file}:${diagnostic.line}:${diagnostic.col}: ${diagnostic.message}`;
}

export function formatDiagnostics(diagnostics: readonly ConfigDiagnostic[]): string {
  return diagnostics.map(formatDiagnostic).join('\n');
}

function escapeSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

function unescapeSegment(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}

/** Appends one segment to a JSON pointer (`''` is the root). */
export function childPointer(pointer: string, segment: string | number): string {
  return `${pointer}/${escapeSegment(String(segment))}`;
}

export function pointerOf(segments: readonly (string | number)[]): string {
  return segments.reduce<string>((pointer, segment) => childPointer(pointer, segment), '');
}

export function splitPointer(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer.slice(1).split('/').map(unescapeSegment);
}

/** Drops the last segment; the root is its own parent. */
export function parentPointer(pointer: string): string {
  const cut = pointer.lastIndexOf('/');
  return cut <= 0 ? '' : pointer.slice(0, cut);
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const INDEX = /^(0|[1-9][0-9]*)$/;

/** `/billing/balance_enforcement/enabled` -> `billing.balance_enforcement.enabled`; `/hooks/0` -> `hooks[0]`. */
export function displayPath(pointer: string): string {
  let out = '';
  for (const segment of splitPointer(pointer)) {
    if (INDEX.test(segment)) out += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out === '' ? '(top level)' : out;
}
