// Endpoint table: method + path -> what the gateway does. Proxy routes carry their api identifier
// (docs/dsl.md) and the wire family of the client, which decides error and reply shapes.

import { SUBJECT_STATE_PATH } from '../common/internal-notify.ts';
import type { ApiName, WireFormat } from '../common/types.ts';

export type BodyKind = 'json' | 'multipart';

export type Route =
  | {
      readonly kind: 'proxy';
      readonly api: ApiName;
      readonly format: WireFormat;
      readonly body: BodyKind;
      /** Gemini-native routes carry the model in the path (decoded). */
      readonly pathModel?: string;
      /** The action after the model in a Gemini-native path (`generateContent`). */
      readonly pathAction?: string;
    }
  | { readonly kind: 'models'; readonly format: WireFormat }
  | { readonly kind: 'model'; readonly format: WireFormat; readonly id: string }
  | { readonly kind: 'healthz' }
  | { readonly kind: 'readyz' }
  | { readonly kind: 'metrics' }
  | { readonly kind: 'webhook' }
  | { readonly kind: 'subject_state' }
  | { readonly kind: 'not_found'; readonly format: WireFormat }
  | { readonly kind: 'bad_path'; readonly format: WireFormat }
  | { readonly kind: 'method_not_allowed'; readonly format: WireFormat; readonly allow: string };

function proxy(api: ApiName, format: WireFormat, body: BodyKind = 'json'): Route {
  return { kind: 'proxy', api, format, body };
}

const POST_ROUTES = new Map<string, Route>([
  ['/v1/chat/completions', proxy('chat.completions', 'openai')],
  ['/v1/completions', proxy('completions', 'openai')],
  ['/v1/responses', proxy('responses', 'openai')],
  ['/v1/messages', proxy('native.messages', 'anthropic')],
  ['/v1/embeddings', proxy('embeddings', 'openai')],
  ['/v1/images/generations', proxy('images.generations', 'openai')],
  ['/v1/images/edits', proxy('images.edits', 'openai', 'multipart')],
  ['/v1/audio/speech', proxy('audio.speech', 'openai')],
  ['/v1/audio/transcriptions', proxy('audio.transcriptions', 'openai', 'multipart')],
  ['/v1/audio/translations', proxy('audio.translations', 'openai', 'multipart')],
]);

const HEALTHZ: Route = { kind: 'healthz' };
const READYZ: Route = { kind: 'readyz' };
const METRICS: Route = { kind: 'metrics' };
const WEBHOOK: Route = { kind: 'webhook' };
const SUBJECT_STATE: Route = { kind: 'subject_state' };

/**
 * Resolve a route. `googleClient` is true when the caller authenticates the Google way
 * (`x-goog-api-key` or `?key=`): GET /v1/models then answers in the Gemini shape, because the current
 * @google/genai SDK lists models under /v1 as well as /v1beta.
 */
export function resolveRoute(
  method: string,
  path: string,
  googleClient: boolean,
  webhookPath: string,
): Route {
  if (method === 'POST') {
    const route = POST_ROUTES.get(path);
    if (route !== undefined) return route;
    if (path === webhookPath) return WEBHOOK;
    if (path === SUBJECT_STATE_PATH) return SUBJECT_STATE;
    const gemini = geminiModelAction(path);
    if (gemini !== undefined) return gemini;
  } else if ((method === 'GET' || method === 'HEAD') && geminiModelAction(path) === undefined) {
    switch (path) {
      case '/healthz':
        return HEALTHZ;
      case '/readyz':
        return READYZ;
      case '/metrics':
        return METRICS;
      case '/v1/models':
        return { kind: 'models', format: googleClient ? 'gemini' : 'openai' };
      case '/v1beta/models':
        return { kind: 'models', format: 'gemini' };
    }
    if (path.startsWith('/v1beta/models/')) {
      const id = decodePathPart(path.slice('/v1beta/models/'.length));
      if (id === undefined) return { kind: 'bad_path', format: 'gemini' };
      return { kind: 'model', format: 'gemini', id };
    }
    if (path.startsWith('/v1/models/')) {
      const format = googleClient ? 'gemini' : 'openai';
      const id = decodePathPart(path.slice('/v1/models/'.length));
      if (id === undefined) return { kind: 'bad_path', format };
      return { kind: 'model', format, id };
    }
  }
  const format: WireFormat = path.startsWith('/v1beta/')
    ? 'gemini'
    : path === '/v1/messages'
      ? 'anthropic'
      : 'openai';
  if (POST_ROUTES.has(path) || path === webhookPath || geminiModelAction(path) !== undefined) {
    return { kind: 'method_not_allowed', format, allow: 'POST' };
  }
  return { kind: 'not_found', format };
}

/** Percent-decoding of client input: undefined for malformed escapes (the client's 400, not a 500). */
function decodePathPart(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

const GEMINI_ACTIONS: Readonly<Record<string, ApiName>> = {
  generateContent: 'native.generateContent',
  streamGenerateContent: 'native.streamGenerateContent',
};

/** `/v1beta/models/{model}:generateContent` (also under /v1) -> the native route with its model. */
function geminiModelAction(path: string): Route | undefined {
  let rest: string;
  if (path.startsWith('/v1beta/models/')) rest = path.slice('/v1beta/models/'.length);
  else if (path.startsWith('/v1/models/')) rest = path.slice('/v1/models/'.length);
  else return undefined;
  const colon = rest.lastIndexOf(':');
  if (colon <= 0) return undefined;
  const action = rest.slice(colon + 1);
  const api = GEMINI_ACTIONS[action];
  if (api === undefined) return undefined;
  const model = decodePathPart(rest.slice(0, colon));
  if (model === undefined) return { kind: 'bad_path', format: 'gemini' };
  return { kind: 'proxy', api, format: 'gemini', body: 'json', pathModel: model, pathAction: action };
}
