// The request-side blocks of a rule body: upstream_config, auth, request and upstream.

import { BLOCK_DIRECTIVES, type BodyParts, type CompileContext } from './compile-context.ts';
import type { ArgNode, DirectiveNode, Pos } from './parser.ts';
import { providerSettingFromEnv } from './template.ts';
import type { AuthOp, CompiledTemplate, RequestOp, UpstreamOp } from './types.ts';

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

const TIMEOUT_KEYS: Readonly<Record<string, 'connectTimeoutMs' | 'headersTimeoutMs' | 'bodyTimeoutMs'>> = {
  connect_timeout_ms: 'connectTimeoutMs',
  headers_timeout_ms: 'headersTimeoutMs',
  body_timeout_ms: 'bodyTimeoutMs',
};
const MAX_TIMEOUT_MS = 2_147_483_647;

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

export function compileUpstreamConfig(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  const cfg: NonNullable<BodyParts['upstreamConfig']> = {};
  const seen = new Set<string>();
  for (const item of d.block?.directives ?? []) {
    if (!cx.leafOf(item, 'upstream_config')) {
      body.failed = true;
      continue;
    }
    if (seen.has(item.name)) {
      cx.error(item.loc, `duplicate "${item.name}"`);
      body.failed = true;
      continue;
    }
    seen.add(item.name);
    const v = keyValue(cx, item);
    if (v === undefined) {
      body.failed = true;
      continue;
    }
    if (item.name === 'base_url') {
      body.baseUrlInvalid = true;
      const t = cx.stringOrTemplate(v, 'base_url');
      const text = t === undefined ? undefined : baseUrlText(cx, t);
      if (!t) body.failed = true;
      else if (text === undefined) {
        cx.error(
          v.loc,
          'base_url may use $' +
            '{env.NAME}, $' +
            '{provider.region} and $' +
            '{provider.location}, no request variables',
        );
        body.failed = true;
      } else {
        const r = normalizeBaseUrl(text);
        if (r.ok) {
          cfg.baseUrl = r.url;
          body.baseUrlInvalid = false;
        } else {
          cx.error(v.loc, r.message);
          body.failed = true;
        }
      }
      continue;
    }
    if (v.kind !== 'number' || !Number.isInteger(v.value) || v.value < 1 || v.value > MAX_TIMEOUT_MS) {
      cx.error(v.loc, `${item.name} must be a whole number of milliseconds between 1 and ${MAX_TIMEOUT_MS}`);
      body.failed = true;
      continue;
    }
    // Every upstream_config directive other than base_url is a timeout.
    cfg[TIMEOUT_KEYS[item.name]!] = v.value;
  }
  body.upstreamConfig = cfg;
}

/**
 * A base_url template's text: `${provider.region}` and `${provider.location}` filled in from the
 * environment now (a host is fixed per load); undefined when it uses another variable. An unset setting
 * leaves a placeholder and is recorded, so the provider is reported and not offered, while a file that
 * names a region nobody uses still loads.
 *
 * Google names regional hosts `<location>-<service>.googleapis.com` and the global one
 * `<service>.googleapis.com`, so a host that starts with `${provider.location}-` loses that label when
 * the location is `global` (one provider file serves both).
 */
function baseUrlText(cx: CompileContext, t: CompiledTemplate): string | undefined {
  let out = '';
  const parts = t.parts;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if ('text' in p) {
      out += p.text;
      continue;
    }
    if (p.variable !== 'provider.region' && p.variable !== 'provider.location') return undefined;
    const setting = p.variable === 'provider.region' ? 'region' : 'location';
    cx.baseUrlSettings.add(setting);
    const value =
      cx.providerName === undefined ? undefined : providerSettingFromEnv(cx.providerName, setting, cx.env);
    const next = parts[i + 1];
    if (value === 'global' && setting === 'location' && out.endsWith('://') && next !== undefined) {
      if ('text' in next && next.text.startsWith('-')) {
        out += next.text.slice(1);
        i++;
        continue;
      }
    }
    out += value ?? `unset-${setting}`;
  }
  return out;
}

/** `key = value;`: the value, or undefined when the directive has another shape (reported). */
export function keyValue(cx: CompileContext, d: DirectiveNode): ArgNode | undefined {
  const [first, value] = d.args;
  if (d.args.length === 2 && first?.kind === 'equals') return value;
  const at = d.args.find((a, k) => (k === 0 ? a.kind !== 'equals' : k > 1))?.loc ?? d.loc;
  cx.error(at, `expected "${d.name} = <value>;"`);
  return undefined;
}

/** An AWS service name as SigV4 signs it (`bedrock`, `execute-api`, `s3`). */
const SIGV4_SERVICE = /^[a-z0-9][a-z0-9-]*$/;

