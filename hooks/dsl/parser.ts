// Parser of the provider DSL into a generic, nginx-like syntax tree: every statement is a directive
// (a name, arguments, then `;` or a `{ ... }` block). Meaning is given later by the compiler, the way
// nginx separates its config parser from the modules that interpret directives; this keeps error
// recovery simple (resynchronise on `;` and `}`) and lets the compiler report precise semantic errors.
// Every node carries the 1-based line:col of its first character.

import { type Pos, type Token, type TokenKind, tokenize } from './lexer.ts';
import type { DslDiagnostic } from './types.ts';

export type { Pos } from './lexer.ts';

export interface WordArg {
  readonly kind: 'word';
  readonly value: string;
  readonly loc: Pos;
}
export interface StringArg {
  readonly kind: 'string';
  readonly value: string;
  readonly loc: Pos;
  /** Source column of each UTF-16 unit of `value` (strings stay on one line). */
  readonly cols: readonly number[];
}
export interface NumberArg {
  readonly kind: 'number';
  readonly value: number;
  /** Source text, kept for printing. */
  readonly raw: string;
  readonly loc: Pos;
}
export interface EqualsArg {
  readonly kind: 'equals';
  readonly loc: Pos;
}
/** `name(arg, ...)`; only `template("...")` has a meaning today. */
export interface CallArg {
  readonly kind: 'call';
  readonly name: string;
  readonly args: readonly ArgNode[];
  readonly loc: Pos;
}
export interface ArrayArg {
  readonly kind: 'array';
  readonly items: readonly ArgNode[];
  readonly loc: Pos;
}
export interface ObjectEntry {
  readonly key: StringArg;
  readonly value: ArgNode;
}
/** `{ "key": value, ... }`; told apart from a block by the `"key":` that must follow the brace. */
export interface ObjectArg {
  readonly kind: 'object';
  readonly entries: readonly ObjectEntry[];
  readonly loc: Pos;
}
export type ArgNode = WordArg | StringArg | NumberArg | EqualsArg | CallArg | ArrayArg | ObjectArg;

export interface BlockNode {
  readonly directives: readonly DirectiveNode[];
  /** Position of `{`. */
  readonly loc: Pos;
}

export interface DirectiveNode {
  readonly kind: 'directive';
  readonly name: string;
  readonly args: readonly ArgNode[];
  readonly block: BlockNode | undefined;
  /** Position of the name. */
  readonly loc: Pos;
}

export interface FileNode {
  readonly directives: readonly DirectiveNode[];
}

export interface ParseResult {
  readonly ast: FileNode;
  readonly diagnostics: DslDiagnostic[];
}

/**
 * Every directive name of the language. When one of them starts a new line inside another directive's
 * arguments, the `;` before it was forgotten: the parser says so there instead of swallowing the next
 * statement (and its block) as arguments, which would bury the real mistake under confusing errors.
 */
const DIRECTIVE_NAMES = new Set([
  'syntax',
  'provider',
  'defaults',
  'match',
  'hook',
  'upstream_config',
  'base_url',
  'connect_timeout_ms',
  'headers_timeout_ms',
  'body_timeout_ms',
  'auth',
  'auth_bearer',
  'auth_header_key',
  'auth_query_key',
  'auth_none',
  'request',
  'set_header',
  'pass_header',
  'del_header',
  'json_set',
  'json_del',
  'req_map',
  'upstream',
  'set_path',
  'set_query',
  'del_query',
  'response',
  'resp_passthrough',
  'resp_map',
  'sse_parse',
  'metrics',
  'usage_extract',
  'usage_path',
]);

/** Deep nesting can only be a mistake (or an attack on the stack); stop well before the engine would. */
const MAX_DEPTH = 64;

function describe(t: Token): string {
  switch (t.kind) {
    case 'eof':
      return 'end of file';
    case 'word':
      return `"${t.text}"`;
    case 'string':
      return 'a string';
    case 'number':
      return `number ${t.text}`;
    default:
      return `"${t.kind}"`;
  }
}

