// Usage presets of the endpoints that are not billed by tokens alone (docs/billing.md "Price units"):
// images by count, size and quality; speech by input characters; transcription and translation by
// seconds of audio (and tokens where the upstream reports them). Quantities the reply does not carry
// come from the request (fromRequest).

import { asObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue, Usage } from '../../../common/types.ts';
import { audioFileSeconds } from '../../usage/audio-duration.ts';
import { multipartParts } from '../../usage/multipart-parts.ts';
import { count } from '../../usage/sniffers.ts';
import type { RequestUsage, UsagePreset, UsageRequest, UsageSniffer } from '../../usage/types.ts';

function seconds(value: JsonValue | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

function text(value: JsonValue | undefined): string | undefined {
  return typeof value === 'string' && value !== '' && value.length <= 64 ? value : undefined;
}

function parseJson(data: string): JsonValue | undefined {
  try {
    return JSON.parse(data) as JsonValue;
  } catch {
    return undefined;
  }
}

function never<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** Token counts of a reply's `usage` object ({input_tokens, output_tokens, total_tokens}), if any. */
function tokenUsage(usageValue: JsonValue | undefined): Usage | undefined {
  const usage = asObject(usageValue);
  const input = count(usage?.['input_tokens']);
  const output = count(usage?.['output_tokens']);
  if (input === undefined && output === undefined) return undefined;
  return {
    inputTokens: input ?? 0,
    outputTokens: output ?? 0,
    totalTokens: count(usage?.['total_tokens']) ?? (input ?? 0) + (output ?? 0),
  };
}

const NONE: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };

const silentSniffer = (): UsageSniffer => ({ event() {}, result: () => undefined, final: () => false });

/** Text fields of a JSON body, else of a multipart body. */
function requestFields(request: UsageRequest): (name: string) => JsonValue | undefined {
  if (request.body !== undefined) {
    const body: JsonObject = request.body;
    return (name) => body[name];
  }
  const parts = multipartParts(request.contentType, request.rawBody);
  return (name) => {
    const part = parts.get(name);
    if (part === undefined || part.filename !== undefined || part.data.length > 64) return undefined;
    const value = part.data.toString('utf8');
    return name === 'n' ? Number(value) : value;
  };
}

// ---------------------------------------------------------------------------------------------------
// Images: generations and edits. The reply's `data` holds one entry per image made; gpt-image replies
// also state size and quality and carry token usage; dall-e replies carry neither, so size and quality
// come from the request (absent: the `default` price).

function imagesFromReply(body: JsonValue): Usage | undefined {
  const root = asObject(body);
  if (root === undefined) return undefined;
  const data = root['data'];
  const tokens = tokenUsage(root['usage']);
  if (!Array.isArray(data) && tokens === undefined) return undefined;
  const usage: Usage = { ...(tokens ?? NONE) };
  if (Array.isArray(data) && data.length > 0) usage.images = data.length;
  const size = text(root['size']);
  const quality = text(root['quality']);
  if (size !== undefined) usage.imageSize = size;
  if (quality !== undefined) usage.imageQuality = quality;
  return usage;
}

function imagesFromRequest(request: UsageRequest): RequestUsage | undefined {
  const field = requestFields(request);
  const n = count(field('n'));
  const usage: Usage = { ...NONE, images: n === undefined || n === 0 ? 1 : n };
  const size = text(field('size'));
  const quality = text(field('quality'));
  if (size !== undefined && size !== 'auto') usage.imageSize = size;
  if (quality !== undefined && quality !== 'auto') usage.imageQuality = quality;
  return { usage };
}

const openAiImages: UsagePreset = {
  name: 'openai_images',
  fromRequest: (request) => never(() => imagesFromRequest(request)),
  fromJson: (body) => never(() => imagesFromReply(body)),
  createSniffer: silentSniffer,
};

// ---------------------------------------------------------------------------------------------------
// Speech: the reply is audio bytes; the request's `input` is what is billed (characters, counted as
// Unicode code points, as vendors count them).

function codePoints(value: string): number {
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    // The high half of a surrogate pair counts; its low half does not.
    if (c < 0xdc00 || c > 0xdfff) n++;
  }
  return n;
}

const openAiSpeech: UsagePreset = {
  name: 'openai_speech',
  fromRequest(request) {
    const input = request.body?.['input'];
    if (typeof input !== 'string') return undefined;
    return { usage: { ...NONE, inputCharacters: codePoints(input) } };
  },
  fromJson: () => undefined,
  createSniffer: silentSniffer,
};

// ---------------------------------------------------------------------------------------------------
// Transcriptions and translations. The reply states the audio length in verbose_json (`duration`) and,
// in newer API versions, as `usage: {type: "duration", seconds}`; token-billed models report
// `usage: {type: "tokens", ...}`. text/srt/vtt replies state nothing: the length is then judged from
// the uploaded file (hooks/usage/audio-duration.ts) and the event is `estimated`.

function transcriptionFromReply(body: JsonValue): Usage | undefined {
  const root = asObject(body);
  if (root === undefined) return undefined;
  const usageValue = asObject(root['usage']);
  const tokens = tokenUsage(usageValue);
  const reported =
    usageValue?.['type'] === 'duration' ? seconds(usageValue['seconds']) : seconds(root['duration']);
  if (tokens === undefined && reported === undefined) return undefined;
  const usage: Usage = { ...(tokens ?? NONE) };
  if (reported !== undefined) usage.audioSeconds = reported;
  return usage;
}

function transcriptionFromRequest(request: UsageRequest): RequestUsage | undefined {
  const file = multipartParts(request.contentType, request.rawBody).get('file');
  if (file === undefined) return undefined;
  const length = audioFileSeconds(file.data);
  if (length === undefined) return undefined;
  return { usage: { ...NONE, audioSeconds: length.seconds }, estimated: 'audioSeconds' };
}

/** Streamed transcriptions end with `transcript.text.done`, which carries the usage. */
function transcriptionSniffer(): UsageSniffer {
  let latest: string | undefined;
  let done = false;
  return {
    event(_event, data) {
      if (typeof data !== 'string') return;
      if (data.includes('"usage"')) latest = data;
      if (data.includes('"transcript.text.done"')) done = true;
    },
    result() {
      if (latest === undefined) return undefined;
      const body = parseJson(latest);
      return body === undefined ? undefined : never(() => transcriptionFromReply(body));
    },
    final: () => done && latest !== undefined,
  };
}

const openAiTranscriptions: UsagePreset = {
  name: 'openai_audio_transcriptions',
  fromRequest: (request) => never(() => transcriptionFromRequest(request)),
  fromJson: (body) => never(() => transcriptionFromReply(body)),
  createSniffer: transcriptionSniffer,
};

export const UNIT_PRESETS: readonly UsagePreset[] = [openAiImages, openAiSpeech, openAiTranscriptions];
