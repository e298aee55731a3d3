// A Gemini Live client on an OpenAI Realtime upstream (DSL `gemini_live_to_openai_realtime`;
// docs/realtime.md "Across families"). One object per session, fed every message of both sides in order:
// the client's setup becomes one session.update once OpenAI has said session.created (its session.updated
// is the client's setupComplete: gemini-live-setup.ts), realtime input, client content and tool responses
// become OpenAI events, and OpenAI's events become Live API messages (gemini-live-responses.ts). The Live
// API has no error message: what OpenAI cannot carry closes the session (1008) with a reason naming the
// field, a message the Live API itself refuses closes it with 1007, as Gemini does.

import { asObject, asString, isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { MIN_COMMIT_BYTES } from '../openai/realtime.ts';
import type {
  RealtimeOutput,
  RealtimeTranslator,
  RealtimeTranslatorFactory,
  RealtimeTranslatorInit,
} from '../types.ts';
import { LiveResponses } from './gemini-live-responses.ts';
import { configFor, invalid, type LiveConfig, notCarried, type Refusal } from './gemini-live-setup.ts';
import { Upsampler16kTo24k } from './pcm-resample.ts';
import { asArray } from './translator-shared.ts';

/** The rate the Live API assumes when the MIME type names none. */
const DEFAULT_INPUT_RATE = 16_000;

/** OpenAI errors that answer an event of the translator's own and change nothing the client must know. */
const HARMLESS: Readonly<Record<string, string>> = {
  // The response ended before the cancel arrived.
  'response.cancel': 'response_cancel_not_active',
  // Server VAD committed the audio and started a response first.
  'input_audio_buffer.commit': 'input_audio_buffer_commit_empty',
  'response.create': 'conversation_already_has_active_response',
};

/** Events of the translator's own kept for reading OpenAI's errors (the latest ones). */
const KEPT_EVENTS = 256;
/** Bytes of events held until OpenAI's session.created (as limits.realtime_max_message_bytes' default). */
export const MAX_WAITING_BYTES = 16 * 1024 * 1024;

let counter = 0;
function sequentialId(prefix: string): string {
  counter = (counter + 1) % 0x7fffffff;
  return `${prefix}gl${Date.now().toString(36)}${counter.toString(36)}`;
}

export const geminiLiveToOpenaiRealtime: RealtimeTranslatorFactory = {
  name: 'gemini_live_to_openai_realtime',
  from: 'native.live',
  to: 'realtime',
  // Billed from OpenAI's own response.done: its ids and its audio and cache counts as they are.
  usageFrom: 'upstream',
  create: (init) => new GeminiLiveToOpenaiRealtime(init),
};

class GeminiLiveToOpenaiRealtime implements RealtimeTranslator {
  private readonly newId: (prefix: string) => string;
  private config: LiveConfig | undefined;
  private readonly responses = new LiveResponses(() => this.config);
  /** OpenAI has said session.created; the session.update went; its session.updated came. */
  private created = false;
  private updateSent = false;
  private setupDone = false;
  /** Events for OpenAI made before the session.update went, in order. */
  private readonly waiting: JsonObject[] = [];
  private waitingBytes = 0;
  /** Event ids of the translator's own events, with their types (for OpenAI's errors about them). */
  private readonly sent = new Map<string, string>();
  /** Bytes of 24 kHz input audio appended since the last commit; commits OpenAI has yet to confirm. */
  private buffered = 0;
  private ownCommits = 0;
  private upsampler: Upsampler16kTo24k | undefined;

  constructor(init: RealtimeTranslatorInit) {
    this.newId = init.newId ?? sequentialId;
  }

  get responseInProgress(): string | undefined {
    return undefined;
  }

  open(): RealtimeOutput {
    return { upstream: [], client: [] };
  }

  fromClient(message: JsonObject | undefined, _binary: boolean): RealtimeOutput {
    const out: RealtimeOutput = { upstream: [], client: [] };
    const refusal = this.clientMessage(message, out) ?? this.overflow();
    if (refusal !== undefined) out.close = refusal;
    return out;
  }

  fromUpstream(message: JsonObject | undefined): RealtimeOutput {
    const out: RealtimeOutput = { upstream: [], client: [] };
    if (message === undefined) return out;
    const type = asString(message.type) ?? '';
    if (type === 'session.created') {
      this.created = true;
      this.sendUpdate(out.upstream);
    } else if (type === 'session.updated') {
      if (this.updateSent && !this.setupDone) {
        this.setupDone = true;
        out.client.push({ setupComplete: {} });
      }
    } else if (type === 'input_audio_buffer.committed') {
      // A commit of OpenAI's activity detection: the audio since the last one is its turn.
      if (this.ownCommits > 0) this.ownCommits--;
      else this.buffered = 0;
    } else if (type === 'error') {
      const refusal = this.upstreamError(asObject(message.error) ?? {});
      if (refusal !== undefined) out.close = refusal;
    } else {
      this.responses.serverEvent(message, out.client);
    }
    return out;
  }

  private clientMessage(message: JsonObject | undefined, out: RealtimeOutput): Refusal | undefined {
    if (message === undefined) return { code: 1007, reason: 'Invalid JSON payload received.' };
    const keys = Object.keys(message);
    if (this.config === undefined) {
      const setup = message.setup;
      if (!isObject(setup)) return invalid('setup', 'the first message must be setup');
      const read = configFor(setup);
      if ('refusal' in read) return read.refusal;
      this.config = read.config;
      this.sendUpdate(out.upstream);
      return undefined;
    }
    if (keys.length !== 1)
      return invalid(
        keys.join(', ') || 'message',
        'a message holds exactly one of clientContent, realtimeInput, toolResponse',
      );
    const key = keys[0]!;
    const body = message[key];
    if (key === 'setup') return invalid('setup', 'setup was already sent');
    if (!isObject(body)) return invalid(key, 'must be an object');
    if (key === 'clientContent') return this.clientContent(body, out);
    if (key === 'realtimeInput') return this.realtimeInput(body, out);
    if (key === 'toolResponse') return this.toolResponse(body, out);
    return invalid(key.slice(0, 40), 'unknown message');
  }

  /** Events for OpenAI go out once the session.update has (it waits for session.created). */
  private send(out: RealtimeOutput, event: JsonObject, own = false): void {
    const message = own ? this.own(event) : event;
    if (this.updateSent) {
      out.upstream.push(message);
      return;
    }
    this.waiting.push(message);
    this.waitingBytes += Buffer.byteLength(JSON.stringify(message));
  }

  /** The client sent more than the gateway holds while OpenAI opens the session. */
  private overflow(): Refusal | undefined {
    if (this.waitingBytes <= MAX_WAITING_BYTES) return undefined;
    // The count stays: what the client sends until the close comes is refused too.
    this.waiting.length = 0;
    return {
      code: 1008,
      reason: `more than ${MAX_WAITING_BYTES >> 20} MiB sent before OpenAI Realtime opened the session`,
    };
  }

  /** An event whose errors the translator reads: it gets an id of its own. */
  private own(event: JsonObject): JsonObject {
    const id = this.newId('event_');
    this.sent.set(id, String(event.type));
    if (this.sent.size > KEPT_EVENTS) this.sent.delete(this.sent.keys().next().value!);
    return { event_id: id, ...event };
  }

  private sendUpdate(upstream: JsonObject[]): void {
    if (this.updateSent || !this.created || this.config === undefined) return;
    this.updateSent = true;
    upstream.push(this.own({ type: 'session.update', session: this.config.session }));
    // Not spread: the queue may hold more events than a call takes arguments.
    for (const message of this.waiting) upstream.push(message);
    this.waiting.length = 0;
    this.waitingBytes = 0;
  }

  /** The client's new turn cuts the response in progress, as the Live API does. */
  private interrupt(out: RealtimeOutput): void {
    if (this.responses.interrupt(out.client)) this.send(out, { type: 'response.cancel' }, true);
  }

  private clientContent(content: JsonObject, out: RealtimeOutput): Refusal | undefined {
    const items: JsonObject[] = [];
    for (const [i, raw] of asArray(content.turns).entries()) {
      const turn = turnItem(raw, `clientContent.turns[${i}]`);
      if ('refusal' in turn) return turn.refusal;
      items.push(turn.item);
    }
    const other = Object.keys(content).find((k) => k !== 'turns' && k !== 'turnComplete');
    if (other !== undefined) return invalid(`clientContent.${other.slice(0, 40)}`, 'unknown field');
    if (items.length > 0 || content.turnComplete === true) this.interrupt(out);
    for (const item of items) this.send(out, { type: 'conversation.item.create', item });
    if (content.turnComplete === true) this.send(out, { type: 'response.create' }, true);
    return undefined;
  }

  private realtimeInput(input: JsonObject, out: RealtimeOutput): Refusal | undefined {
    const known = ['audio', 'mediaChunks', 'text', 'activityStart', 'activityEnd', 'audioStreamEnd'];
    for (const [key, value] of Object.entries(input)) {
      if (known.includes(key)) continue;
      if (key === 'video') return notCarried('realtimeInput.video', 'OpenAI Realtime takes no video');
      if (value !== undefined && value !== null)
        return invalid(`realtimeInput.${key.slice(0, 40)}`, 'unknown field');
    }
    const detects = this.config?.detectsActivity === true;
    const manual = (field: string) =>
      invalid(
        `realtimeInput.${field}`,
        detects
          ? 'needs automatic activity detection disabled (realtimeInputConfig)'
          : 'needs automatic activity detection enabled',
      );
    if (input.activityStart !== undefined) {
      if (detects) return manual('activityStart');
      this.interrupt(out);
    }
    const blobs: [JsonValue | undefined, string][] = [[input.audio, 'realtimeInput.audio']];
    for (const [i, chunk] of asArray(input.mediaChunks).entries())
      blobs.push([chunk, `realtimeInput.mediaChunks[${i}]`]);
    for (const [blob, path] of blobs) {
      if (blob === undefined || blob === null) continue;
      const refusal = this.audio(blob, path, out);
      if (refusal !== undefined) return refusal;
    }
    const text = input.text;
    if (text !== undefined && text !== null) {
      if (typeof text !== 'string') return invalid('realtimeInput.text', 'must be a string');
      this.interrupt(out);
      this.send(out, {
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
      });
      this.send(out, { type: 'response.create' }, true);
    }
    if (input.activityEnd !== undefined) {
      if (detects) return manual('activityEnd');
      this.endAudioTurn(out);
    }
    if (input.audioStreamEnd === true) {
      if (!detects) return manual('audioStreamEnd');
      this.endAudioTurn(out);
    }
    return undefined;
  }

  private audio(blob: JsonValue, path: string, out: RealtimeOutput): Refusal | undefined {
    if (!isObject(blob) || typeof blob.data !== 'string') return invalid(`${path}.data`, 'is required');
    const rate = pcmRate(asString(blob.mimeType) ?? '');
    if (rate === undefined)
      return notCarried(
        `${path}.mimeType`,
        'OpenAI Realtime takes PCM16 audio at 16 or 24 kHz (audio/pcm;rate=...)',
      );
    let bytes: Buffer = Buffer.from(blob.data, 'base64');
    if (bytes.length % 2 !== 0) return invalid(`${path}.data`, 'PCM16 comes in 2-byte samples');
    if (rate === 16_000) {
      this.upsampler ??= new Upsampler16kTo24k();
      bytes = this.upsampler.push(bytes);
    }
    this.append(bytes, out);
    return undefined;
  }

  private append(bytes: Buffer, out: RealtimeOutput): void {
    if (bytes.length === 0) return;
    this.send(out, { type: 'input_audio_buffer.append', audio: bytes.toString('base64') });
    this.buffered += bytes.length;
  }

  /** The user's audio turn ends (activityEnd, audioStreamEnd): committed and answered. */
  private endAudioTurn(out: RealtimeOutput): void {
    const rest = this.upsampler?.flush();
    if (rest !== undefined) this.append(rest, out);
    if (this.buffered === 0) return;
    // Gemini answers a turn shorter than OpenAI's shortest commit (100 ms): padded with silence.
    if (this.buffered < MIN_COMMIT_BYTES) this.append(Buffer.alloc(MIN_COMMIT_BYTES - this.buffered), out);
    this.buffered = 0;
    this.ownCommits++;
    this.send(out, { type: 'input_audio_buffer.commit' }, true);
    this.send(out, { type: 'response.create' }, true);
  }

  private toolResponse(body: JsonObject, out: RealtimeOutput): Refusal | undefined {
    const other = Object.keys(body).find((k) => k !== 'functionResponses');
    if (other !== undefined) return invalid(`toolResponse.${other.slice(0, 40)}`, 'unknown field');
    const items: JsonObject[] = [];
    const pending = this.responses.pendingCalls;
    for (const [i, raw] of asArray(body.functionResponses).entries()) {
      const path = `toolResponse.functionResponses[${i}]`;
      if (!isObject(raw)) return invalid(path, 'must be a FunctionResponse');
      const id = asString(raw.id);
      if (id === undefined || !pending.has(id))
        return invalid(`${path}.id`, 'not a pending function call of this session');
      const field = Object.entries(raw).find(
        ([k, v]) => !['id', 'name', 'response'].includes(k) && v !== undefined,
      );
      if (field !== undefined) return notCarried(`${path}.${field[0].slice(0, 40)}`);
      items.push({ type: 'function_call_output', call_id: id, output: JSON.stringify(raw.response ?? {}) });
    }
    for (const item of items) {
      pending.delete(item.call_id as string);
      this.send(out, { type: 'conversation.item.create', item });
    }
    // The Live API goes on with the turn once every call is answered.
    if (items.length > 0 && pending.size === 0) this.send(out, { type: 'response.create' }, true);
    return undefined;
  }

  /** An OpenAI error: dropped when it answers the translator's own event harmlessly, else the close. */
  private upstreamError(error: JsonObject): Refusal | undefined {
    const code = asString(error.code) ?? '';
    const eventId = asString(error.event_id);
    const own = eventId === undefined ? undefined : this.sent.get(eventId);
    if (own !== undefined && HARMLESS[own] === code) return undefined;
    const message = asString(error.message) ?? code;
    const what = own === 'session.update' ? 'the setup' : own === undefined ? 'the session' : own;
    if (error.type === 'server_error') return { code: 1011, reason: `OpenAI Realtime failed: ${message}` };
    return { code: 1007, reason: `OpenAI Realtime refused ${what}: ${message}` };
  }
}

/** The rate of a PCM16 MIME type the translator carries (16 kHz when it names none), else undefined. */
function pcmRate(mime: string): 16_000 | 24_000 | undefined {
  const format = /^audio\/pcm(?:;\s*rate=(\d+))?$/i.exec(mime);
  if (format === null) return undefined;
  const rate = Number(format[1] ?? DEFAULT_INPUT_RATE);
  return rate === 16_000 || rate === 24_000 ? rate : undefined;
}

/** A whole 16 kHz clip at 24 kHz. */
function upsampled(bytes: Buffer): Buffer {
  const upsampler = new Upsampler16kTo24k();
  return Buffer.concat([upsampler.push(bytes), upsampler.flush()]);
}

/** A clientContent turn as an OpenAI conversation item, or why it cannot be one. */
function turnItem(raw: JsonValue, path: string): { item: JsonObject } | { refusal: Refusal } {
  if (!isObject(raw)) return { refusal: invalid(path, 'must be a Content') };
  const role = raw.role ?? 'user';
  if (role !== 'user' && role !== 'model')
    return { refusal: invalid(`${path}.role`, 'must be user or model') };
  const content: JsonObject[] = [];
  for (const [i, part] of asArray(raw.parts).entries()) {
    const at = `${path}.parts[${i}]`;
    if (!isObject(part)) return { refusal: invalid(at, 'must be a Part') };
    if (typeof part.text === 'string' && part.thought !== true) {
      content.push({ type: role === 'user' ? 'input_text' : 'output_text', text: part.text });
      continue;
    }
    const inline = asObject(part.inlineData);
    const mime = asString(inline?.mimeType) ?? '';
    const data = asString(inline?.data);
    if (role === 'user' && data !== undefined && /^image\/(png|jpeg|webp|gif)$/.test(mime)) {
      content.push({ type: 'input_image', image_url: `data:${mime};base64,${data}` });
      continue;
    }
    const audio = role === 'user' && data !== undefined ? pcmRate(mime) : undefined;
    if (audio !== undefined && data !== undefined) {
      const bytes = Buffer.from(data, 'base64');
      if (bytes.length % 2 !== 0)
        return { refusal: invalid(`${at}.inlineData.data`, 'PCM16 comes in 2-byte samples') };
      content.push({
        type: 'input_audio',
        audio: (audio === 24_000 ? bytes : upsampled(bytes)).toString('base64'),
      });
      continue;
    }
    const kind = Object.keys(part).find((k) => k !== 'thought' && k !== 'thoughtSignature') ?? 'part';
    return {
      refusal: notCarried(
        `${at}.${kind.slice(0, 40)}`,
        role === 'user'
          ? 'user turns take text, images and 16 or 24 kHz PCM16'
          : 'model turns take text only',
      ),
    };
  }
  return { item: { type: 'message', role: role === 'model' ? 'assistant' : 'user', content } };
}
