// Endpoint table: method + path -> what the gateway does. Proxy routes carry their api identifier
// (docs/dsl.md) and the wire family of the client, which decides error and reply shapes. The families'
// routes come from the registry (hooks/families/index.ts); this file adds the gateway's own endpoints.

import { SUBJECT_STATE_PATH } from '../common/internal-notify.ts';
import type { ApiName, WireFormat } from '../common/types.ts';
import { DEFAULT_FAMILY, FAMILIES } from '../hooks/families/index.ts';
import { storedResponsePath } from '../hooks/families/response-state.ts';
import { type BodyKind, decodePathPart, type WireFamily } from '../hooks/families/types.ts';

export type { BodyKind };

export type Route =
  | {
      readonly kind: 'proxy';
      readonly api: ApiName;
      readonly format: WireFormat;
      readonly body: BodyKind;
      /** Routes that name the model in the path carry it here (decoded). */
      readonly pathModel?: string;
      /** The action after the model in such a path (`generateContent`). */
      readonly pathAction?: string;
      /** The path as it goes upstream when no rule sets one (rebuilt from the decoded model). */
      readonly upstreamPath?: string;
      /** The path itself asks for a stream. */
      readonly pathStream?: boolean;
    }
  | { readonly kind: 'models'; readonly format: WireFormat }
  | { readonly kind: 'model'; readonly format: WireFormat; readonly id: string }
  | { readonly kind: 'healthz' }
  | { readonly kind: 'readyz' }
  | { readonly kind: 'metrics' }
  | { readonly kind: 'webhook' }
  | { readonly kind: 'subject_state' }
  | { readonly kind: 'client_secret'; readonly format: WireFormat }
  /** GET or DELETE of a stored response (hooks/families/response-state.ts). */
  | { readonly kind: 'stored_response'; readonly format: WireFormat; readonly id: string }
  | { readonly kind: 'not_found'; readonly format: WireFormat }
  | { readonly kind: 'bad_path'; readonly format: WireFormat }
  | { readonly kind: 'method_not_allowed'; readonly format: WireFormat; readonly allow: string };

/** The families' fixed POST routes; a path two families declare is a registry error. */
function fixedRoutes(families: readonly WireFamily[]): ReadonlyMap<string, Route> {
  const table = new Map<string, Route>();
  for (const family of families) {
    for (const r of family.routes) {
      if (table.has(r.path)) throw new Error(`route ${r.path} is declared by two wire families`);
      table.set(r.path, { kind: 'proxy', api: r.api, format: family.name, body: r.body ?? 'json' });
    }
  }
  return table;
}

const POST_ROUTES = fixedRoutes(FAMILIES);

const HEALTHZ: Route = { kind: 'healthz' };
const READYZ: Route = { kind: 'readyz' };
const METRICS: Route = { kind: 'metrics' };
const WEBHOOK: Route = { kind: 'webhook' };
const SUBJECT_STATE: Route = { kind: 'subject_state' };
/** Short-lived secrets for realtime sessions (proxy/client-secret-endpoint.ts). */
export const CLIENT_SECRET_PATH = '/v1/realtime/client_secrets';

/** A POST path a family serves by pattern (the model in the path). */
function patternRoute(path: string): Route | undefined {
  for (const family of FAMILIES) {
    const match = family.matchPath?.(path);
    if (match === undefined) continue;
    if (match === 'bad_path') return { kind: 'bad_path', format: family.name };
    return {
      kind: 'proxy',
      api: match.api,
      format: family.name,
      body: 'json',
      pathModel: match.model,
      pathAction: match.action,
      upstreamPath: match.upstreamPath,
      pathStream: match.stream,
    };
  }
  return undefined;
}

/**
 * The family answering a model-list path: of the families serving it, the one whose SDKs the client's
 * key carrier identifies, else the first registered.
 */
function modelsFamily(
  served: (family: WireFamily) => boolean,
  carrier: string | undefined,
): WireFamily | undefined {
  const candidates = FAMILIES.filter((f) => f.models !== undefined && served(f));
  return candidates.find((f) => carrier === f.name) ?? candidates[0];
}

function modelRoute(path: string, carrier: string | undefined): Route | undefined {
  const list = modelsFamily((f) => f.models?.paths.includes(path) === true, carrier);
  if (list !== undefined) return { kind: 'models', format: list.name };
  const prefixOf = (f: WireFamily) => f.models?.paths.find((p) => path.startsWith(`${p}/`));
  const item = modelsFamily((f) => prefixOf(f) !== undefined, carrier);
  if (item === undefined) return undefined;
  const id = decodePathPart(path.slice(prefixOf(item)!.length + 1));
  if (id === undefined) return { kind: 'bad_path', format: item.name };
  return { kind: 'model', format: item.name, id };
}

/** The family whose error shape answers a request to `path` that no route serves. */
function pathFamily(path: string): WireFamily {
  return (
    FAMILIES.find((f) => f.ownsPath?.(path) === true || f.routes.some((r) => r.path === path)) ??
    DEFAULT_FAMILY
  );
}

/**
 * Resolve a route. `carrier` is the family whose SDKs the client's key carrier identifies
 * (carrierFamily() of the registry): on a model-list path several families serve, that family answers.
 */
export function resolveRoute(
  method: string,
  path: string,
  carrier: string | undefined,
  webhookPath: string,
): Route {
  if (method === 'POST') {
    const route = POST_ROUTES.get(path);
    if (route !== undefined) return route;
    if (path === webhookPath) return WEBHOOK;
    if (path === SUBJECT_STATE_PATH) return SUBJECT_STATE;
    if (path === CLIENT_SECRET_PATH) return { kind: 'client_secret', format: pathFamily(path).name };
    const pattern = patternRoute(path);
    if (pattern !== undefined) return pattern;
  } else if ((method === 'GET' || method === 'HEAD') && patternRoute(path) === undefined) {
    switch (path) {
      case '/healthz':
        return HEALTHZ;
      case '/readyz':
        return READYZ;
      case '/metrics':
        return METRICS;
    }
    const models = modelRoute(path, carrier);
    if (models !== undefined) return models;
  }
  if ((method === 'GET' || method === 'DELETE') && !POST_ROUTES.has(path)) {
    const stored = storedResponsePath(path);
    if (stored !== undefined) return { kind: 'stored_response', format: stored.spec.family, id: stored.id };
  }
  const format = pathFamily(path).name;
  if (
    POST_ROUTES.has(path) ||
    path === webhookPath ||
    path === CLIENT_SECRET_PATH ||
    patternRoute(path) !== undefined
  ) {
    return { kind: 'method_not_allowed', format, allow: 'POST' };
  }
  return { kind: 'not_found', format };
}
