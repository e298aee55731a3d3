// What every part of the DSL compiler shares: the diagnostics of one file and the checks of directive
// arguments (counts, strings, names, templates, JSON paths and values), each reporting at the exact
// line:col of the offending token.

import type { ApiName, JsonValue } from '../../common/types.ts';
import { parseJsonPath } from './json-path.ts';
import type { ArgNode, CallArg, DirectiveNode, Pos, StringArg } from './parser.ts';
import { compileTemplate, constantTemplate } from './template.ts';
import type {
  AuthOp,
  CompiledTemplate,
  DslDiagnostic,
  DslRegistries,
  HookRef,
  JsonPath,
  MetricsOp,
  RequestOp,
  ResponseOp,
  SourceLoc,
  UpstreamConfig,
  UpstreamOp,
} from './types.ts';

export type BlockName = 'upstream_config' | 'auth' | 'request' | 'upstream' | 'response' | 'metrics';

/** Directives of each block, used for "expected ..." lists and for "belongs in the X block" hints. */
export const BLOCK_DIRECTIVES: Readonly<Record<BlockName, readonly string[]>> = {
  upstream_config: ['base_url', 'connect_timeout_ms', 'headers_timeout_ms', 'body_timeout_ms'],
  auth: [
    'auth_bearer',
    'auth_header_key',
    'auth_query_key',
    'auth_none',
    'auth_sigv4',
    'auth_google',
    'auth_entra',
  ],
  request: ['set_header', 'pass_header', 'del_header', 'json_set', 'json_del', 'req_map'],
  upstream: ['set_path', 'set_query', 'del_query'],
  response: ['resp_passthrough', 'resp_map', 'sse_parse'],
  metrics: ['usage_extract', 'usage_path'],
};
export const BODY_DIRECTIVES = [...(Object.keys(BLOCK_DIRECTIVES) as BlockName[]), 'hook'];

const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A rule body as compiled, with the locations the merge step needs for its own diagnostics. */
export interface BodyParts {
  upstreamConfig: Partial<{ -readonly [K in keyof UpstreamConfig]: UpstreamConfig[K] }> | undefined;
  auth: AuthOp[] | undefined;
  request: RequestOp[] | undefined;
  upstream: UpstreamOp[] | undefined;
  response: ResponseOp[] | undefined;
  metrics: MetricsOp[] | undefined;
  hooks: HookRef[] | undefined;
  reqMapLoc: Pos | undefined;
  /** A base_url was written but is invalid (already reported; "no base_url" would be noise). */
  baseUrlInvalid: boolean;
  /** True when any directive of the body had an error (the rule is then not emitted). */
  failed: boolean;
}

