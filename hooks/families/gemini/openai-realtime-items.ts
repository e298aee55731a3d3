// OpenAI Realtime conversation items as Gemini Live messages, for openai_realtime_to_gemini_live: user
// and assistant messages become clientContent turns, function call outputs a toolResponse; what Gemini
// cannot take is refused by field name.

import { asObject, asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { INPUT_AUDIO_MIME, type Refusal } from './openai-realtime-config.ts';
import { asArray, parseJson } from './translator-shared.ts';

/**
 * A conversation item as the Gemini message that adds it, or why Gemini Live cannot take it.
 * `answerCall`: the name of the unanswered call an output answers (the call is then answered).
 */
export function itemToGemini(
  item: JsonObject,
  answerCall: (callId: string) => string | undefined,
): { message: JsonObject } | { refusal: Refusal } {
  if (item.type === 'function_call_output') {
    const callId = asString(item.call_id) ?? '';
    const name = answerCall(callId);
    if (name === undefined)
      return {
        refusal: { param: 'item.call_id', message: 'item.call_id: not a function call of this session' },
      };
    const output = asString(item.output) ?? '';
    const parsed = parseJson(output);
    const response = isObject(parsed) ? parsed : { output: parsed ?? output };
    return { message: { toolResponse: { functionResponses: [{ id: callId, name, response }] } } };
  }
  if (item.type !== 'message')
    return {
      refusal: {
        param: 'item.type',
        message: `item.type: ${label(item.type)} items are not carried to Gemini Live`,
      },
    };
  const role = item.role === 'assistant' ? 'model' : item.role === 'user' ? 'user' : undefined;
  if (role === undefined)
    return {
      refusal: {
        param: 'item.role',
        message:
          'item.role: Gemini Live takes system instructions at the session start only (session.instructions)',
      },
    };
  const parts: JsonObject[] = [];
  for (const [i, raw] of asArray(item.content).entries()) {
    const part = asObject(raw) ?? {};
    const mapped = contentPart(part, role);
    if (mapped === undefined)
      return {
        refusal: {
          param: `item.content[${i}].type`,
          message: `item.content[${i}].type: ${label(part.type)} is not carried to Gemini Live for a ${label(item.role)} item`,
        },
      };
    parts.push(mapped);
  }
  return { message: { clientContent: { turns: [{ role, parts }], turnComplete: false } } };
}

/** One OpenAI content part as a Gemini part; undefined when Gemini Live cannot take it. */
function contentPart(part: JsonObject, role: 'user' | 'model'): JsonObject | undefined {
  if (role === 'model')
    return (part.type === 'output_text' || part.type === 'text') && typeof part.text === 'string'
      ? { text: part.text }
      : undefined;
  if (part.type === 'input_text' && typeof part.text === 'string') return { text: part.text };
  if (part.type === 'input_audio' && typeof part.audio === 'string')
    return { inlineData: { mimeType: INPUT_AUDIO_MIME, data: part.audio } };
  if (part.type === 'input_image' && typeof part.image_url === 'string') {
    const data = /^data:([^;,]+);base64,(.*)$/s.exec(part.image_url);
    if (data !== null) return { inlineData: { mimeType: data[1]!, data: data[2]! } };
  }
  return undefined;
}

/** An item's content part as echoed to the client: audio is not sent back, only its place. */
export function withoutAudio(part: JsonValue): JsonValue {
  if (!isObject(part) || part.audio === undefined) return part;
  const { audio: _audio, ...rest } = part;
  return { ...rest, transcript: part.transcript ?? null };
}

/** A client value in an error message: a string as it is, anything else by its kind (never converted). */
function label(value: JsonValue | undefined): string {
  if (typeof value === 'string') return value;
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}