export function compileAuth(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  let noneAt: Pos | undefined;
  const cloudAt = new Map<string, Pos>();
  const ops = cx.blockOps(
    d,
    body,
    (item) => authOp(cx, item),
    (op, item) => {
      if (op.op === 'auth_none') noneAt = item.loc;
      if (op.op === 'auth_sigv4' || op.op === 'auth_google' || op.op === 'auth_entra') {
        if (!cx.once(cloudAt.get(op.op), op.op, item.loc)) return false;
        cloudAt.set(op.op, item.loc);
      }
      return true;
    },
  );
  if (noneAt && ops.length > 1) {
    cx.error(noneAt, 'auth_none cannot be combined with other auth directives');
    body.failed = true;
  }
  body.auth = ops;
}
function authOp(cx: CompileContext, d: DirectiveNode): AuthOp | undefined {
  switch (d.name) {
    case 'auth_bearer':
    case 'auth_none':
    case 'auth_google':
    case 'auth_entra':
      return cx.noBlock(d) && cx.arity(d, []) ? { op: d.name } : undefined;
    case 'auth_sigv4': {
      const args = cx.noBlock(d) ? cx.arity(d, ['service']) : undefined;
      if (!args) return undefined;
      const s = cx.str(args[0], 'the AWS service name');
      if (s && !SIGV4_SERVICE.test(s.value)) {
        cx.error(s.loc, `invalid AWS service name ${JSON.stringify(s.value)} (for example "bedrock")`);
        return undefined;
      }
      return s ? { op: 'auth_sigv4', service: s.value } : undefined;
    }
    case 'auth_header_key': {
      const args = cx.noBlock(d) ? cx.arity(d, ['header name']) : undefined;
      if (!args) return undefined;
      const header = cx.headerName(args[0]);
      return header ? { op: 'auth_header_key', header } : undefined;
    }
    case 'auth_query_key': {
      const args = cx.noBlock(d) ? cx.arity(d, ['query parameter']) : undefined;
      if (!args) return undefined;
      const s = cx.str(args[0], 'the query parameter');
      if (s && s.value === '') cx.error(s.loc, 'the query parameter name must not be empty');
      return s && s.value !== '' ? { op: 'auth_query_key', param: s.value } : undefined;
    }
    default:
      cx.unknownDirective(d, 'auth', BLOCK_DIRECTIVES.auth);
      return undefined;
  }
}

export function compileRequest(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  body.request = cx.blockOps(
    d,
    body,
    (item) => requestOp(cx, item),
    (op, item) => {
      if (op.op !== 'req_map') return true;
      if (!cx.once(body.reqMapLoc, 'req_map', item.loc)) return false;
      body.reqMapLoc = item.loc;
      return true;
    },
  );
}
function requestOp(cx: CompileContext, d: DirectiveNode): RequestOp | undefined {
  if (!cx.leafOf(d, 'request')) return undefined;
  switch (d.name) {
    case 'set_header': {
      const args = cx.arity(d, ['name', 'value']);
      if (!args) return undefined;
      const header = cx.headerName(args[0]);
      const value = cx.stringOrTemplate(args[1], 'the header value');
      if (header && MANAGED_HEADERS.has(header)) {
        cx.error(args[0].loc, `header "${header}" is managed by the gateway and cannot be set`);
        return undefined;
      }
      if (value && /[\r\n\0]/.test(value.source)) {
        cx.error(args[1].loc, 'a header value must not contain line breaks or NUL');
        return undefined;
      }
      return header && value ? { op: 'set_header', name: header, value } : undefined;
    }
    case 'pass_header':
    case 'del_header': {
      const args = cx.arity(d, ['name']);
      if (!args) return undefined;
      const header = cx.headerName(args[0]);
      return header ? { op: d.name, name: header } : undefined;
    }
    case 'json_set': {
      const args = cx.arity(d, ['path', 'value']);
      if (!args) return undefined;
      const path = cx.jsonPath(args[0], false);
      const value = cx.literal(args[1], true);
      return path && value !== undefined ? { op: 'json_set', path, value } : undefined;
    }
    case 'json_del': {
      const args = cx.arity(d, ['path']);
      if (!args) return undefined;
      const path = cx.jsonPath(args[0], false);
      return path ? { op: 'json_del', path } : undefined;
    }
    default: {
      const args = cx.arity(d, ['translator']);
      if (!args) return undefined;
      const translator = cx.registryName(args[0], 'translator', cx.requestTranslators);
      return translator ? { op: 'req_map', translator } : undefined;
    }
  }
}

export function compileUpstream(cx: CompileContext, d: DirectiveNode, body: BodyParts): void {
  body.upstream = cx.blockOps(d, body, (item) => upstreamOp(cx, item));
}
function upstreamOp(cx: CompileContext, d: DirectiveNode): UpstreamOp | undefined {
  if (!cx.leafOf(d, 'upstream')) return undefined;
  switch (d.name) {
    case 'set_path': {
      const args = cx.arity(d, ['path']);
      if (!args) return undefined;
      const value = cx.stringOrTemplate(args[0], 'the path');
      if (!value) return undefined;
      if (!value.source.startsWith('/')) {
        cx.error(args[0].loc, 'set_path must start with "/"');
        return undefined;
      }
      if (/[?#\s]/.test(value.source)) {
        cx.error(args[0].loc, 'set_path must not contain "?", "#" or spaces; use set_query for parameters');
        return undefined;
      }
      return { op: 'set_path', value };
    }
    case 'set_query': {
      const args = cx.arity(d, ['name', 'value']);
      if (!args) return undefined;
      const n = cx.str(args[0], 'the query parameter');
      const value = cx.stringOrTemplate(args[1], 'the query value');
      if (n && n.value === '') cx.error(n.loc, 'the query parameter name must not be empty');
      return n && n.value !== '' && value ? { op: 'set_query', name: n.value, value } : undefined;
    }
    default: {
      const args = cx.arity(d, ['name']);
      if (!args) return undefined;
      const n = cx.str(args[0], 'the query parameter');
      return n ? { op: 'del_query', name: n.value } : undefined;
    }
  }
}
