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
  const directives = new Parser(file, tokens, diagnostics).parseDirectives(undefined, 0);
  return { ast: { directives }, diagnostics };
}

function endsStatement(t: Token): boolean {
  return t.kind === ';' || t.kind === '}' || t.kind === 'eof';
}

/** A recursive-descent parser over the tokens of one source; `i` is the next token. */
class Parser {
  private i = 0;
  private readonly file: string;
  private readonly tokens: readonly Token[];
  private readonly diagnostics: DslDiagnostic[];

  constructor(file: string, tokens: readonly Token[], diagnostics: DslDiagnostic[]) {
    this.file = file;
    this.tokens = tokens;
    this.diagnostics = diagnostics;
  }

  // tokenize always ends the list with `eof`, so it is never empty and `i` never passes its end.
  private peek(offset = 0): Token {
    return this.tokens[Math.min(this.i + offset, this.tokens.length - 1)]!;
  }
  private next(): Token {
    const t = this.tokens[this.i]!;
    if (this.i < this.tokens.length - 1) this.i += 1;
    return t;
  }
  private error(at: Pos, message: string): void {
    this.diagnostics.push({ file: this.file, line: at.line, col: at.col, message });
  }
  /** End position of the last consumed token (where a missing `;` belongs). */
  private prevEnd(): Pos {
    return this.i > 0 ? this.tokens[this.i - 1]!.end : this.tokens[0]!.pos;
  }

  /** Skips to just after the next `;` of this level, or stops before a `}` that closes it. */
  private recover(): void {
    let depth = 0;
    for (;;) {
      const t = this.peek();
      if (t.kind === 'eof') return;
      if (t.kind === '{') depth += 1;
      if (t.kind === '}') {
        if (depth === 0) return;
        depth -= 1;
        this.next();
        if (depth === 0) return;
        continue;
      }
      this.next();
      if (t.kind === ';' && depth === 0) return;
    }
  }