/** Parses DSL source. Never throws; syntax errors come back as diagnostics with their positions. */
export function parse(file: string, source: string): ParseResult {
  const { tokens, errors } = tokenize(source);
  const diagnostics: DslDiagnostic[] = errors.map((e) => ({ file, ...e.pos, message: e.message }));
  let i = 0;

  // tokenize always ends the list with `eof`, so it is never empty and `i` never passes its end.
  function peek(offset = 0): Token {
    return tokens[Math.min(i + offset, tokens.length - 1)]!;
  }
  function next(): Token {
    const t = tokens[i]!;
    if (i < tokens.length - 1) i += 1;
    return t;
  }
  function error(at: Pos, message: string): void {
    diagnostics.push({ file, line: at.line, col: at.col, message });
  }
  /** End position of the last consumed token (where a missing `;` belongs). */
  function prevEnd(): Pos {
    return i > 0 ? tokens[i - 1]!.end : tokens[0]!.pos;
  }

  /** Skips to just after the next `;` of this level, or stops before a `}` that closes it. */
  function recover(): void {
    let depth = 0;
    for (;;) {
      const t = peek();
      if (t.kind === 'eof') return;
      if (t.kind === '{') depth += 1;
      if (t.kind === '}') {
        if (depth === 0) return;
        depth -= 1;
        next();
        if (depth === 0) return;
        continue;
      }
      next();
      if (t.kind === ';' && depth === 0) return;
    }
  }

  function parseDirectives(open: Token | undefined, depth: number): DirectiveNode[] {
    const out: DirectiveNode[] = [];
    for (;;) {
      const t = peek();
      if (t.kind === 'eof') {
        if (open) error(t.pos, `expected "}" to close the block opened at ${open.pos.line}:${open.pos.col}`);
        return out;
      }
      if (t.kind === '}') {
        next();
        if (open) return out;
        error(t.pos, 'unexpected "}" with no block to close');
        continue;
      }
      if (t.kind === 'word') {
        const d = parseDirective(depth);
        if (d) out.push(d);
        continue;
      }
      error(t.pos, `expected a directive name, found ${describe(t)}`);
      if (t.kind === ';') next();
      else recover();
    }
  }

  function parseDirective(depth: number): DirectiveNode | undefined {
    const nameTok = next();
    const args: ArgNode[] = [];
    for (;;) {
      const t = peek();
      if (t.kind === ';') {
        next();
        return { kind: 'directive', name: nameTok.text, args, block: undefined, loc: nameTok.pos };
      }
      if (t.kind === '{' && !startsObject()) {
        next();
        if (depth >= MAX_DEPTH) {
          error(t.pos, 'blocks are nested too deeply');
          i -= 1;
          recover();
          return undefined;
        }
        const directives = parseDirectives(t, depth + 1);
        return {
          kind: 'directive',
          name: nameTok.text,
          args,
          block: { directives, loc: t.pos },
          loc: nameTok.pos,
        };
      }
      const forgotSemicolon = t.kind === 'word' && DIRECTIVE_NAMES.has(t.text) && t.pos.line > prevEnd().line;
      if (t.kind === '}' || t.kind === 'eof' || forgotSemicolon) {
        const at = prevEnd();
        error(at, `expected ";" or "{" after directive "${nameTok.text}"`);
        return { kind: 'directive', name: nameTok.text, args, block: undefined, loc: nameTok.pos };
      }
      const arg = parseValue(depth);
      if (arg) args.push(arg);
      else {
        recover();
        return undefined;
      }
    }
  }

  /** True at `{ "key" :`, the only way an object literal can start. */
  function startsObject(): boolean {
    return peek().kind === '{' && peek(1).kind === 'string' && peek(2).kind === ':';
  }

  function parseValue(depth: number): ArgNode | undefined {
    const t = peek();
    if (depth >= MAX_DEPTH) {
      error(t.pos, 'values are nested too deeply');
      return undefined;
    }
    switch (t.kind) {
      case 'word': {
        next();
        if (peek().kind === '(') return parseCall(t, depth);
        return { kind: 'word', value: t.text, loc: t.pos };
      }
      case 'string':
        next();
        return { kind: 'string', value: t.text, loc: t.pos, cols: t.cols ?? [] };
      case 'number':
        next();
        return { kind: 'number', value: Number(t.text), raw: t.text, loc: t.pos };
      case '=':
        next();
        return { kind: 'equals', loc: t.pos };
      case '[':
        return parseArray(depth);
      case '{':
        if (startsObject()) return parseObject(depth);
        break;
      default:
        break;
    }
    error(t.pos, `unexpected ${describe(t)}`);
    return undefined;
  }

  /** Parses `(a, b, ...)` / `[a, b, ...]` item lists; the opening token is already consumed. */
  function parseList(close: TokenKind, open: Token, depth: number): ArgNode[] | undefined {
    const items = parseListItems(close, open, depth);
    if (!items) skipPast(open.kind, close);
    return items;
  }

  function parseListItems(close: TokenKind, open: Token, depth: number): ArgNode[] | undefined {
    const items: ArgNode[] = [];
    for (;;) {
      const t = peek();
      if (t.kind === close) {
        next();
        return items;
      }
      if (endsStatement(t)) {
        error(t.pos, `expected "${close}" to close "${open.kind}" at ${open.pos.line}:${open.pos.col}`);
        return undefined;
      }
      const v = parseValue(depth + 1);
      if (!v) return undefined;
      items.push(v);
      const sep = peek();
      if (sep.kind === ',') next();
      else if (sep.kind !== close && !endsStatement(sep)) {
        error(sep.pos, `expected "," or "${close}", found ${describe(sep)}`);
        return undefined;
      }
    }
  }

  function endsStatement(t: Token): boolean {
    return t.kind === ';' || t.kind === '}' || t.kind === 'eof';
  }

  /**
   * After an error inside `( [ {` of a value, skips to its closing bracket so that the rest of the
   * statement is not misread; stops early at `;` or the end of the file.
   */
  function skipPast(open: TokenKind, close: TokenKind): void {
    let depth = 1;
    for (;;) {
      const t = peek();
      if (t.kind === 'eof' || t.kind === ';' || (t.kind === '}' && close !== '}')) return;
      next();
      if (t.kind === open) depth += 1;
      else if (t.kind === close) {
        depth -= 1;
        if (depth === 0) return;
      }
    }
  }

  function parseCall(nameTok: Token, depth: number): CallArg | undefined {
    const open = next();
    const args = parseList(')', open, depth);
    return args ? { kind: 'call', name: nameTok.text, args, loc: nameTok.pos } : undefined;
  }

  function parseArray(depth: number): ArrayArg | undefined {
    const open = next();
    const items = parseList(']', open, depth);
    return items ? { kind: 'array', items, loc: open.pos } : undefined;
  }

  function parseObject(depth: number): ObjectArg | undefined {
    const open = next();
    const obj = parseObjectEntries(open, depth);
    if (!obj) skipPast('{', '}');
    return obj;
  }

  function parseObjectEntries(open: Token, depth: number): ObjectArg | undefined {
    const entries: ObjectEntry[] = [];
    for (;;) {
      const k = peek();
      if (k.kind === '}') {
        next();
        return { kind: 'object', entries, loc: open.pos };
      }
      if (k.kind !== 'string') {
        error(k.pos, `expected a string key or "}", found ${describe(k)}`);
        return undefined;
      }
      next();
      const colon = peek();
      if (colon.kind !== ':') {
        error(colon.pos, `expected ":" after the key, found ${describe(colon)}`);
        return undefined;
      }
      next();
      const v = parseValue(depth + 1);
      if (!v) return undefined;
      entries.push({ key: { kind: 'string', value: k.text, loc: k.pos, cols: k.cols ?? [] }, value: v });
      const sep = peek();
      if (sep.kind === ',') next();
      else if (sep.kind !== '}') {
        error(sep.pos, `expected "," or "}", found ${describe(sep)}`);
        return undefined;
      }
    }
  }

  const directives = parseDirectives(undefined, 0);
  return { ast: { directives }, diagnostics };
}