export interface MatchHead {
  readonly api: ApiName | undefined;
  readonly stream: boolean | undefined;
  readonly model: string | undefined;
  readonly ok: boolean;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export class CompileContext {
  readonly diagnostics: DslDiagnostic[] = [];

  readonly file: string;
  readonly registries: DslRegistries;
  readonly env: Readonly<Record<string, string | undefined>>;

  /** Names `req_map` accepts: HTTP translators and realtime ones (which rule takes which: mergeRule). */
  readonly requestTranslators: ReadonlySet<string>;

  /** The provider's name once read (base_url's provider settings need it). */
  providerName: string | undefined;
  /** ROUTER_PROVIDER_<NAME>_BASE_URL is set: the file's base_url is not used. */
  baseUrlOverridden = false;
  /** Provider settings the file's base_url templates use. */
  readonly baseUrlSettings = new Set<'region' | 'location'>();

  constructor(file: string, registries: DslRegistries, env: Readonly<Record<string, string | undefined>>) {
    this.file = file;
    this.registries = registries;
    this.env = env;
    this.requestTranslators = new Set([
      ...registries.translators,
      ...(registries.realtimeTranslators?.keys() ?? []),
    ]);
  }

  error(at: Pos, message: string): void {
    this.diagnostics.push({ file: this.file, line: at.line, col: at.col, message });
  }

  loc(at: Pos): SourceLoc {
    return { file: this.file, line: at.line, col: at.col };
  }

  /**
   * The directive's arguments, one per name, typed as a tuple of that length; undefined when the count
   * is wrong, reported at the first extra argument or at the directive.
   */
  arity<const N extends readonly string[]>(
    d: DirectiveNode,
    names: N,
  ): { readonly [K in keyof N]: ArgNode } | undefined {
    const extra = d.args[names.length];
    if (extra !== undefined) {
      const what = names.length === 0 ? 'no arguments' : `at most ${plural(names.length, 'argument')}`;
      this.error(extra.loc, `"${d.name}" takes ${what} (${names.join(', ') || 'none'})`);
      return undefined;
    }
    if (d.args.length < names.length) {
      this.error(
        d.loc,
        `"${d.name}" expects ${plural(names.length, 'argument')} (${names.join(', ')}), got ${d.args.length}`,
      );
      return undefined;
    }
    return d.args as unknown as { readonly [K in keyof N]: ArgNode };
  }
  /**
   * The ops of a block, each compiled by `compileOne`; `accept` may refuse a compiled op (having reported
   * why). Any failure marks the body failed.
   */
  blockOps<Op>(
    d: DirectiveNode,
    body: BodyParts,
    compileOne: (item: DirectiveNode) => Op | undefined,
    accept: (op: Op, item: DirectiveNode) => boolean = () => true,
  ): Op[] {
    const ops: Op[] = [];
    for (const item of d.block?.directives ?? []) {
      const op = compileOne(item);
      if (op !== undefined && accept(op, item)) ops.push(op);
      else body.failed = true;
    }
    return ops;
  }
  /** False, reported, when a directive allowed once per rule was already given at `first`. */
  once(first: Pos | undefined, what: string, at: Pos): boolean {
    if (first === undefined) return true;
    this.error(at, `only one ${what} per rule (the first is at ${first.line}:${first.col})`);
    return false;
  }
  /** `d` is a directive of block `where` and takes no block of its own (each failure is reported). */
  leafOf(d: DirectiveNode, where: BlockName): boolean {
    if (!BLOCK_DIRECTIVES[where].includes(d.name)) {
      this.unknownDirective(d, where, BLOCK_DIRECTIVES[where]);
      return false;
    }
    return this.noBlock(d);
  }
  noBlock(d: DirectiveNode): boolean {
    if (!d.block) return true;
    this.error(d.block.loc, `"${d.name}" takes no block; end it with ";"`);
    return false;
  }
  needBlock(d: DirectiveNode): boolean {
    if (d.block) return true;
    this.error(d.loc, `"${d.name}" needs a block { ... }`);
    return false;
  }
  str(a: ArgNode, what: string): StringArg | undefined {
    if (a.kind === 'string') return a;
    this.error(a.loc, `${what} must be a string in double quotes`);
    return undefined;
  }
  /** A name (translator, preset, field): a bare word or a string. */
  name(a: ArgNode, what: string): { value: string; loc: Pos } | undefined {
    if (a.kind === 'word' || a.kind === 'string') return { value: a.value, loc: a.loc };
    this.error(a.loc, `${what} must be a name`);
    return undefined;
  }
  /** Position of character `index` of a string argument, for errors inside it. */
  inString(s: StringArg, index: number): Pos {
    return { line: s.loc.line, col: s.cols[index] ?? s.loc.col };
  }
  templateCall(c: CallArg): CompiledTemplate | undefined {
    if (c.name !== 'template') {
      this.error(c.loc, `unknown function "${c.name}" (only template("...") is known)`);
      return undefined;
    }
    const s = c.args[0];
    if (c.args.length !== 1 || s?.kind !== 'string') {
      this.error(c.loc, 'template(...) takes exactly one string');
      return undefined;
    }
    const r = compileTemplate(s.value, this.env);
    if (r.ok) return r.template;
    for (const e of r.errors) this.error(this.inString(s, e.index), e.message);
    return undefined;
  }
  /** A plain string (constant) or template("..."). */
  stringOrTemplate(a: ArgNode, what: string): CompiledTemplate | undefined {
    if (a.kind === 'string') return constantTemplate(a.value);
    if (a.kind === 'call') return this.templateCall(a);
    this.error(a.loc, `${what} must be a string or template("...")`);
    return undefined;
  }
  jsonPath(a: ArgNode, allowRoot: boolean): JsonPath | undefined {
    const s = this.str(a, 'a JSON path');
    if (!s) return undefined;
    const r = parseJsonPath(s.value);
    if (!r.ok) {
      this.error(this.inString(s, r.index), r.message);
      return undefined;
    }
    if (!allowRoot && r.path.length === 0) {
      this.error(s.loc, 'the JSON path must name a field, not the whole body "$"');
      return undefined;
    }
    return r.path;
  }
  headerName(a: ArgNode): string | undefined {
    const s = this.str(a, 'a header name');
    if (!s) return undefined;
    if (!HEADER_TOKEN.test(s.value)) {
      this.error(s.loc, `invalid header name ${JSON.stringify(s.value)}`);
      return undefined;
    }
    return s.value.toLowerCase();
  }
  /** A JSON value: string, number, true/false/null, [ ... ], { "k": ... }; template(...) when allowed. */
  literal(a: ArgNode, allowTemplate: boolean): JsonValue | CompiledTemplate | undefined {
    switch (a.kind) {
      case 'string':
        return a.value;
      case 'number':
        if (Number.isFinite(a.value)) return a.value;
        this.error(a.loc, `number ${a.raw} is out of range`);
        return undefined;
      case 'word':
        if (a.value === 'true') return true;
        if (a.value === 'false') return false;
        if (a.value === 'null') return null;
        this.error(a.loc, `expected a value (string, number, true, false, null), found "${a.value}"`);
        return undefined;
      case 'call':
        if (allowTemplate) return this.templateCall(a);
        this.error(a.loc, `${a.name}(...) is not allowed here; use a JSON value`);
        return undefined;
      case 'array': {
        const items: JsonValue[] = [];
        let ok = true;
        for (const item of a.items) {
          const v = this.literal(item, false) as JsonValue | undefined;
          if (v === undefined) ok = false;
          else items.push(v);
        }
        return ok ? items : undefined;
      }
      case 'object': {
        const obj: { [key: string]: JsonValue } = {};
        let ok = true;
        for (const e of a.entries) {
          const v = this.literal(e.value, false) as JsonValue | undefined;
          if (v === undefined) ok = false;
          else
            Object.defineProperty(obj, e.key.value, {
              value: v,
              enumerable: true,
              writable: true,
              configurable: true,
            });
        }
        return ok ? obj : undefined;
      }
      case 'equals':
        this.error(a.loc, 'unexpected "="');
        return undefined;
    }
  }
  registryName(a: ArgNode, kind: string, known: ReadonlySet<string>): string | undefined {
    const n = this.name(a, `a ${kind} name`);
    if (!n) return undefined;
    if (known.has(n.value)) return n.value;
    const list = [...known].sort().join(', ');
    this.error(n.loc, `unknown ${kind} ${JSON.stringify(n.value)} (known: ${list || 'none'})`);
    return undefined;
  }
  unknownDirective(d: DirectiveNode, where: string, expected: readonly string[]): void {
    const home = (Object.keys(BLOCK_DIRECTIVES) as BlockName[]).find((b) =>
      BLOCK_DIRECTIVES[b].includes(d.name),
    );
    const hint = home && home !== where ? `; "${d.name}" belongs in the ${home} block` : '';
    this.error(d.loc, `unknown directive "${d.name}" in ${where} (expected ${expected.join(', ')})${hint}`);
  }
}
