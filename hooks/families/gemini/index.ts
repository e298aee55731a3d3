// The Gemini family: the model and action in the path (`/v1beta/models/{model}:generateContent`, also
// under /v1), the key in `x-goog-api-key` or `?key=`, google.rpc status names in errors, the Gemini
// model list, and the translators between it and the completion-style family.

import { escapePathSegment } from '../../../common/path-segment.ts';
import type { ApiName } from '../../../common/types.ts';
import { decodePathPart, type ListedModel, type PathRoute, type WireFamily } from '../types.ts';
import { geminiBodySchemas } from './body-schemas.ts';
import { geminiErrorBody, geminiErrorEvent, googleStatusName } from './errors.ts';
import { geminiLiveToOpenaiRealtime } from './gemini-live-to-openai-realtime.ts';
import { geminiToOpenai } from './gemini-to-openai.ts';
import { geminiLive } from './live.ts';
import { openaiEmbeddingsToGemini } from './openai-embeddings-to-gemini.ts';
import { openaiRealtimeToGeminiLive } from './openai-realtime-to-gemini-live.ts';
import { openaiToGemini } from './openai-to-gemini.ts';
import { geminiRequestText } from './request-text.ts';
import { geminiTelemetry } from './telemetry.ts';
import { geminiTokenCount } from './token-count.ts';
import { geminiEmbedContent, geminiGenerateContent } from './usage.ts';

const ACTIONS: Readonly<Record<string, ApiName>> = {
  generateContent: 'native.generateContent',
  streamGenerateContent: 'native.streamGenerateContent',
  countTokens: 'native.countTokens',
};

const VERSIONS = ['/v1beta', '/v1'] as const;

/**
 * `/v1beta/models/{model}:{action}` (also under /v1). The upstream path is rebuilt from the decoded
 * model, escaped as one segment, so percent-escapes in the client's path cannot add a query, a fragment
 * or a dot segment.
 */
function matchPath(path: string): PathRoute | 'bad_path' | undefined {
  const version = VERSIONS.find((v) => path.startsWith(`${v}/models/`));
  if (version === undefined) return undefined;
  const rest = path.slice(`${version}/models/`.length);
  const colon = rest.lastIndexOf(':');
  if (colon <= 0) return undefined;
  const action = rest.slice(colon + 1);
  const api = ACTIONS[action];
  if (api === undefined) return undefined;
  const model = decodePathPart(rest.slice(0, colon));
  if (model === undefined) return 'bad_path';
  return {
    api,
    model,
    action,
    upstreamPath: `${version}/models/${escapePathSegment(model)}:${action}`,
    stream: api === 'native.streamGenerateContent',
  };
}

const model = (m: ListedModel) => ({
  name: `models/${m.id}`,
  version: '1',
  displayName: m.id,
  supportedGenerationMethods: m.id.includes('embedding')
    ? ['embedContent', 'batchEmbedContents']
    : ['generateContent', 'streamGenerateContent', 'countTokens'],
});

export const geminiFamily: WireFamily = {
  name: 'gemini',
  routes: [],
  matchPath,
  ownsPath: (path) => path.startsWith('/v1beta/'),
  // The @google/genai SDK lists models under /v1 as well as /v1beta; its key carrier tells it apart.
  models: {
    paths: ['/v1beta/models', '/v1/models'],
    apis: ['native.generateContent', 'native.streamGenerateContent'],
    list: (models) => ({ models: models.map(model) }),
    item: model,
  },
  keyHeaders: ['x-goog-api-key'],
  keyQuery: 'key',
  claimsModelPathsByCarrier: true,
  forwardedHeaders: [],
  // Without alt=sse streamGenerateContent answers one JSON array instead of server-sent events.
  upstreamQuery: (api) => (api === 'native.streamGenerateContent' ? { alt: 'sse' } : undefined),
  bodySchemas: geminiBodySchemas,
  errorType: googleStatusName,
  errorBody: geminiErrorBody,
  errorEvent: geminiErrorEvent,
  usagePresets: [geminiGenerateContent, geminiEmbedContent],
  usageFields: ['usageMetadata'],
  completionStyleUsage: false,
  requestText: geminiRequestText,
  replyTextFields: ['text'],
  translators: [openaiToGemini, geminiToOpenai, openaiEmbeddingsToGemini],
  tokenCount: geminiTokenCount,
  telemetry: geminiTelemetry,
  realtime: [geminiLive],
  realtimeTranslators: [openaiRealtimeToGeminiLive, geminiLiveToOpenaiRealtime],
};
