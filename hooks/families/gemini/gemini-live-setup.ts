// The Gemini Live setup of gemini_live_to_openai_realtime: the client's `setup` message becomes the
// session.update OpenAI Realtime takes, or the close that names the first field OpenAI cannot carry.

import { asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { OPENAI_VOICES } from '../openai/realtime.ts';
import { asArray, geminiSchemaToJsonSchema } from './translator-shared.ts';

/**
 * A close of the client's session, its reason naming the field: 1007 for a message the Live API itself
 * refuses (as Gemini closes), 1008 for one it takes that OpenAI Realtime cannot carry; 1011 when OpenAI
 * fails.
 */
export interface Refusal {
  readonly code: 1007 | 1008 | 1011;
  readonly reason: string;
}

export function invalid(field: string, why: string): Refusal {
  return { code: 1007, reason: `${field}: ${why}` };
}

export function notCarried(field: string, why = 'not carried to OpenAI Realtime'): Refusal {
  return { code: 1008, reason: `${field}: ${why}` };
}

/** What the translator keeps of the setup besides the session. */
export interface LiveConfig {
  /** The OpenAI `session` of the session.update. */
  readonly session: JsonObject;
  readonly audioOut: boolean;
  readonly outputTranscription: boolean;
  /** Automatic activity detection (OpenAI's server VAD) is on. */
  readonly detectsActivity: boolean;
  /** The user's speech interrupts the model (activityHandling). */
  readonly interrupts: boolean;
}

const PCM_24K: JsonObject = { type: 'audio/pcm', rate: 24_000 };
/** OpenAI needs a model to transcribe input audio; Gemini's setup names none. */
export const TRANSCRIPTION_MODEL = 'gpt-4o-mini-transcribe';

const TOOL_CHOICE: Readonly<Record<string, string>> = {
  AUTO: 'auto',
  MODE_UNSPECIFIED: 'auto',
  ANY: 'required',
  NONE: 'none',
};

/**
 * A value that asks for nothing: null, false, '' or an empty list or object; `strict`, only null (an
 * empty object turns a feature on: `sessionResumption: {}`, `googleSearch: {}`).
 */
function neutral(value: JsonValue | undefined, strict: boolean): boolean {
  if (value === undefined || value === null) return true;
  if (strict) return false;
  if (value === false || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  return isObject(value) && Object.keys(value).length === 0;
}

/** The first field of `object` outside `known` that asks for something. */
function otherField(
  object: JsonObject,
  known: readonly string[],
  path: string,
  strict = false,
): Refusal | undefined {
  for (const [key, value] of Object.entries(object))
    if (!known.includes(key) && !neutral(value, strict)) return notCarried(`${path}.${key.slice(0, 40)}`);
  return undefined;
}

/** The client's setup as OpenAI's session, or why it cannot be. */
export function configFor(setup: JsonObject): { config: LiveConfig } | { refusal: Refusal } {
  const other = otherField(
    setup,
    [
      'model',
      'generationConfig',
      'systemInstruction',
      'tools',
      'toolConfig',
      'realtimeInputConfig',
      'inputAudioTranscription',
      'outputAudioTranscription',
    ],
    'setup',
    true,
  );
  if (other !== undefined) return { refusal: other };
  const session: JsonObject = { type: 'realtime' };
  const generation = setup.generationConfig ?? {};
  if (!isObject(generation)) return { refusal: invalid('setup.generationConfig', 'must be an object') };
  const gen = generationFields(generation, session);
  if ('refusal' in gen) return gen;
  const instructions = systemText(setup.systemInstruction);
  if (typeof instructions !== 'string') return { refusal: instructions };
  if (instructions !== '') session.instructions = instructions;
  const tools = toolsFor(setup.tools);
  if (!Array.isArray(tools)) return { refusal: tools };
  if (tools.length > 0) session.tools = tools;
  const choice = toolChoice(setup.toolConfig);
  if (typeof choice !== 'string') return { refusal: choice };
  if (choice !== 'auto') session.tool_choice = choice;
  const input = inputConfig(setup.realtimeInputConfig);
  if ('refusal' in input) return input;
  const audioInput: JsonObject = { format: PCM_24K, turn_detection: input.turnDetection };
  const transcription = setup.inputAudioTranscription;
  if (transcription !== undefined && transcription !== null) {
    if (!isObject(transcription))
      return { refusal: invalid('setup.inputAudioTranscription', 'must be an object') };
    const field = otherField(transcription, [], 'setup.inputAudioTranscription');
    if (field !== undefined) return { refusal: field };
    audioInput.transcription = { model: TRANSCRIPTION_MODEL };
  }
  const audioOutput: JsonObject = { format: PCM_24K };
  if (gen.voice !== undefined) audioOutput.voice = gen.voice;
  session.audio = { input: audioInput, output: audioOutput };
  const outputTranscription = setup.outputAudioTranscription;
  if (isObject(outputTranscription)) {
    const field = otherField(outputTranscription, [], 'setup.outputAudioTranscription');
    if (field !== undefined) return { refusal: field };
  }
  return {
    config: {
      session,
      audioOut: gen.audioOut,
      outputTranscription: isObject(outputTranscription),
      detectsActivity: input.turnDetection !== null,
      interrupts: input.interrupts,
    },
  };
}

function generationFields(
  g: JsonObject,
  session: JsonObject,
): { audioOut: boolean; voice: string | undefined } | { refusal: Refusal } {
  const path = 'setup.generationConfig';
  // OpenAI's GA sessions take no sampling settings (temperature was the beta's).
  const other = otherField(g, ['responseModalities', 'speechConfig', 'maxOutputTokens'], path);
  if (other !== undefined) return { refusal: other };
  const modalities = asArray(g.responseModalities).map((m) => (typeof m === 'string' ? m.toUpperCase() : ''));
  if (modalities.length > 1 || (modalities.length === 1 && !['TEXT', 'AUDIO'].includes(modalities[0]!)))
    return {
      refusal: notCarried(
        `${path}.responseModalities`,
        'OpenAI Realtime answers in one modality: TEXT or AUDIO',
      ),
    };
  // The Live API answers in audio unless asked for text.
  const audioOut = modalities[0] !== 'TEXT';
  session.output_modalities = [audioOut ? 'audio' : 'text'];
  const max = g.maxOutputTokens;
  if (max !== undefined && max !== null) {
    if (!(typeof max === 'number' && Number.isInteger(max) && max > 0))
      return { refusal: invalid(`${path}.maxOutputTokens`, 'must be a positive whole number') };
    session.max_output_tokens = max;
  }
  const speech = g.speechConfig;
  if (speech === undefined || speech === null) return { audioOut, voice: undefined };
  if (!isObject(speech)) return { refusal: invalid(`${path}.speechConfig`, 'must be an object') };
  const speechOther = otherField(speech, ['voiceConfig'], `${path}.speechConfig`);
  if (speechOther !== undefined) return { refusal: speechOther };
  const voicePath = `${path}.speechConfig.voiceConfig.prebuiltVoiceConfig.voiceName`;
  const voiceConfig = isObject(speech.voiceConfig) ? speech.voiceConfig : {};
  const voiceOther = otherField(voiceConfig, ['prebuiltVoiceConfig'], `${path}.speechConfig.voiceConfig`);
  if (voiceOther !== undefined) return { refusal: voiceOther };
  const prebuilt = isObject(voiceConfig.prebuiltVoiceConfig) ? voiceConfig.prebuiltVoiceConfig : {};
  const name = asString(prebuilt.voiceName);
  if (name === undefined) return { audioOut, voice: undefined };
  const voice = name.toLowerCase();
  if (!OPENAI_VOICES.has(voice))
    return {
      refusal: notCarried(voicePath, `${name.slice(0, 12)} is not OpenAI's (alloy, marin...)`),
    };
  return { audioOut, voice };
}

/** The system instruction's text, or why it cannot be carried. */
function systemText(value: JsonValue | undefined): string | Refusal {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (!isObject(value)) return invalid('setup.systemInstruction', 'must be a Content');
  const texts: string[] = [];
  for (const [i, raw] of asArray(value.parts).entries()) {
    const text = isObject(raw) ? asString(raw.text) : undefined;
    if (text === undefined)
      return notCarried(
        `setup.systemInstruction.parts[${i}]`,
        'only text parts are carried to OpenAI Realtime',
      );
    texts.push(text);
  }
  return texts.join('\n');
}

function toolsFor(value: JsonValue | undefined): JsonObject[] | Refusal {
  const out: JsonObject[] = [];
  for (const [i, raw] of asArray(value).entries()) {
    const path = `setup.tools[${i}]`;
    if (!isObject(raw)) return invalid(path, 'must be a Tool');
    const other = otherField(raw, ['functionDeclarations'], path, true);
    if (other !== undefined) return other;
    for (const [j, d] of asArray(raw.functionDeclarations).entries()) {
      const at = `${path}.functionDeclarations[${j}]`;
      if (!isObject(d) || typeof d.name !== 'string' || d.name === '')
        return invalid(`${at}.name`, 'is required');
      const field = otherField(d, ['name', 'description', 'parameters', 'parametersJsonSchema'], at);
      if (field !== undefined) return field;
      const tool: JsonObject = { type: 'function', name: d.name };
      if (typeof d.description === 'string') tool.description = d.description;
      tool.parameters = isObject(d.parametersJsonSchema)
        ? d.parametersJsonSchema
        : isObject(d.parameters)
          ? geminiSchemaToJsonSchema(d.parameters)
          : { type: 'object', properties: {} };
      out.push(tool);
    }
  }
  return out;
}

function toolChoice(value: JsonValue | undefined): string | Refusal {
  if (value === undefined || value === null) return 'auto';
  const config = isObject(value) && isObject(value.functionCallingConfig) ? value.functionCallingConfig : {};
  const other = isObject(value)
    ? otherField(value, ['functionCallingConfig'], 'setup.toolConfig')
    : undefined;
  if (other !== undefined) return other;
  const field = otherField(config, ['mode'], 'setup.toolConfig.functionCallingConfig');
  if (field !== undefined) return field;
  const mode = config.mode ?? 'AUTO';
  const choice = typeof mode === 'string' && Object.hasOwn(TOOL_CHOICE, mode) ? TOOL_CHOICE[mode] : undefined;
  return choice ?? notCarried('setup.toolConfig.functionCallingConfig.mode', 'must be AUTO, ANY or NONE');
}

function inputConfig(
  value: JsonValue | undefined,
): { turnDetection: JsonObject | null; interrupts: boolean } | { refusal: Refusal } {
  const path = 'setup.realtimeInputConfig';
  const config = isObject(value) ? value : {};
  const other = otherField(config, ['automaticActivityDetection', 'activityHandling', 'turnCoverage'], path);
  if (other !== undefined) return { refusal: other };
  const handling = config.activityHandling ?? 'START_OF_ACTIVITY_INTERRUPTS';
  if (
    typeof handling !== 'string' ||
    !['START_OF_ACTIVITY_INTERRUPTS', 'NO_INTERRUPTION', 'ACTIVITY_HANDLING_UNSPECIFIED'].includes(handling)
  )
    return { refusal: invalid(`${path}.activityHandling`, 'unknown value') };
  const interrupts = handling !== 'NO_INTERRUPTION';
  const coverage = config.turnCoverage ?? 'TURN_INCLUDES_ONLY_ACTIVITY';
  if (coverage !== 'TURN_INCLUDES_ONLY_ACTIVITY' && coverage !== 'TURN_COVERAGE_UNSPECIFIED')
    return {
      refusal: notCarried(`${path}.turnCoverage`, "OpenAI's turns hold the detected speech only"),
    };
  const aad = isObject(config.automaticActivityDetection) ? config.automaticActivityDetection : {};
  const at = `${path}.automaticActivityDetection`;
  for (const key of ['startOfSpeechSensitivity', 'endOfSpeechSensitivity']) {
    const level = aad[key];
    if (
      level !== undefined &&
      level !== null &&
      !(typeof level === 'string' && level.endsWith('_UNSPECIFIED'))
    )
      return {
        refusal: notCarried(`${at}.${key}`, 'OpenAI has a threshold, not levels'),
      };
  }
  const field = otherField(
    aad,
    [
      'disabled',
      'prefixPaddingMs',
      'silenceDurationMs',
      'startOfSpeechSensitivity',
      'endOfSpeechSensitivity',
    ],
    at,
  );
  if (field !== undefined) return { refusal: field };
  if (aad.disabled === true) return { turnDetection: null, interrupts };
  const vad: JsonObject = { type: 'server_vad', create_response: true, interrupt_response: interrupts };
  for (const [from, to] of [
    ['prefixPaddingMs', 'prefix_padding_ms'],
    ['silenceDurationMs', 'silence_duration_ms'],
  ] as const) {
    const v = aad[from];
    if (v === undefined || v === null) continue;
    if (!(typeof v === 'number' && Number.isInteger(v) && v >= 0))
      return { refusal: invalid(`${at}.${from}`, 'must be a whole number of milliseconds') };
    vad[to] = v;
  }
  return { turnDetection: vad, interrupts };
}
