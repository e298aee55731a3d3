// The OpenAI Realtime session configuration of openai_realtime_to_gemini_live: the session the client
// is shown, the Gemini Live setup message built from it, and what a client may ask of it. Gemini takes
// its configuration once, in the setup message: the client's first session.update shapes it, and any
// later change (a session.update, a response.create's own settings) is refused by field name.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { OPENAI_VOICES } from '../openai/realtime.ts';
import { asArray, jsonSchemaToGemini } from './translator-shared.ts';

/** PCM16 at 24 kHz: OpenAI Realtime's default format, what Gemini Live speaks and takes. */
const PCM_24K: JsonObject = { type: 'audio/pcm', rate: 24_000 };
export const INPUT_AUDIO_MIME = 'audio/pcm;rate=24000';

/** A field of a client message Gemini Live cannot carry, by its path (`session.audio.input.format`). */
export interface Refusal {
  readonly param: string;
  readonly message: string;
}

/** The session announced by session.created: OpenAI's defaults that Gemini Live serves as they are. */
export function defaultSession(id: string, model: string, expiresAt: number): JsonObject {
  return {
    type: 'realtime',
    object: 'realtime.session',
    id,
    model,
    output_modalities: ['audio'],
    instructions: '',
    tools: [],
    tool_choice: 'auto',
    max_output_tokens: 'inf',
    tracing: null,
    truncation: 'auto',
    prompt: null,
    expires_at: expiresAt,
    audio: {
      input: {
        format: PCM_24K,
        transcription: null,
        noise_reduction: null,
        turn_detection: { type: 'server_vad', create_response: true, interrupt_response: true },
      },
      output: { format: PCM_24K, speed: 1 },
    },
    include: null,
  };
}

export function outputIsAudio(session: JsonObject): boolean {
  return !asArray(session.output_modalities).includes('text');
}

/** Gemini's automatic activity detection is on unless the client turned turn detection off (`null`). */
export function detectsActivity(session: JsonObject): boolean {
  return audioSide(session, 'input').turn_detection !== null;
}

function audioSide(session: JsonObject, side: 'input' | 'output'): JsonObject {
  const audio = isObject(session.audio) ? session.audio[side] : undefined;
  return isObject(audio) ? audio : {};
}

/** Fields set by the server: a client may echo them back, they change nothing. */
const SERVER_FIELDS = new Set(['id', 'object', 'expires_at']);

/** The fields a session.update may name (nested objects list theirs); `true` is a leaf. */
type Shape = { readonly [key: string]: Shape | true };
const TURN_DETECTION: Shape = {
  type: true,
  threshold: true,
  prefix_padding_ms: true,
  silence_duration_ms: true,
  idle_timeout_ms: true,
  create_response: true,
  interrupt_response: true,
  eagerness: true,
};
const SESSION: Shape = {
  type: true,
  model: true,
  output_modalities: true,
  instructions: true,
  tools: true,
  tool_choice: true,
  max_output_tokens: true,
  tracing: true,
  truncation: true,
  prompt: true,
  include: true,
  audio: {
    input: { format: true, transcription: true, noise_reduction: true, turn_detection: TURN_DETECTION },
    output: { format: true, voice: true, speed: true },
  },
};

/** A value that asks for nothing: null, false, 0, '' or an empty list or object. */
function neutral(value: JsonValue | undefined): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  return isObject(value) && Object.keys(value).length === 0;
}

