// Gives the generic syntax tree its meaning: checks every directive, its arguments and the names it
// refers to (translators, transforms, usage presets), merges `defaults` into each `match` rule and
// produces the plain CompiledProvider objects the proxy reads per request. It reports as many problems
// as it can find in one pass, each at the exact line:col of the offending token.

import { basename, dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { API_NAMES, type ApiName, type JsonValue } from '../../common/types.ts';
import { parseJsonPath } from './json-path.ts';
import type { ArgNode, CallArg, DirectiveNode, FileNode, Pos, StringArg } from './parser.ts';
import { compileTemplate, constantTemplate } from './template.ts';
import type {
  AuthOp,
  CompiledProvider,
  CompiledRule,
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
  UsageField,
} from './types.ts';

export const SYNTAX_VERSION = 'next-router/0.1';

export const USAGE_FIELDS: readonly UsageField[] = [
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'cache_read_tokens',
  'cache_creation_tokens',
  'reasoning_tokens',
];

export interface CompileOptions {
  readonly registries: DslRegistries;
  /** Read for ROUTER_PROVIDER_<NAME>_BASE_URL and `${env.NAME}` in templates. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface CompileResult {
  readonly provider: CompiledProvider | undefined;
  readonly diagnostics: DslDiagnostic[];
}

type BlockName = 'upstream_config' | 'auth' | 'request' | 'upstream' | 'response' | 'metrics';

/** Directives of each block, used for "expected ..." lists and for "belongs in the X block" hints. */
const BLOCK_DIRECTIVES: Readonly<Record<BlockName, readonly string[]>> = {
  upstream_config: ['base_url', 'connect_timeout_ms', 'headers_timeout_ms', 'body_timeout_ms'],
  auth: ['auth_bearer', 'auth_header_key', 'auth_query_key', 'auth_none'],
  request: ['set_header', 'pass_header', 'del_header', 'json_set', 'json_del', 'req_map'],
  upstream: ['set_path', 'set_query', 'del_query'],
  response: ['resp_passthrough', 'resp_map', 'sse_parse'],
  metrics: ['usage_extract', 'usage_path'],
};
const BODY_DIRECTIVES = [...(Object.keys(BLOCK_DIRECTIVES) as BlockName[]), 'hook'];

const TIMEOUT_KEYS: Readonly<Record<string, 'connectTimeoutMs' | 'headersTimeoutMs' | 'bodyTimeoutMs'>> = {
  connect_timeout_ms: 'connectTimeoutMs',
  headers_timeout_ms: 'headersTimeoutMs',
  body_timeout_ms: 'bodyTimeoutMs',
};
const MAX_TIMEOUT_MS = 2_147_483_647;

const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers the gateway itself owns on the upstream connection; setting them would corrupt the request. */
const MANAGED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
]);
const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]*$/;

