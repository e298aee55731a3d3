// The response side of a rule body (response, metrics, hook) and the body as a whole: which block
// each directive opens, and a block written twice.

import { errorText } from '../../common/errors.ts';
import { hookModulePath } from '../../common/hook-module-path.ts';
import type { JsonValue } from '../../common/types.ts';
import {
  compileAuth,
  compileRequest,
  compileUpstream,
  compileUpstreamConfig,
  keyValue,
} from './compile-blocks.ts';
import {
  BLOCK_DIRECTIVES,
  type BlockName,
  BODY_DIRECTIVES,
  type BodyParts,
  type CompileContext,
} from './compile-context.ts';
import type { DirectiveNode, Pos } from './parser.ts';
import type { HookRef, MetricsOp, ResponseOp, UsageField } from './types.ts';

export const USAGE_FIELDS: readonly UsageField[] = [
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'cache_read_tokens',
  'cache_creation_tokens',
  'reasoning_tokens',
];

function compileResponse(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  let passthroughAt: Pos | undefined;
  let mapAt: Pos | undefined;
  body.response = cx.blockOps(
    d,
    body,
    (item) => responseOp(cx, item),
    (op, item) => {
      if (op.op === 'resp_passthrough') passthroughAt = item.loc;
      if (op.op !== 'resp_map') return true;
      if (!cx.once(mapAt, 'resp_map', item.loc)) return false;
      mapAt = item.loc;
      return true;
    },
  );
  if (passthroughAt && mapAt) {
    cx.error(passthroughAt, 'resp_passthrough cannot be combined with resp_map');
    body.failed = true;
  }
}
function responseOp(cx: CompileContext, d: DirectiveNode): ResponseOp | undefined {
  if (!cx.leafOf(d, 'response')) return undefined;
  if (d.name === 'resp_passthrough') return cx.arity(d, []) ? { op: 'resp_passthrough' } : undefined;
  if (d.name === 'resp_map') {
    const args = cx.arity(d, ['translator']);
    if (!args) return undefined;
    const translator = cx.registryName(args[0], 'translator', cx.registries.translators);
    return translator ? { op: 'resp_map', translator } : undefined;
  }
  const args = cx.arity(d, ['transform']);
  if (!args) return undefined;
  const transform = cx.registryName(args[0], 'transform', cx.registries.transforms);
  return transform ? { op: 'sse_parse', transform } : undefined;
}

function compileMetrics(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  const fields = new Set<string>();
  let presetAt: Pos | undefined;
  body.metrics = cx.blockOps(
    d,
    body,
    (item) => metricsOp(cx, item),
    (op, item) => {
      if (op.op === 'usage_extract') {
        if (!cx.once(presetAt, 'usage_extract', item.loc)) return false;
        presetAt = item.loc;
      } else if (fields.has(op.field)) {
        cx.error(item.loc, `duplicate usage_path for ${op.field}`);
        return false;
      } else {
        fields.add(op.field);
      }
      return true;
    },
  );
}
function metricsOp(cx: CompileContext, d: DirectiveNode): MetricsOp | undefined {
  if (!cx.leafOf(d, 'metrics')) return undefined;
  if (d.name === 'usage_extract') {
    const args = cx.arity(d, ['preset']);
    if (!args) return undefined;
    const preset = cx.registryName(args[0], 'usage preset', cx.registries.usagePresets);
    return preset ? { op: 'usage_extract', preset } : undefined;
  }
  const args = cx.arity(d, ['field', 'path']);
  if (!args) return undefined;
  const f = cx.name(args[0], 'the usage field');
  const path = cx.jsonPath(args[1], false);
  if (f && !(USAGE_FIELDS as readonly string[]).includes(f.value)) {
    cx.error(f.loc, `unknown usage field ${JSON.stringify(f.value)} (known: ${USAGE_FIELDS.join(', ')})`);
    return undefined;
  }
  return f && path ? { op: 'usage_path', field: f.value as UsageField, path } : undefined;
}

function compileHook(cx: CompileContext, d: DirectiveNode): HookRef | undefined {
  const args = cx.arity(d, ['module path']);
  if (!args) return undefined;
  const s = cx.str(args[0], 'the hook module path');
  if (!s) return undefined;
  if (s.value.trim() === '') {
    cx.error(s.loc, 'the hook module path must not be empty');
    return undefined;
  }
  const options: Record<string, JsonValue> = {};
  let ok = true;
  for (const item of d.block?.directives ?? []) {
    if (Object.hasOwn(options, item.name)) {
      cx.error(item.loc, `duplicate hook option "${item.name}"`);
      ok = false;
      continue;
    }
    const arg = cx.noBlock(item) ? keyValue(cx, item) : undefined;
    if (arg === undefined) {
      ok = false;
      continue;
    }
    const v = cx.literal(arg, false) as JsonValue | undefined;
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
    return { module: hookModulePath(s.value, cx.file), options, loc: cx.loc(d.loc) };
  } catch (e) {
    cx.error(s.loc, `invalid hook module path: ${errorText(e)}`);
    return undefined;
  }
}

const BLOCK_COMPILERS: Readonly<
  Record<BlockName, (cx: CompileContext, d: DirectiveNode, body: BodyParts) => void>
> = {
  upstream_config: compileUpstreamConfig,
  auth: compileAuth,
  request: compileRequest,
  upstream: compileUpstream,
  response: compileResponse,
  metrics: compileMetrics,
};

export function compileBody(cx: CompileContext, block: DirectiveNode['block']): BodyParts {
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
      const h = compileHook(cx, d);
      if (!h) body.failed = true;
      else if (body.hooks) body.hooks.push(h);
      else body.hooks = [h];
      continue;
    }
    if (!(d.name in BLOCK_DIRECTIVES)) {
      const where = BLOCK_DIRECTIVES;
      const home = (Object.keys(where) as BlockName[]).find((b) => where[b].includes(d.name));
      const hint = home ? `; put "${d.name}" inside a ${home} { } block` : '';
      cx.error(d.loc, `unknown directive "${d.name}" (expected ${BODY_DIRECTIVES.join(', ')})${hint}`);
      body.failed = true;
      continue;
    }
    const first = seen.get(d.name);
    if (first) {
      cx.error(d.loc, `duplicate ${d.name} block (the first is at ${first.line}:${first.col})`);
      body.failed = true;
      continue;
    }
    seen.set(d.name, d.loc);
    if (!cx.arity(d, []) || !cx.needBlock(d)) {
      body.failed = true;
      continue;
    }
    BLOCK_COMPILERS[d.name as BlockName](cx, d, body);
  }
  return body;
}
