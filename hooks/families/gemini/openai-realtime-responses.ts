// Gemini Live's model output as OpenAI Realtime responses, for openai_realtime_to_gemini_live. A
// response opens with the first output of a Gemini turn and ends at its turnComplete, with the turn's
// usageMetadata as OpenAI usage; tool calls end the response they are in (the client answers them with
// a new one), an interruption or a response.cancel ends it cancelled, and every usage report Gemini sends
// reaches the client in exactly one response.done.

import { asObject, asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { outputIsAudio } from './openai-realtime-config.ts';
import { asArray } from './translator-shared.ts';

/** What the responses need of the session they are part of. */
export interface Conversation {
  readonly session: JsonObject;
  readonly conversationId: string;
  /** The item new items follow (`previous_item_id`). */
  lastItemId: string | null;
  id(prefix: string): string;
  event(type: string, fields: JsonObject): JsonObject;
  /** A response is about to open: the user input it answers, when no client event committed it. */
  beforeResponse(out: JsonObject[]): void;
}

interface Part {
  readonly kind: 'text' | 'audio';
  readonly index: number;
  /** The text, or the transcript of the audio. */
  text: string;
}

interface Message {
  readonly id: string;
  readonly outputIndex: number;
  readonly previous: string | null;
  readonly parts: Part[];
}

interface Response {
  readonly id: string;
  readonly metadata: JsonValue;
  status: 'in_progress' | 'completed' | 'cancelled';
  details: JsonObject | null;
  readonly output: JsonObject[];
  message: Message | undefined;
  /** The client cancelled it: what Gemini still sends of the turn is not relayed. */
  muted: boolean;
  /** Gemini was interrupted: the next output is the next turn's. */
  interrupted: boolean;
}

const PCM_24K: JsonObject = { type: 'audio/pcm', rate: 24_000 };
/** Unanswered function calls a session keeps; beyond it the oldest is forgotten (its output refused). */
export const KEPT_CALLS = 256;

export class Responses {
  /** `metadata` of the last response.create, for the response it asks for. */
  metadata: JsonValue = null;
  private open: Response | undefined;
  /** Usage Gemini reported since the last response.done that carried usage, in OpenAI's shape. */
  private usage: JsonObject | undefined;
  /** The first response since the last one that carried usage (what a cut turn is billed under). */
  private unreported: string | undefined;
  /** Unanswered function call ids Gemini sent, with their names (a function response names its function). */
  private readonly calls = new Map<string, string>();

  private readonly conv: Conversation;

  constructor(conv: Conversation) {
    this.conv = conv;
  }

  get inProgress(): string | undefined {
    return this.open?.id ?? this.unreported;
  }

  /** A response is open and not cancelled by the client. */
  get active(): boolean {
    return this.open !== undefined && !this.open.muted && !this.open.interrupted;
  }

  /** The name of an unanswered call, forgotten as its output goes to Gemini. */
  answerCall(callId: string): string | undefined {
    const name = this.calls.get(callId);
    this.calls.delete(callId);
    return name;
  }

  /** One Gemini server message: the OpenAI events it makes, appended to `out`. */
  serverMessage(message: JsonObject, out: JsonObject[]): void {
    const content = asObject(message.serverContent);
    for (const raw of asArray(asObject(content?.modelTurn)?.parts)) {
      const part = asObject(raw);
      // Thought summaries have no OpenAI Realtime event.
      if (part === undefined || part.thought === true) continue;
      if (typeof part.text === 'string' && part.text !== '') this.delta(out, 'text', part.text);
      const inline = asObject(part.inlineData);
      if (typeof inline?.data === 'string' && String(inline.mimeType ?? '').startsWith('audio/'))
        this.delta(out, 'audio', inline.data);
    }
    const transcript = asString(asObject(content?.outputTranscription)?.text);
    if (transcript !== undefined && transcript !== '') this.delta(out, 'transcript', transcript);
    if (content?.interrupted === true) this.interrupted(out);
    const meta = asObject(message.usageMetadata);
    if (meta !== undefined) this.usage = addUsage(this.usage, openaiUsage(meta));
    const calls = asArray(asObject(message.toolCall)?.functionCalls);
    if (calls.length > 0) this.functionCalls(calls, out);
    if (content?.turnComplete === true) this.turnComplete(out);
  }

  /** response.cancel: the open response ends cancelled now; its response.done waits for the turn's usage. */
  cancel(out: JsonObject[]): boolean {
    const r = this.open;
    if (r === undefined || r.muted || r.interrupted) return false;
    r.status = 'cancelled';
    r.details = { type: 'cancelled', reason: 'client_cancelled' };
    r.muted = true;
    this.closeMessage(r, 'incomplete', out);
    return true;
  }

  private start(out: JsonObject[]): Response {
    if (this.open?.interrupted === true) this.finish(out);
    if (this.open !== undefined) return this.open;
    this.conv.beforeResponse(out);
    const r: Response = {
      id: this.conv.id('resp_'),
      metadata: this.metadata,
      status: 'in_progress',
      details: null,
      output: [],
      message: undefined,
      muted: false,
      interrupted: false,
    };
    this.metadata = null;
    this.open = r;
    this.unreported ??= r.id;
    out.push(this.conv.event('response.created', { response: this.responseObject(r, null) }));
    return r;
  }

  private delta(out: JsonObject[], kind: 'text' | 'audio' | 'transcript', delta: string): void {
    // Output after an interruption is the next turn's, even of a response the client cancelled.
    if (this.open?.muted === true && !this.open.interrupted) return;
    const r = this.start(out);
    const part = this.part(r, kind === 'text' ? 'text' : 'audio', out);
    const ids = this.ids(r, part);
    if (kind === 'audio') {
      out.push(this.conv.event('response.output_audio.delta', { ...ids, delta }));
      return;
    }
    part.text += delta;
    const type = kind === 'text' ? 'response.output_text.delta' : 'response.output_audio_transcript.delta';
    out.push(this.conv.event(type, { ...ids, delta }));
  }

  private part(r: Response, kind: Part['kind'], out: JsonObject[]): Part {
    let m = r.message;
    if (m === undefined) {
      m = {
        id: this.conv.id('item_'),
        outputIndex: r.output.length,
        previous: this.conv.lastItemId,
        parts: [],
      };
      r.message = m;
      this.conv.lastItemId = m.id;
      const item = messageItem(m, 'in_progress', false);
      out.push(
        this.conv.event('response.output_item.added', {
          response_id: r.id,
          output_index: m.outputIndex,
          item,
        }),
      );
      out.push(this.conv.event('conversation.item.added', { previous_item_id: m.previous, item }));
    }
    let part = m.parts.find((p) => p.kind === kind);
    if (part === undefined) {
      part = { kind, index: m.parts.length, text: '' };
      m.parts.push(part);
      out.push(
        this.conv.event('response.content_part.added', { ...this.ids(r, part), part: partObject(part) }),
      );
    }
    return part;
  }

  private ids(r: Response, part: Part): JsonObject {
    const m = r.message!;
    return { response_id: r.id, item_id: m.id, output_index: m.outputIndex, content_index: part.index };
  }

  private closeMessage(r: Response, status: 'completed' | 'incomplete', out: JsonObject[]): void {
    const m = r.message;
    if (m === undefined) return;
    for (const part of m.parts) {
      const ids = this.ids(r, part);
      if (part.kind === 'text') {
        out.push(this.conv.event('response.output_text.done', { ...ids, text: part.text }));
      } else {
        out.push(this.conv.event('response.output_audio.done', ids));
        out.push(this.conv.event('response.output_audio_transcript.done', { ...ids, transcript: part.text }));
      }
      out.push(this.conv.event('response.content_part.done', { ...ids, part: partObject(part) }));
    }
    const item = messageItem(m, status, true);
    out.push(this.conv.event('conversation.item.done', { previous_item_id: m.previous, item }));
    out.push(
      this.conv.event('response.output_item.done', { response_id: r.id, output_index: m.outputIndex, item }),
    );
    r.output.push(item);
    r.message = undefined;
  }

  private interrupted(out: JsonObject[]): void {
    const r = this.open;
    if (r === undefined || r.interrupted) return;
    if (r.status === 'in_progress') {
      r.status = 'cancelled';
      r.details = { type: 'cancelled', reason: 'turn_detected' };
    }
    r.interrupted = true;
    this.closeMessage(r, 'incomplete', out);
  }

  /** Gemini waits for the client's function responses: the response ends here, as OpenAI's do. */
  private functionCalls(calls: JsonValue[], out: JsonObject[]): void {
    const r = this.start(out);
    this.closeMessage(r, 'completed', out);
    for (const raw of calls) {
      const call = isObject(raw) ? raw : {};
      const name = asString(call.name) ?? '';
      const callId = asString(call.id) ?? this.conv.id('call_');
      this.calls.set(callId, name);
      if (this.calls.size > KEPT_CALLS) this.calls.delete(this.calls.keys().next().value!);
      const args = JSON.stringify(isObject(call.args) ? call.args : {});
      const outputIndex = r.output.length;
      const previous = this.conv.lastItemId;
      const item: JsonObject = {
        id: this.conv.id('item_'),
        object: 'realtime.item',
        type: 'function_call',
        status: 'in_progress',
        name,
        call_id: callId,
        arguments: '',
      };
      this.conv.lastItemId = item.id as string;
      const ids = {
        response_id: r.id,
        item_id: item.id as string,
        output_index: outputIndex,
        call_id: callId,
      };
      out.push(
        this.conv.event('response.output_item.added', { response_id: r.id, output_index: outputIndex, item }),
      );
      out.push(this.conv.event('conversation.item.added', { previous_item_id: previous, item }));
      out.push(this.conv.event('response.function_call_arguments.delta', { ...ids, delta: args }));
      out.push(this.conv.event('response.function_call_arguments.done', { ...ids, name, arguments: args }));
      const done = { ...item, status: 'completed', arguments: args };
      out.push(this.conv.event('conversation.item.done', { previous_item_id: previous, item: done }));
      out.push(
        this.conv.event('response.output_item.done', {
          response_id: r.id,
          output_index: outputIndex,
          item: done,
        }),
      );
      r.output.push(done);
    }
    if (r.status === 'in_progress') r.status = 'completed';
    this.finish(out);
  }

  private turnComplete(out: JsonObject[]): void {
    // A usage report outside any response (after a tool call's response ended) gets one of its own.
    if (this.open === undefined && this.usage === undefined) return;
    const r = this.open ?? this.start(out);
    if (r.status === 'in_progress') r.status = 'completed';
    this.finish(out);
  }

  private finish(out: JsonObject[]): void {
    const r = this.open!;
    this.closeMessage(r, r.status === 'cancelled' ? 'incomplete' : 'completed', out);
    const usage = this.usage ?? null;
    if (usage !== null) this.unreported = undefined;
    this.usage = undefined;
    this.open = undefined;
    out.push(this.conv.event('response.done', { response: this.responseObject(r, usage) }));
  }

  private responseObject(r: Response, usage: JsonObject | null): JsonObject {
    const session = this.conv.session;
    const audio = outputIsAudio(session);
    const output = asObject(asObject(session.audio)?.output);
    return {
      object: 'realtime.response',
      id: r.id,
      status: r.status,
      status_details: r.details,
      output: [...r.output],
      conversation_id: this.conv.conversationId,
      output_modalities: [audio ? 'audio' : 'text'],
      max_output_tokens: session.max_output_tokens ?? 'inf',
      audio: { output: { format: PCM_24K, voice: output?.voice ?? null } },
      usage,
      metadata: r.metadata,
    };
  }
}

function partObject(part: Part): JsonObject {
  return part.kind === 'text' ? { type: 'text', text: part.text } : { type: 'audio', transcript: part.text };
}

function messageItem(m: Message, status: string, withContent: boolean): JsonObject {
  const content = withContent
    ? m.parts.map(
        (p): JsonObject =>
          p.kind === 'text'
            ? { type: 'output_text', text: p.text }
            : { type: 'output_audio', transcript: p.text },
      )
    : [];
  return { id: m.id, object: 'realtime.item', type: 'message', status, role: 'assistant', content };
}

function count(value: JsonValue | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;
}

/** Tokens of a Live API modality breakdown (`[{modality, tokenCount}]`) by OpenAI's names. */
function byModality(details: JsonValue | undefined): { text: number; audio: number; image: number } {
  const out = { text: 0, audio: 0, image: 0 };
  for (const d of asArray(details)) {
    const o = asObject(d);
    const n = count(o?.tokenCount);
    if (o?.modality === 'AUDIO') out.audio += n;
    else if (o?.modality === 'IMAGE' || o?.modality === 'VIDEO') out.image += n;
    else out.text += n;
  }
  return out;
}

/**
 * Gemini's usageMetadata in OpenAI Realtime's shape: the counts the native Live path bills (input =
 * promptTokenCount, output = responseTokenCount), audio apart, cached tokens with their own breakdown.
 */
export function openaiUsage(meta: JsonObject): JsonObject {
  const input = count(meta.promptTokenCount);
  const output = count(meta.responseTokenCount ?? meta.candidatesTokenCount);
  const prompt = byModality(meta.promptTokensDetails);
  const cached = byModality(meta.cacheTokensDetails);
  const response = byModality(meta.responseTokensDetails ?? meta.candidatesTokensDetails);
  return {
    total_tokens: input + output,
    input_tokens: input,
    output_tokens: output,
    input_token_details: {
      text_tokens: prompt.text,
      audio_tokens: prompt.audio,
      image_tokens: prompt.image,
      cached_tokens: count(meta.cachedContentTokenCount),
      cached_tokens_details: {
        text_tokens: cached.text,
        audio_tokens: cached.audio,
        image_tokens: cached.image,
      },
    },
    output_token_details: { text_tokens: response.text, audio_tokens: response.audio },
  };
}

/** Two usages of the same shape added field by field (several reports in one turn). */
function addUsage(a: JsonObject | undefined, b: JsonObject): JsonObject {
  if (a === undefined) return b;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(b)) {
    const here = a[key];
    out[key] =
      typeof value === 'number'
        ? count(here) + value
        : isObject(value) && isObject(here)
          ? addUsage(here, value)
          : value;
  }
  return out;
}
