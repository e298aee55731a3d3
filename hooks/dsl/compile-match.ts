// A match block's head (api = "...", stream = true|false) and the rule it yields once its body is
// merged with the provider's defaults.

import { globToRegExp } from '../../common/glob.ts';
import { API_NAMES, type ApiName, REALTIME_APIS } from '../../common/types.ts';
import type { BodyParts, CompileContext, MatchHead } from './compile-context.ts';
import type { DirectiveNode } from './parser.ts';
import type { CompiledRule, DslRegistries, RequestOp } from './types.ts';

export function compileMatchHead(cx: CompileContext, d: DirectiveNode): MatchHead {
  let api: ApiName | undefined;
  let stream: boolean | undefined;
  let model: string | undefined;
  let ok = true;
  const seen = new Set<string>();
  const args = d.args;
  let k = 0;
  while (k < args.length) {
    const key = args[k]!;
    if (key.kind !== 'word' || (key.value !== 'api' && key.value !== 'stream' && key.value !== 'model')) {
      cx.error(key.loc, 'expected api = "<api>", stream = true|false or model = "<glob>"');
      return { api, stream, model, ok: false };
    }
    const eq = args[k + 1];
    const v = args[k + 2];
    if (eq?.kind !== 'equals' || v === undefined) {
      cx.error(eq?.loc ?? key.loc, `expected ${key.value} = <value>`);
      return { api, stream, model, ok: false };
    }
    if (seen.has(key.value)) {
      cx.error(key.loc, `duplicate "${key.value}" in match`);
      ok = false;
    }
    seen.add(key.value);
    if (key.value === 'api') {
      if (v.kind !== 'string') {
        cx.error(v.loc, 'api must be a string in double quotes');
        ok = false;
      } else if (!(API_NAMES as readonly string[]).includes(v.value)) {
        cx.error(v.loc, `unknown api ${JSON.stringify(v.value)} (known: ${API_NAMES.join(', ')})`);
        ok = false;
      } else api = v.value as ApiName;
    } else if (key.value === 'model') {
      if (v.kind !== 'string' || v.value === '') {
        cx.error(v.loc, 'model must be a non-empty glob in double quotes (e.g. "*claude*")');
        ok = false;
      } else model = v.value;
    } else if (v.kind === 'word' && (v.value === 'true' || v.value === 'false')) {
      stream = v.value === 'true';
    } else {
      cx.error(v.loc, 'stream must be true or false');
      ok = false;
    }
    k += 3;
  }
  if (!seen.has('api')) {
    cx.error(d.loc, 'match needs api = "<api>"');
    ok = false;
  }
  return { api, stream, model, ok };
}

export function mergeRule(
  cx: CompileContext,
  d: DirectiveNode,
  head: MatchHead,
  body: BodyParts,
  defaults: BodyParts | undefined,
  envBaseUrl: string | undefined,
): CompiledRule | undefined {
  const def = defaults;
  if (def?.reqMapLoc && body.reqMapLoc) {
    const at = def.reqMapLoc;
    cx.error(body.reqMapLoc, `only one req_map per rule (defaults already has one at ${at.line}:${at.col})`);
    return undefined;
  }
  const reqMapAt = body.reqMapLoc ?? def?.reqMapLoc;
  const reqMap = [...(def?.request ?? []), ...(body.request ?? [])].find(
    (op): op is Extract<RequestOp, { op: 'req_map' }> => op.op === 'req_map',
  );
  if (reqMap !== undefined && reqMapAt !== undefined && head.api !== undefined) {
    const problem = translatorProblem(cx.registries, reqMap.translator, head.api);
    if (problem !== undefined) {
      cx.error(reqMapAt, problem);
      return undefined;
    }
  }
  const baseUrl = envBaseUrl ?? body.upstreamConfig?.baseUrl ?? def?.upstreamConfig?.baseUrl;
  if (baseUrl === undefined && !body.baseUrlInvalid && !def?.baseUrlInvalid) {
    cx.error(
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
    ...(head.model === undefined ? {} : { model: head.model, modelMatch: globToRegExp(head.model) }),
    loc: cx.loc(d.loc),
    upstreamConfig: { ...def?.upstreamConfig, ...body.upstreamConfig, baseUrl },
    auth: body.auth ?? def?.auth ?? [],
    request: [...(def?.request ?? []), ...(body.request ?? [])],
    upstream: [...(def?.upstream ?? []), ...(body.upstream ?? [])],
    response: body.response ?? def?.response ?? [],
    metrics: body.metrics ?? def?.metrics ?? [],
    hooks: body.hooks ?? def?.hooks ?? [],
  };
}

/** Why a rule of `api` cannot take the translator `name`: realtime rules take realtime translators only. */
function translatorProblem(registries: DslRegistries, name: string, api: ApiName): string | undefined {
  const clients = registries.realtimeTranslators?.get(name);
  if (clients !== undefined) {
    return clients === api
      ? undefined
      : `translator "${name}" translates realtime sessions of api "${clients}", not requests of api "${api}"`;
  }
  if (!REALTIME_APIS.has(api)) return undefined;
  const known = [...(registries.realtimeTranslators ?? [])]
    .filter(([, a]) => a === api)
    .map(([n]) => n)
    .sort();
  return `a realtime rule's req_map names a realtime translator (for api "${api}": ${known.join(', ') || 'none'})`;
}