  parseDirectives(open: Token | undefined, depth: number): DirectiveNode[] {
    const out: DirectiveNode[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === 'eof') {
        if (open)
          this.error(t.pos, `expected "}" to close the block opened at ${open.pos.line}:${open.pos.col}`);
        return out;
      }
      if (t.kind === '}') {
        this.next();
        if (open) return out;
        this.error(t.pos, 'unexpected "}" with no block to close');
        continue;
      }
      if (t.kind === 'word') {
        const d = this.parseDirective(depth);
        if (d) out.push(d);
        continue;
      }
      this.error(t.pos, `expected a directive name, found ${describe(t)}`);
      if (t.kind === ';') this.next();
      else this.recover();
    }
  }

  private parseDirective(depth: number): DirectiveNode | undefined {
    const nameTok = this.next();
    const args: ArgNode[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === ';') {
        this.next();
        return { kind: 'directive', name: nameTok.text, args, block: undefined, loc: nameTok.pos };
      }
      if (t.kind === '{' && !this.startsObject()) {
        this.next();
        if (depth >= MAX_DEPTH) {
          this.error(t.pos, 'blocks are nested too deeply');
          this.i -= 1;
          this.recover();
          return undefined;
        }
        const directives = this.parseDirectives(t, depth + 1);
        return {
          kind: 'directive',
          name: nameTok.text,
          args,
          block: { directives, loc: t.pos },
          loc: nameTok.pos,
        };
      }
      const forgotSemicolon =
        t.kind === 'word' && DIRECTIVE_NAMES.has(t.text) && t.pos.line > this.prevEnd().line;
      if (t.kind === '}' || t.kind === 'eof' || forgotSemicolon) {
        const at = this.prevEnd();
        this.error(at, `expected ";" or "{" after directive "${nameTok.text}"`);
        return { kind: 'directive', name: nameTok.text, args, block: undefined, loc: nameTok.pos };
      }
      const arg = this.parseValue(depth);
      if (arg) args.push(arg);
      else {
        this.recover();
        return undefined;
      }
    }
  }

  /** True at `{ "key" :`, the only way an object literal can start. */
  private startsObject(): boolean {
    return this.peek().kind === '{' && this.peek(1).kind === 'string' && this.peek(2).kind === ':';
  }

  private parseValue(depth: number): ArgNode | undefined {
    const t = this.peek();
    if (depth >= MAX_DEPTH) {
      this.error(t.pos, 'values are nested too deeply');
      return undefined;
    }
    switch (t.kind) {
      case 'word': {
        this.next();
        if (this.peek().kind === '(') return this.parseCall(t, depth);
        return { kind: 'word', value: t.text, loc: t.pos };
      }
      case 'string':
        this.next();
        return { kind: 'string', value: t.text, loc: t.pos, cols: t.cols ?? [] };
      case 'number':
        this.next();
        return { kind: 'number', value: Number(t.text), raw: t.text, loc: t.pos };
      case '=':
        this.next();
        return { kind: 'equals', loc: t.pos };
      case '[':
        return this.parseArray(depth);
      case '{':
        if (this.startsObject()) return this.parseObject(depth);
        break;
      default:
        break;
    }
    this.error(t.pos, `unexpected ${describe(t)}`);
    return undefined;
  }

  /** Parses `(a, b, ...)` / `[a, b, ...]` item lists; the opening token is already consumed. */
  private parseList(close: TokenKind, open: Token, depth: number): ArgNode[] | undefined {
    const items = this.parseListItems(close, open, depth);
    if (!items) this.skipPast(open.kind, close);
    return items;
  }

  private parseListItems(close: TokenKind, open: Token, depth: number): ArgNode[] | undefined {
    const items: ArgNode[] = [];
    for (;;) {
      const t = this.peek();
      if (t.kind === close) {
        this.next();
        return items;
      }
      if (endsStatement(t)) {
        this.error(t.pos, `expected "${close}" to close "${open.kind}" at ${open.pos.line}:${open.pos.col}`);
        return undefined;
      }
      const v = this.parseValue(depth + 1);
      if (!v) return undefined;
      items.push(v);
      const sep = this.peek();
      if (sep.kind === ',') this.next();
      else if (sep.kind !== close && !endsStatement(sep)) {
        this.error(sep.pos, `expected "," or "${close}", found ${describe(sep)}`);
        return undefined;
      }
    }
  }

  /**
   * After an error inside `( [ {` of a value, skips to its closing bracket so that the rest of the
   * statement is not misread; stops early at `;` or the end of the file.
   */
  private skipPast(open: TokenKind, close: TokenKind): void {
    let depth = 1;
    for (;;) {
      const t = this.peek();
      if (t.kind === 'eof' || t.kind === ';' || (t.kind === '}' && close !== '}')) return;
      this.next();
      if (t.kind === open) depth += 1;
      else if (t.kind === close) {
        depth -= 1;
        if (depth === 0) return;
      }
    }
  }

  private parseCall(nameTok: Token, depth: number): CallArg | undefined {
    const open = this.next();
    const args = this.parseList(')', open, depth);
    return args ? { kind: 'call', name: nameTok.text, args, loc: nameTok.pos } : undefined;
  }

  private parseArray(depth: number): ArrayArg | undefined {
    const open = this.next();
    const items = this.parseList(']', open, depth);
    return items ? { kind: 'array', items, loc: open.pos } : undefined;
  }

  private parseObject(depth: number): ObjectArg | undefined {
    const open = this.next();
    const obj = this.parseObjectEntries(open, depth);
    if (!obj) this.skipPast('{', '}');
    return obj;
  }

  private parseObjectEntries(open: Token, depth: number): ObjectArg | undefined {
    const entries: ObjectEntry[] = [];
    for (;;) {
      const k = this.peek();
      if (k.kind === '}') {
        this.next();
        return { kind: 'object', entries, loc: open.pos };
      }
      if (k.kind !== 'string') {
        this.error(k.pos, `expected a string key or "}", found ${describe(k)}`);
        return undefined;
      }
      this.next();
      const colon = this.peek();
      if (colon.kind !== ':') {
        this.error(colon.pos, `expected ":" after the key, found ${describe(colon)}`);
        return undefined;
      }
      this.next();
      const v = this.parseValue(depth + 1);
      if (!v) return undefined;
      entries.push({ key: { kind: 'string', value: k.text, loc: k.pos, cols: k.cols ?? [] }, value: v });
      const sep = this.peek();
      if (sep.kind === ',') this.next();
      else if (sep.kind !== '}') {
        this.error(sep.pos, `expected "," or "}", found ${describe(sep)}`);
        return undefined;
      }
    }
  }
}