function unknownField(patch: JsonObject, shape: Shape, path: string): string | undefined {
  for (const [key, value] of Object.entries(patch)) {
    const known = shape[key];
    if (known === undefined) {
      if (!neutral(value)) return `${path}.${key}`;
      continue;
    }
    if (known !== true && isObject(value)) {
      const inner = unknownField(value, known, `${path}.${key}`);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

function merge(target: JsonObject, patch: JsonObject): JsonObject {
  const out: JsonObject = { ...target };
  for (const [key, value] of Object.entries(patch)) {
    const here = out[key];
    out[key] = isObject(here) && isObject(value) ? merge(here, value) : value;
  }
  return out;
}

function refuse(param: string, why: string): Refusal {
  return { param, message: `${param}: ${why}` };
}

/** The session after the client's first session.update, or why Gemini Live cannot serve it. */
export function updatedSession(
  session: JsonObject,
  patch: JsonObject,
): { session: JsonObject } | { refusal: Refusal } {
  const asked: JsonObject = {};
  for (const [key, value] of Object.entries(patch)) if (!SERVER_FIELDS.has(key)) asked[key] = value;
  if (asked.model !== undefined && asked.model !== session.model)
    return { refusal: refuse('session.model', 'the session keeps the model it was opened for (?model=)') };
  const unknown = unknownField(asked, SESSION, 'session');
  if (unknown !== undefined) return { refusal: refuse(unknown, 'not carried to Gemini Live') };
  const next = merge(session, asked);
  const refusal = sessionRefusal(next);
  return refusal === undefined ? { session: next } : { refusal };
}

function pcm24k(format: JsonValue | undefined): boolean {
  if (format === undefined) return true;
  return isObject(format) && format.type === 'audio/pcm' && (format.rate ?? 24_000) === 24_000;
}

function sessionRefusal(s: JsonObject): Refusal | undefined {
  if (s.type !== 'realtime') return refuse('session.type', 'only realtime sessions reach Gemini Live');
  const modalities = asArray(s.output_modalities);
  if (modalities.length !== 1 || (modalities[0] !== 'text' && modalities[0] !== 'audio'))
    return refuse('session.output_modalities', 'Gemini Live answers in one modality: ["text"] or ["audio"]');
  if (typeof s.instructions !== 'string') return refuse('session.instructions', 'must be a string');
  const tools = asArray(s.tools);
  for (const [i, tool] of tools.entries()) {
    if (!isObject(tool) || tool.type !== 'function' || typeof tool.name !== 'string')
      return refuse(`session.tools[${i}]`, 'only function tools are carried to Gemini Live');
  }
  if (s.tool_choice !== 'auto')
    return refuse('session.tool_choice', 'Gemini Live chooses tools itself ("auto")');
  const max = s.max_output_tokens;
  if (max !== 'inf' && !(typeof max === 'number' && Number.isInteger(max) && max > 0))
    return refuse('session.max_output_tokens', 'must be a positive whole number or "inf"');
  if (s.truncation !== 'auto')
    return refuse('session.truncation', 'Gemini Live keeps its own context ("auto")');
  if (!neutral(s.prompt)) return refuse('session.prompt', "stored prompts are OpenAI's; not carried");
  if (!neutral(s.include)) return refuse('session.include', 'not carried to Gemini Live');
  const input = audioSide(s, 'input');
  const output = audioSide(s, 'output');
  if (!pcm24k(input.format))
    return refuse('session.audio.input.format', 'Gemini Live takes PCM16 at 24 kHz here (audio/pcm, 24000)');
  if (!pcm24k(output.format))
    return refuse('session.audio.output.format', 'Gemini Live speaks PCM16 at 24 kHz (audio/pcm, 24000)');
  if (input.transcription !== null && input.transcription !== undefined && !isObject(input.transcription))
    return refuse('session.audio.input.transcription', 'must be an object or null');
  if (!neutral(input.noise_reduction))
    return refuse('session.audio.input.noise_reduction', 'Gemini Live has no noise reduction setting');
  if (output.voice !== undefined && typeof output.voice !== 'string')
    return refuse('session.audio.output.voice', 'must be a voice name');
  if (typeof output.voice === 'string' && OPENAI_VOICES.has(output.voice))
    return refuse(
      'session.audio.output.voice',
      `${output.voice} is OpenAI's; name a Gemini voice (Puck, Kore, ...)`,
    );
  if ((output.speed ?? 1) !== 1)
    return refuse('session.audio.output.speed', 'Gemini Live speaks at one speed');
  return turnDetectionRefusal(input.turn_detection);
}

function turnDetectionRefusal(td: JsonValue | undefined): Refusal | undefined {
  if (td === null || td === undefined) return undefined;
  const path = 'session.audio.input.turn_detection';
  if (!isObject(td)) return refuse(path, 'must be an object or null');
  if (td.type !== 'server_vad' && td.type !== 'semantic_vad')
    return refuse(`${path}.type`, 'must be server_vad or semantic_vad');
  if (td.create_response === false)
    return refuse(`${path}.create_response`, 'Gemini Live always answers a turn it detects');
  if ((td.threshold ?? 0.5) !== 0.5)
    return refuse(`${path}.threshold`, 'Gemini Live has no speech probability threshold');
  if (!neutral(td.idle_timeout_ms)) return refuse(`${path}.idle_timeout_ms`, 'not carried to Gemini Live');
  for (const key of ['prefix_padding_ms', 'silence_duration_ms'] as const) {
    const v = td[key];
    if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= 0))
      return refuse(`${path}.${key}`, 'must be a whole number of milliseconds');
  }
  const eagerness = td.eagerness ?? 'auto';
  if (typeof eagerness !== 'string' || !['auto', 'low', 'medium', 'high'].includes(eagerness))
    return refuse(`${path}.eagerness`, 'must be auto, low, medium or high');
  return undefined;
}

/** The setup message for a session (Gemini's first message): `models/<upstream model>` and the config. */
export function setupFor(session: JsonObject, model: string): JsonObject {
  const setup: JsonObject = { model: `models/${model}` };
  const audio = outputIsAudio(session);
  const generationConfig: JsonObject = { responseModalities: [audio ? 'AUDIO' : 'TEXT'] };
  if (typeof session.max_output_tokens === 'number')
    generationConfig.maxOutputTokens = session.max_output_tokens;
  const voice = asString(audioSide(session, 'output').voice);
  if (audio && voice !== undefined)
    generationConfig.speechConfig = { voiceConfig: { prebuiltVoiceConfig: { voiceName: voice } } };
  setup.generationConfig = generationConfig;
  const instructions = asString(session.instructions) ?? '';
  if (instructions !== '') setup.systemInstruction = { parts: [{ text: instructions }] };
  const declarations = asArray(session.tools).filter(isObject).map(functionDeclaration);
  if (declarations.length > 0) setup.tools = [{ functionDeclarations: declarations }];
  const input = audioSide(session, 'input');
  const realtimeInputConfig = inputConfig(input.turn_detection);
  if (realtimeInputConfig !== undefined) setup.realtimeInputConfig = realtimeInputConfig;
  if (isObject(input.transcription)) setup.inputAudioTranscription = {};
  // OpenAI clients always get the transcript of the audio they are sent.
  if (audio) setup.outputAudioTranscription = {};
  return { setup };
}

function functionDeclaration(tool: JsonObject): JsonObject {
  const declaration: JsonObject = { name: tool.name ?? '' };
  if (typeof tool.description === 'string') declaration.description = tool.description;
  if (isObject(tool.parameters)) {
    const parameters = jsonSchemaToGemini(tool.parameters);
    // An object schema without properties is rejected ("properties: should be non-empty").
    if (!isObject(parameters.properties) || Object.keys(parameters.properties).length > 0)
      declaration.parameters = parameters;
  }
  return declaration;
}

const END_SENSITIVITY: Readonly<Record<string, string>> = {
  low: 'END_SENSITIVITY_LOW',
  high: 'END_SENSITIVITY_HIGH',
};

function inputConfig(td: JsonValue | undefined): JsonObject | undefined {
  if (td === null) return { automaticActivityDetection: { disabled: true } };
  if (!isObject(td)) return undefined;
  const detection: JsonObject = {};
  if (typeof td.prefix_padding_ms === 'number') detection.prefixPaddingMs = td.prefix_padding_ms;
  if (typeof td.silence_duration_ms === 'number') detection.silenceDurationMs = td.silence_duration_ms;
  const end = td.eagerness === 'low' || td.eagerness === 'high' ? END_SENSITIVITY[td.eagerness] : undefined;
  if (end !== undefined) detection.endOfSpeechSensitivity = end;
  const config: JsonObject = {};
  if (Object.keys(detection).length > 0) config.automaticActivityDetection = detection;
  if (td.interrupt_response === false) config.activityHandling = 'NO_INTERRUPTION';
  return Object.keys(config).length > 0 ? config : undefined;
}

function sameJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The first field of `patch` whose value is not the session's (server-set fields aside). */
export function changedField(patch: JsonObject, current: JsonObject, path: string): string | undefined {
  for (const [key, value] of Object.entries(patch)) {
    if (path === 'session' && SERVER_FIELDS.has(key)) continue;
    const here = current[key];
    if (isObject(value) && isObject(here)) {
      const inner = changedField(value, here, `${path}.${key}`);
      if (inner !== undefined) return inner;
    } else if (!sameJson(value, here)) return `${path}.${key}`;
  }
  return undefined;
}

/** A later session.update: refused by the first field it would change. */
export function laterUpdateRefusal(session: JsonObject, patch: JsonObject): Refusal | undefined {
  const changed = changedField(patch, session, 'session');
  if (changed === undefined) return undefined;
  return refuse(changed, 'Gemini Live takes its configuration once, at the session start; it cannot change');
}

/** response.create's own settings: only those equal to the session's (and `metadata`) are served. */
export function responseRefusal(params: JsonObject, session: JsonObject): Refusal | undefined {
  for (const [key, value] of Object.entries(params)) {
    if (key === 'metadata' || (key === 'conversation' && (value === 'auto' || value === null))) continue;
    const param = `response.${key}`;
    if (key in session) {
      const changed =
        isObject(value) && isObject(session[key])
          ? changedField(value, session[key], param)
          : sameJson(value, session[key])
            ? undefined
            : param;
      if (changed !== undefined)
        return refuse(changed, 'Gemini Live takes its configuration at the session start, not per response');
    } else if (!neutral(value)) {
      return refuse(param, 'not carried to Gemini Live');
    }
  }
  return undefined;
}