/** A rule body as compiled, with the locations the merge step needs for its own diagnostics. */
interface BodyParts {
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

interface MatchHead {
  readonly api: ApiName | undefined;
  readonly stream: boolean | undefined;
  readonly ok: boolean;
}

/** Environment variable that replaces a provider's base_url: ROUTER_PROVIDER_<NAME>_BASE_URL. */
export function baseUrlEnvName(provider: string): string {
  return `ROUTER_PROVIDER_${provider.toUpperCase().replace(/-/g, '_')}_BASE_URL`;
}

/**
 * Checks a base URL and normalizes it (trailing slashes removed). Returns an error message instead
 * when it is not an absolute http(s) URL without credentials, query or fragment.
 */
export function normalizeBaseUrl(raw: string): { ok: true; url: string } | { ok: false; message: string } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { ok: false, message: `base_url ${JSON.stringify(raw)} is not a valid URL` };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    return { ok: false, message: `base_url must use http or https, not "${u.protocol.slice(0, -1)}"` };
  }
  if (u.username || u.password) return { ok: false, message: 'base_url must not contain credentials' };
  if (u.search || u.hash || raw.includes('?') || raw.includes('#')) {
    return { ok: false, message: 'base_url must not contain a query or a fragment' };
  }
  return { ok: true, url: `${u.origin}${u.pathname}`.replace(/\/+$/, '') };
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** Compiles a parsed provider file. `file` is used for diagnostics and to resolve hook modules. */
export function compileAst(file: string, ast: FileNode, opts: CompileOptions): CompileResult {
  const diagnostics: DslDiagnostic[] = [];
  const { registries, env } = opts;

  function error(at: Pos, message: string): void {
    diagnostics.push({ file, line: at.line, col: at.col, message });
  }
  function loc(at: Pos): SourceLoc {
    return { file, line: at.line, col: at.col };
  }

  // ---- argument helpers ---------------------------------------------------------------------------

  /**
   * The directive's arguments, one per name, typed as a tuple of that length; undefined when the count
   * is wrong, reported at the first extra argument or at the directive.
   */
  function arity<const N extends readonly string[]>(
    d: DirectiveNode,
    names: N,
  ): { readonly [K in keyof N]: ArgNode } | undefined {
    const extra = d.args[names.length];
    if (extra !== undefined) {
      const what = names.length === 0 ? 'no arguments' : `at most ${plural(names.length, 'argument')}`;
      error(extra.loc, `"${d.name}" takes ${what} (${names.join(', ') || 'none'})`);
      return undefined;
    }
    if (d.args.length < names.length) {
      error(
        d.loc,
        `"${d.name}" expects ${plural(names.length, 'argument')} (${names.join(', ')}), got ${d.args.length}`,
      );
      return undefined;
    }
    return d.args as unknown as { readonly [K in keyof N]: ArgNode };
  }
  function noBlock(d: DirectiveNode): boolean {
    if (!d.block) return true;
    error(d.block.loc, `"${d.name}" takes no block; end it with ";"`);
    return false;
  }
  function needBlock(d: DirectiveNode): boolean {
    if (d.block) return true;
    error(d.loc, `"${d.name}" needs a block { ... }`);
    return false;
  }
  function str(a: ArgNode, what: string): StringArg | undefined {
    if (a.kind === 'string') return a;
    error(a.loc, `${what} must be a string in double quotes`);
    return undefined;
  }
  /** A name (translator, preset, field): a bare word or a string. */
  function name(a: ArgNode, what: string): { value: string; loc: Pos } | undefined {
    if (a.kind === 'word' || a.kind === 'string') return { value: a.value, loc: a.loc };
    error(a.loc, `${what} must be a name`);
    return undefined;
  }
  /** Position of character `index` of a string argument, for errors inside it. */
  function inString(s: StringArg, index: number): Pos {
    return { line: s.loc.line, col: s.cols[index] ?? s.loc.col };
  }
  function templateCall(c: CallArg): CompiledTemplate | undefined {
    if (c.name !== 'template') {
      error(c.loc, `unknown function "${c.name}" (only template("...") is known)`);
      return undefined;
    }
    const s = c.args[0];
    if (c.args.length !== 1 || s?.kind !== 'string') {
      error(c.loc, 'template(...) takes exactly one string');
      return undefined;
    }
    const r = compileTemplate(s.value, env);
    if (r.ok) return r.template;
    for (const e of r.errors) error(inString(s, e.index), e.message);
    return undefined;
  }
  /** A plain string (constant) or template("..."). */
  function stringOrTemplate(a: ArgNode, what: string): CompiledTemplate | undefined {
    if (a.kind === 'string') return constantTemplate(a.value);
    if (a.kind === 'call') return templateCall(a);
    error(a.loc, `${what} must be a string or template("...")`);
    return undefined;
  }
  function jsonPath(a: ArgNode, allowRoot: boolean): JsonPath | undefined {
    const s = str(a, 'a JSON path');
    if (!s) return undefined;
    const r = parseJsonPath(s.value);
    if (!r.ok) {
      error(inString(s, r.index), r.message);
      return undefined;
    }
    if (!allowRoot && r.path.length === 0) {
      error(s.loc, 'the JSON path must name a field, not the whole body "$"');
      return undefined;
    }
    return r.path;
  }
  function headerName(a: ArgNode): string | undefined {
    const s = str(a, 'a header name');
    if (!s) return undefined;
    if (!HEADER_TOKEN.test(s.value)) {
      error(s.loc, `invalid header name ${JSON.stringify(s.value)}`);
      return undefined;
    }
    return s.value.toLowerCase();
  }
  /** A JSON value: string, number, true/false/null, [ ... ], { "k": ... }; template(...) when allowed. */
  function literal(a: ArgNode, allowTemplate: boolean): JsonValue | CompiledTemplate | undefined {
    switch (a.kind) {
      case 'string':
        return a.value;
      case 'number':
        if (Number.isFinite(a.value)) return a.value;
        error(a.loc, `number ${a.raw} is out of range`);
        return undefined;
      case 'word':
        if (a.value === 'true') return true;
        if (a.value === 'false') return false;
        if (a.value === 'null') return null;
        error(a.loc, `expected a value (string, number, true, false, null), found "${a.value}"`);
        return undefined;
      case 'call':
        if (allowTemplate) return templateCall(a);
        error(a.loc, `${a.name}(...) is not allowed here; use a JSON value`);
        return undefined;
      case 'array': {
        const items: JsonValue[] = [];
        let ok = true;
        for (const item of a.items) {
          const v = literal(item, false) as JsonValue | undefined;
          if (v === undefined) ok = false;
          else items.push(v);
        }
        return ok ? items : undefined;
      }
      case 'object': {
        const obj: { [key: string]: JsonValue } = {};
        let ok = true;
        for (const e of a.entries) {
          const v = literal(e.value, false) as JsonValue | undefined;
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
        error(a.loc, 'unexpected "="');
        return undefined;
    }
  }
  function registryName(a: ArgNode, kind: string, known: ReadonlySet<string>): string | undefined {
    const n = name(a, `a ${kind} name`);
    if (!n) return undefined;
    if (known.has(n.value)) return n.value;
    const list = [...known].sort().join(', ');
    error(n.loc, `unknown ${kind} ${JSON.stringify(n.value)} (known: ${list || 'none'})`);
    return undefined;
  }
  function unknownDirective(d: DirectiveNode, where: string, expected: readonly string[]): void {
    const home = (Object.keys(BLOCK_DIRECTIVES) as BlockName[]).find((b) =>
      BLOCK_DIRECTIVES[b].includes(d.name),
    );
    const hint = home && home !== where ? `; "${d.name}" belongs in the ${home} block` : '';
    error(d.loc, `unknown directive "${d.name}" in ${where} (expected ${expected.join(', ')})${hint}`);
  }

  // ---- blocks of a rule body ----------------------------------------------------------------------

  function compileUpstreamConfig(d: DirectiveNode, body: BodyParts): void {
    const cfg: NonNullable<BodyParts['upstreamConfig']> = {};
    const seen = new Set<string>();
    for (const item of d.block?.directives ?? []) {
      if (!BLOCK_DIRECTIVES.upstream_config.includes(item.name)) {
        unknownDirective(item, 'upstream_config', BLOCK_DIRECTIVES.upstream_config);
        body.failed = true;
        continue;
      }
      if (seen.has(item.name)) {
        error(item.loc, `duplicate "${item.name}"`);
        body.failed = true;
        continue;
      }
      seen.add(item.name);
      const v = noBlock(item) ? keyValue(item) : undefined;
      if (v === undefined) {
        body.failed = true;
        continue;
      }
      if (item.name === 'base_url') {
        body.baseUrlInvalid = true;
        const t = stringOrTemplate(v, 'base_url');
        if (!t) body.failed = true;
        else if (!t.constant) {
          error(v.loc, 'base_url may use $' + '{env.NAME} but no request variables');
          body.failed = true;
        } else {
          const r = normalizeBaseUrl(t.parts.map((p) => ('text' in p ? p.text : '')).join(''));
          if (r.ok) {
            cfg.baseUrl = r.url;
            body.baseUrlInvalid = false;
          } else {
            error(v.loc, r.message);
            body.failed = true;
          }
        }
        continue;
      }
      if (v.kind !== 'number' || !Number.isInteger(v.value) || v.value < 1 || v.value > MAX_TIMEOUT_MS) {
        error(v.loc, `${item.name} must be a whole number of milliseconds between 1 and ${MAX_TIMEOUT_MS}`);
        body.failed = true;
        continue;
      }
      // Every upstream_config directive other than base_url is a timeout.
      cfg[TIMEOUT_KEYS[item.name]!] = v.value;
    }
    body.upstreamConfig = cfg;
  }

  /** `key = value;`: the value, or undefined when the directive has another shape (reported). */
  function keyValue(d: DirectiveNode): ArgNode | undefined {
    const [first, value] = d.args;
    if (d.args.length === 2 && first?.kind === 'equals') return value;
    const at = d.args.find((a, k) => (k === 0 ? a.kind !== 'equals' : k > 1))?.loc ?? d.loc;
    error(at, `expected "${d.name} = <value>;"`);
    return undefined;
  }

  function compileAuth(d: DirectiveNode, body: BodyParts): void {
    const ops: AuthOp[] = [];
    let noneAt: Pos | undefined;
    for (const item of d.block?.directives ?? []) {
      const op = authOp(item);
      if (!op) {
        body.failed = true;
        continue;
      }
      if (op.op === 'auth_none') noneAt = item.loc;
      ops.push(op);
    }
    if (noneAt && ops.length > 1) {
      error(noneAt, 'auth_none cannot be combined with other auth directives');
      body.failed = true;
    }
    body.auth = ops;
  }
  function authOp(d: DirectiveNode): AuthOp | undefined {
    switch (d.name) {
      case 'auth_bearer':
      case 'auth_none':
        return noBlock(d) && arity(d, []) ? { op: d.name } : undefined;
      case 'auth_header_key': {
        const args = noBlock(d) ? arity(d, ['header name']) : undefined;
        if (!args) return undefined;
        const header = headerName(args[0]);
        return header ? { op: 'auth_header_key', header } : undefined;
      }
      case 'auth_query_key': {
        const args = noBlock(d) ? arity(d, ['query parameter']) : undefined;
        if (!args) return undefined;
        const s = str(args[0], 'the query parameter');
        if (s && s.value === '') error(s.loc, 'the query parameter name must not be empty');
        return s && s.value !== '' ? { op: 'auth_query_key', param: s.value } : undefined;
      }
      default:
        unknownDirective(d, 'auth', BLOCK_DIRECTIVES.auth);
        return undefined;
    }
  }

  function compileRequest(d: DirectiveNode, body: BodyParts): void {
    const ops: RequestOp[] = [];
    for (const item of d.block?.directives ?? []) {
      const op = requestOp(item);
      if (!op) {
        body.failed = true;
        continue;
      }
      if (op.op === 'req_map') {
        if (body.reqMapLoc) {
          error(
            item.loc,
            `only one req_map per rule (the first is at ${body.reqMapLoc.line}:${body.reqMapLoc.col})`,
          );
          body.failed = true;
          continue;
        }
        body.reqMapLoc = item.loc;
      }
      ops.push(op);
    }
    body.request = ops;
  }
  function requestOp(d: DirectiveNode): RequestOp | undefined {
    if (!BLOCK_DIRECTIVES.request.includes(d.name)) {
      unknownDirective(d, 'request', BLOCK_DIRECTIVES.request);
      return undefined;
    }
    if (!noBlock(d)) return undefined;
    switch (d.name) {
      case 'set_header': {
        const args = arity(d, ['name', 'value']);
        if (!args) return undefined;
        const header = headerName(args[0]);
        const value = stringOrTemplate(args[1], 'the header value');
        if (header && MANAGED_HEADERS.has(header)) {
          error(args[0].loc, `header "${header}" is managed by the gateway and cannot be set`);
          return undefined;
        }
        if (value && /[\r\n\0]/.test(value.source)) {
          error(args[1].loc, 'a header value must not contain line breaks or NUL');
          return undefined;
        }
        return header && value ? { op: 'set_header', name: header, value } : undefined;
      }
      case 'pass_header':
      case 'del_header': {
        const args = arity(d, ['name']);
        if (!args) return undefined;
        const header = headerName(args[0]);
        return header ? { op: d.name, name: header } : undefined;
      }
      case 'json_set': {
        const args = arity(d, ['path', 'value']);
        if (!args) return undefined;
        const path = jsonPath(args[0], false);
        const value = literal(args[1], true);
        return path && value !== undefined ? { op: 'json_set', path, value } : undefined;
      }
      case 'json_del': {
        const args = arity(d, ['path']);
        if (!args) return undefined;
        const path = jsonPath(args[0], false);
        return path ? { op: 'json_del', path } : undefined;
      }
      default: {
        const args = arity(d, ['translator']);
        if (!args) return undefined;
        const translator = registryName(args[0], 'translator', registries.translators);
        return translator ? { op: 'req_map', translator } : undefined;
      }
    }
  }

  function compileUpstream(d: DirectiveNode, body: BodyParts): void {
    const ops: UpstreamOp[] = [];
    for (const item of d.block?.directives ?? []) {
      const op = upstreamOp(item);
      if (op) ops.push(op);
      else body.failed = true;
    }
    body.upstream = ops;
  }
  function upstreamOp(d: DirectiveNode): UpstreamOp | undefined {
    if (!BLOCK_DIRECTIVES.upstream.includes(d.name)) {
      unknownDirective(d, 'upstream', BLOCK_DIRECTIVES.upstream);
      return undefined;
    }
    if (!noBlock(d)) return undefined;
    switch (d.name) {
      case 'set_path': {
        const args = arity(d, ['path']);
        if (!args) return undefined;
        const value = stringOrTemplate(args[0], 'the path');
        if (!value) return undefined;
        if (!value.source.startsWith('/')) {
          error(args[0].loc, 'set_path must start with "/"');
          return undefined;
        }
        if (/[?#\s]/.test(value.source)) {
          error(args[0].loc, 'set_path must not contain "?", "#" or spaces; use set_query for parameters');
          return undefined;
        }
        return { op: 'set_path', value };
      }
      case 'set_query': {
        const args = arity(d, ['name', 'value']);
        if (!args) return undefined;
        const n = str(args[0], 'the query parameter');
        const value = stringOrTemplate(args[1], 'the query value');
        if (n && n.value === '') error(n.loc, 'the query parameter name must not be empty');
        return n && n.value !== '' && value ? { op: 'set_query', name: n.value, value } : undefined;
      }
      default: {
        const args = arity(d, ['name']);
        if (!args) return undefined;
        const n = str(args[0], 'the query parameter');
        return n ? { op: 'del_query', name: n.value } : undefined;
      }
    }
  }

  function compileResponse(d: DirectiveNode, body: BodyParts): void {
    const ops: ResponseOp[] = [];
    let passthroughAt: Pos | undefined;
    let mapAt: Pos | undefined;
    for (const item of d.block?.directives ?? []) {
      const op = responseOp(item);
      if (!op) {
        body.failed = true;
        continue;
      }
      if (op.op === 'resp_map') {
        if (mapAt) {
          error(item.loc, `only one resp_map per rule (the first is at ${mapAt.line}:${mapAt.col})`);
          body.failed = true;
          continue;
        }
        mapAt = item.loc;
      }
      if (op.op === 'resp_passthrough') passthroughAt = item.loc;
      ops.push(op);
    }
    if (passthroughAt && mapAt) {
      error(passthroughAt, 'resp_passthrough cannot be combined with resp_map');
      body.failed = true;
    }
    body.response = ops;
  }
  function responseOp(d: DirectiveNode): ResponseOp | undefined {
    if (!BLOCK_DIRECTIVES.response.includes(d.name)) {
      unknownDirective(d, 'response', BLOCK_DIRECTIVES.response);
      return undefined;
    }
    if (!noBlock(d)) return undefined;
    if (d.name === 'resp_passthrough') return arity(d, []) ? { op: 'resp_passthrough' } : undefined;
    if (d.name === 'resp_map') {
      const args = arity(d, ['translator']);
      if (!args) return undefined;
      const translator = registryName(args[0], 'translator', registries.translators);
      return translator ? { op: 'resp_map', translator } : undefined;
    }
    const args = arity(d, ['transform']);
    if (!args) return undefined;
    const transform = registryName(args[0], 'transform', registries.transforms);
    return transform ? { op: 'sse_parse', transform } : undefined;
  }

  function compileMetrics(d: DirectiveNode, body: BodyParts): void {
    const ops: MetricsOp[] = [];
    const fields = new Set<string>();
    let presetAt: Pos | undefined;
    for (const item of d.block?.directives ?? []) {
      const op = metricsOp(item);
      if (!op) {
        body.failed = true;
        continue;
      }
      if (op.op === 'usage_extract') {
        if (presetAt) {
          error(
            item.loc,
            `only one usage_extract per rule (the first is at ${presetAt.line}:${presetAt.col})`,
          );
          body.failed = true;
          continue;
        }
        presetAt = item.loc;
      } else {
        if (fields.has(op.field)) {
          error(item.loc, `duplicate usage_path for ${op.field}`);
          body.failed = true;
          continue;
        }
        fields.add(op.field);
      }
      ops.push(op);
    }
    body.metrics = ops;
  }
  function metricsOp(d: DirectiveNode): MetricsOp | undefined {
    if (!BLOCK_DIRECTIVES.metrics.includes(d.name)) {
      unknownDirective(d, 'metrics', BLOCK_DIRECTIVES.metrics);
      return undefined;
    }
    if (!noBlock(d)) return undefined;
    if (d.name === 'usage_extract') {
      const args = arity(d, ['preset']);
      if (!args) return undefined;
      const preset = registryName(args[0], 'usage preset', registries.usagePresets);
      return preset ? { op: 'usage_extract', preset } : undefined;
    }
    const args = arity(d, ['field', 'path']);
    if (!args) return undefined;
    const f = name(args[0], 'the usage field');
    const path = jsonPath(args[1], false);
    if (f && !(USAGE_FIELDS as readonly string[]).includes(f.value)) {
      error(f.loc, `unknown usage field ${JSON.stringify(f.value)} (known: ${USAGE_FIELDS.join(', ')})`);
      return undefined;
    }
    return f && path ? { op: 'usage_path', field: f.value as UsageField, path } : undefined;
  }

  function compileHook(d: DirectiveNode): HookRef | undefined {
    const args = arity(d, ['module path']);
    if (!args) return undefined;
    const s = str(args[0], 'the hook module path');
    if (!s) return undefined;
    if (s.value.trim() === '') {
      error(s.loc, 'the hook module path must not be empty');
      return undefined;
    }
    const options: Record<string, JsonValue> = {};
    let ok = true;
    for (const item of d.block?.directives ?? []) {
      if (Object.hasOwn(options, item.name)) {
        error(item.loc, `duplicate hook option "${item.name}"`);
        ok = false;
        continue;
      }
      const arg = noBlock(item) ? keyValue(item) : undefined;
      if (arg === undefined) {
        ok = false;
        continue;
      }
      const v = literal(arg, false) as JsonValue | undefined;
      if (v === undefined) ok = false;
      else
        Object.defineProperty(options, item.name, {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
    }
    if (!ok) return undefined;
    try {
      return { module: resolveHookModule(file, s.value), options, loc: loc(d.loc) };
    } catch (e) {
      error(s.loc, `invalid hook module path: ${(e as Error).message}`);
      return undefined;
    }
  }

  function compileBody(block: DirectiveNode['block']): BodyParts {
    const body: BodyParts = {
      upstreamConfig: undefined,
      auth: undefined,
      request: undefined,
      upstream: undefined,
      response: undefined,
      metrics: undefined,
      hooks: undefined,
      reqMapLoc: undefined,
      baseUrlInvalid: false,
      failed: false,
    };
    const seen = new Map<string, Pos>();
    for (const d of block?.directives ?? []) {
      if (d.name === 'hook') {
        const h = compileHook(d);
        if (!h) body.failed = true;
        else if (body.hooks) body.hooks.push(h);
        else body.hooks = [h];
        continue;
      }
      if (!(d.name in BLOCK_DIRECTIVES)) {
        const where = BLOCK_DIRECTIVES;
        const home = (Object.keys(where) as BlockName[]).find((b) => where[b].includes(d.name));
        const hint = home ? `; put "${d.name}" inside a ${home} { } block` : '';
        error(d.loc, `unknown directive "${d.name}" (expected ${BODY_DIRECTIVES.join(', ')})${hint}`);
        body.failed = true;
        continue;
      }
      const first = seen.get(d.name);
      if (first) {
        error(d.loc, `duplicate ${d.name} block (the first is at ${first.line}:${first.col})`);
        body.failed = true;
        continue;
      }
      seen.set(d.name, d.loc);
      if (!arity(d, []) || !needBlock(d)) {
        body.failed = true;
        continue;
      }
      switch (d.name as BlockName) {
        case 'upstream_config':
          compileUpstreamConfig(d, body);
          break;
        case 'auth':
          compileAuth(d, body);
          break;
        case 'request':
          compileRequest(d, body);
          break;
        case 'upstream':
          compileUpstream(d, body);
          break;
        case 'response':
          compileResponse(d, body);
          break;
        case 'metrics':
          compileMetrics(d, body);
          break;
      }
    }
    return body;
  }

  function compileMatchHead(d: DirectiveNode): MatchHead {
    let api: ApiName | undefined;
    let stream: boolean | undefined;
    let ok = true;
    const seen = new Set<string>();
    const args = d.args;
    let k = 0;
    while (k < args.length) {
      const key = args[k]!;
      if (key.kind !== 'word' || (key.value !== 'api' && key.value !== 'stream')) {
        error(key.loc, 'expected api = "<api>" or stream = true|false');
        return { api, stream, ok: false };
      }
      const eq = args[k + 1];
      const v = args[k + 2];
      if (eq?.kind !== 'equals' || v === undefined) {
        error(eq?.loc ?? key.loc, `expected ${key.value} = <value>`);
        return { api, stream, ok: false };
      }
      if (seen.has(key.value)) {
        error(key.loc, `duplicate "${key.value}" in match`);
        ok = false;
      }
      seen.add(key.value);
      if (key.value === 'api') {
        if (v.kind !== 'string') {
          error(v.loc, 'api must be a string in double quotes');
          ok = false;
        } else if (!(API_NAMES as readonly string[]).includes(v.value)) {
          error(v.loc, `unknown api ${JSON.stringify(v.value)} (known: ${API_NAMES.join(', ')})`);
          ok = false;
        } else api = v.value as ApiName;
      } else if (v.kind === 'word' && (v.value === 'true' || v.value === 'false')) {
        stream = v.value === 'true';
      } else {
        error(v.loc, 'stream must be true or false');
        ok = false;
      }
      k += 3;
    }
    if (!seen.has('api')) {
      error(d.loc, 'match needs api = "<api>"');
      ok = false;
    }
    return { api, stream, ok };
  }

  // ---- top level ----------------------------------------------------------------------------------

  let syntax: string | undefined;
  let syntaxSeen = false;
  let providerDirective: DirectiveNode | undefined;
  for (const d of ast.directives) {
    if (d.name === 'syntax') {
      if (syntaxSeen) {
        error(d.loc, 'duplicate syntax directive');
        continue;
      }
      syntaxSeen = true;
      if (providerDirective) error(d.loc, 'syntax must come before the provider block');
      const args = noBlock(d) ? arity(d, ['version']) : undefined;
      if (!args) continue;
      const s = str(args[0], 'the syntax version');
      if (!s) continue;
      if (s.value !== SYNTAX_VERSION) {
        error(s.loc, `unsupported syntax ${JSON.stringify(s.value)} (expected "${SYNTAX_VERSION}")`);
        continue;
      }
      syntax = s.value;
      continue;
    }
    if (d.name === 'provider') {
      if (providerDirective) {
        error(d.loc, 'only one provider per file');
        continue;
      }
      providerDirective = d;
      continue;
    }
    error(d.loc, `unknown directive "${d.name}" at the top level (expected syntax, provider)`);
  }
  if (!syntaxSeen)
    error({ line: 1, col: 1 }, `missing \`syntax "${SYNTAX_VERSION}";\` at the top of the file`);
  if (!providerDirective) {
    error({ line: 1, col: 1 }, 'missing provider "<name>" { ... } block');
    return { provider: undefined, diagnostics };
  }

  const pd = providerDirective;
  let providerName: string | undefined;
  let providerNameAt: Pos = pd.loc;
  const pdArgs = arity(pd, ['name']);
  if (pdArgs) {
    const s = str(pdArgs[0], 'the provider name');
    if (s && !PROVIDER_NAME.test(s.value)) {
      error(
        s.loc,
        `invalid provider name ${JSON.stringify(s.value)} (use lower-case letters, digits, "-" and "_")`,
      );
    } else if (s) {
      providerName = s.value;
      providerNameAt = s.loc;
      const base = basename(file);
      if (base.endsWith('.conf') && base.slice(0, -'.conf'.length) !== s.value) {
        error(s.loc, `provider name ${JSON.stringify(s.value)} does not match the file name "${base}"`);
      }
    }
  }
  needBlock(pd);

  let envBaseUrl: string | undefined;
  if (providerName) {
    const envName = baseUrlEnvName(providerName);
    const raw = env[envName];
    if (raw !== undefined && raw !== '') {
      const r = normalizeBaseUrl(raw);
      if (r.ok) envBaseUrl = r.url;
      else error(providerNameAt, `${envName}: ${r.message}`);
    }
  }

  let defaults: BodyParts | undefined;
  let defaultsAt: Pos | undefined;
  const matches: { d: DirectiveNode; head: MatchHead; body: BodyParts }[] = [];
  for (const d of pd.block?.directives ?? []) {
    if (d.name === 'defaults') {
      if (defaultsAt) {
        error(d.loc, `duplicate defaults block (the first is at ${defaultsAt.line}:${defaultsAt.col})`);
        continue;
      }
      defaultsAt = d.loc;
      if (arity(d, []) && needBlock(d)) defaults = compileBody(d.block);
      continue;
    }
    if (d.name === 'match') {
      const head = compileMatchHead(d);
      const body = needBlock(d) ? compileBody(d.block) : undefined;
      if (body) matches.push({ d, head, body });
      continue;
    }
    const home = BODY_DIRECTIVES.includes(d.name) ? `; "${d.name}" goes inside defaults or match` : '';
    error(d.loc, `unknown directive "${d.name}" in provider (expected defaults, match)${home}`);
  }
  if (pd.block && matches.length === 0) {
    error(pd.loc, 'the provider has no match rules');
  }

  const rules: CompiledRule[] = [];
  for (const [j, { d, head, body }] of matches.entries()) {
    const shadow = head.ok
      ? matches
          .slice(0, j)
          .find(
            (m) =>
              m.head.ok &&
              m.head.api === head.api &&
              (m.head.stream === undefined || m.head.stream === head.stream),
          )
      : undefined;
    if (shadow) {
      const s = shadow.d.loc;
      error(
        d.loc,
        `rule is unreachable: the rule at ${s.line}:${s.col} already matches everything it matches`,
      );
    }
    const rule = mergeRule(d, head, body);
    if (rule) rules.push(rule);
  }

  function mergeRule(d: DirectiveNode, head: MatchHead, body: BodyParts): CompiledRule | undefined {
    const def = defaults;
    if (def?.reqMapLoc && body.reqMapLoc) {
      const at = def.reqMapLoc;
      error(body.reqMapLoc, `only one req_map per rule (defaults already has one at ${at.line}:${at.col})`);
      return undefined;
    }
    const baseUrl = envBaseUrl ?? body.upstreamConfig?.baseUrl ?? def?.upstreamConfig?.baseUrl;
    if (baseUrl === undefined && !body.baseUrlInvalid && !def?.baseUrlInvalid) {
      error(
        d.loc,
        'no base_url for this rule: set upstream_config { base_url = "..."; } in the rule or in defaults',
      );
      return undefined;
    }
    if (!head.ok || body.failed || def?.failed || baseUrl === undefined || head.api === undefined)
      return undefined;
    return {
      api: head.api,
      stream: head.stream,
      loc: loc(d.loc),
      upstreamConfig: { ...def?.upstreamConfig, ...body.upstreamConfig, baseUrl },
      auth: body.auth ?? def?.auth ?? [],
      request: [...(def?.request ?? []), ...(body.request ?? [])],
      upstream: [...(def?.upstream ?? []), ...(body.upstream ?? [])],
      response: body.response ?? def?.response ?? [],
      metrics: body.metrics ?? def?.metrics ?? [],
      hooks: body.hooks ?? def?.hooks ?? [],
    };
  }

  if (diagnostics.length > 0 || !providerName || syntax === undefined)
    return { provider: undefined, diagnostics };
  return { provider: { name: providerName, file, syntax, rules }, diagnostics };
}

/**
 * Resolves a hook module as written in a provider file: `./x.ts` and `../x.ts` relative to the file's
 * folder, absolute paths and file: URLs as they are; a bare name (`my-hooks`) stays a package specifier
 * for the loader to import.
 */
export function resolveHookModule(providerFile: string, spec: string): string {
  if (spec.startsWith('file:')) return fileURLToPath(spec);
  if (isAbsolute(spec)) return spec;
  if (spec.startsWith('./') || spec.startsWith('../') || spec === '.' || spec === '..') {
    return resolve(dirname(resolve(providerFile)), spec);
  }
  return spec;
}
