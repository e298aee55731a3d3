// OpenAI Realtime responses as Gemini Live server messages, for gemini_live_to_openai_realtime: deltas
// become serverContent (modelTurn parts, transcriptions), a response's function calls one toolCall, and
// its response.done the turn's end with the usage as usageMetadata (on the toolCall when it called
// functions: the Live turn goes on after the client's toolResponse). A response cut by the user's speech
// or by a new client turn is `interrupted`.

import { asObject, asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import type { LiveConfig } from './gemini-live-setup.ts';
import { asArray, parseJson } from './translator-shared.ts';

const OUTPUT_AUDIO_MIME = 'audio/pcm;rate=24000';

/** Output events of the GA protocol, and of the beta one (same fields). */
const TEXT_DELTAS = new Set(['response.output_text.delta', 'response.text.delta']);
const AUDIO_DELTAS = new Set(['response.output_audio.delta', 'response.audio.delta']);
const TRANSCRIPT_DELTAS = new Set([
  'response.output_audio_transcript.delta',
  'response.audio_transcript.delta',
]);

/** Items with transcription deltas kept at most; beyond it the oldest is forgotten. */
export const KEPT_TRANSCRIBED = 256;

interface Response {
  readonly id: string;
  /** The client was told `interrupted`: what is left of the response is not relayed. */
  interrupted: boolean;
}

export class LiveResponses {
  /** Function calls of the last toolCall the client has not answered, with their names. */
  readonly pendingCalls = new Map<string, string>();
  private current: Response | undefined;
  /** Input audio items whose transcription came in deltas (their `.completed` adds nothing). */
  private readonly transcribed = new Set<string>();
  private readonly config: () => LiveConfig | undefined;

  constructor(config: () => LiveConfig | undefined) {
    this.config = config;
  }

  /** A response is being generated and the client has not been told it was interrupted. */
  get active(): boolean {
    return this.current !== undefined && !this.current.interrupted;
  }

  /** The response in progress ends for the client now (`interrupted`); false when none is. */
  interrupt(out: JsonObject[]): boolean {
    const r = this.current;
    if (r === undefined || r.interrupted) return false;
    r.interrupted = true;
    out.push({ serverContent: { interrupted: true } });
    return true;
  }

  /** One OpenAI server event; true when it was a response's or a transcription's (handled here). */
  serverEvent(event: JsonObject, out: JsonObject[]): boolean {
    const type = asString(event.type) ?? '';
    const config = this.config();
    if (type === 'response.created') {
      this.current = { id: asString(asObject(event.response)?.id) ?? '', interrupted: false };
      return true;
    }
    if (TEXT_DELTAS.has(type) || AUDIO_DELTAS.has(type) || TRANSCRIPT_DELTAS.has(type)) {
      const delta = asString(event.delta);
      if (delta === undefined || delta === '' || this.current?.interrupted === true) return true;
      if (TEXT_DELTAS.has(type)) out.push({ serverContent: { modelTurn: { parts: [{ text: delta }] } } });
      else if (AUDIO_DELTAS.has(type))
        out.push({
          serverContent: {
            modelTurn: { parts: [{ inlineData: { mimeType: OUTPUT_AUDIO_MIME, data: delta } }] },
          },
        });
      else if (config?.outputTranscription === true)
        out.push({ serverContent: { outputTranscription: { text: delta } } });
      return true;
    }
    if (type === 'input_audio_buffer.speech_started') {
      // The user speaks over the answer: OpenAI cancels it (interrupt_response), the client stops playing.
      if (config?.interrupts === true) this.interrupt(out);
      return true;
    }
    if (type === 'conversation.item.input_audio_transcription.delta') {
      const delta = asString(event.delta);
      this.transcribed.add(asString(event.item_id) ?? '');
      if (this.transcribed.size > KEPT_TRANSCRIBED)
        this.transcribed.delete(this.transcribed.values().next().value!);
      if (delta !== undefined && delta !== '')
        out.push({ serverContent: { inputTranscription: { text: delta } } });
      return true;
    }
    if (type === 'conversation.item.input_audio_transcription.completed') {
      const item = asString(event.item_id) ?? '';
      const transcript = asString(event.transcript);
      if (!this.transcribed.delete(item) && transcript !== undefined && transcript !== '')
        out.push({ serverContent: { inputTranscription: { text: transcript } } });
      return true;
    }
    if (type === 'conversation.item.input_audio_transcription.failed') {
      // No Live API message says so; no `.completed` follows.
      this.transcribed.delete(asString(event.item_id) ?? '');
      return true;
    }
    if (type === 'response.done') {
      this.done(asObject(event.response) ?? {}, out);
      return true;
    }
    return false;
  }

  private done(response: JsonObject, out: JsonObject[]): void {
    const r = this.current;
    this.current = undefined;
    const status = asString(response.status) ?? 'completed';
    const usage = asObject(response.usage);
    const meta: JsonObject = usage === undefined ? {} : { usageMetadata: geminiUsage(usage) };
    const calls =
      status === 'cancelled'
        ? []
        : asArray(response.output).filter((o): o is JsonObject => isObject(o) && o.type === 'function_call');
    if (calls.length > 0) {
      this.pendingCalls.clear();
      const functionCalls = calls.map((c) => {
        const id = asString(c.call_id) ?? '';
        const name = asString(c.name) ?? '';
        this.pendingCalls.set(id, name);
        return { id, name, args: argsOf(c.arguments) };
      });
      out.push({ toolCall: { functionCalls }, ...meta });
      return;
    }
    if (status === 'cancelled') {
      if (r !== undefined && !r.interrupted) out.push({ serverContent: { interrupted: true } });
    } else if (r?.interrupted !== true) {
      out.push({ serverContent: { generationComplete: true } });
    }
    out.push({ serverContent: { turnComplete: true }, ...meta });
  }
}

function argsOf(value: JsonValue | undefined): JsonObject {
  const parsed = typeof value === 'string' ? parseJson(value) : undefined;
  return isObject(parsed) ? parsed : {};
}

function count(value: JsonValue | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** A Live API modality breakdown: TEXT always, AUDIO and IMAGE when there are any. */
function byModality(details: JsonObject | undefined): JsonObject[] {
  const out: JsonObject[] = [{ modality: 'TEXT', tokenCount: count(details?.text_tokens) }];
  const audio = count(details?.audio_tokens);
  const image = count(details?.image_tokens);
  if (audio > 0) out.push({ modality: 'AUDIO', tokenCount: audio });
  if (image > 0) out.push({ modality: 'IMAGE', tokenCount: image });
  return out;
}

/**
 * OpenAI Realtime usage as the Live API's usageMetadata: input as the prompt, output as the response,
 * each by modality; cached tokens with their own breakdown.
 */
export function geminiUsage(usage: JsonObject): JsonObject {
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  const inputDetails = asObject(usage.input_token_details);
  const meta: JsonObject = {
    promptTokenCount: input,
    responseTokenCount: output,
    totalTokenCount: count(usage.total_tokens) || input + output,
    promptTokensDetails: byModality(inputDetails),
    responseTokensDetails: byModality(asObject(usage.output_token_details)),
  };
  const cached = count(inputDetails?.cached_tokens);
  if (cached > 0) {
    meta.cachedContentTokenCount = cached;
    meta.cacheTokensDetails = byModality(asObject(inputDetails?.cached_tokens_details));
  }
  return meta;
}
