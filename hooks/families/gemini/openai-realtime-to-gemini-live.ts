// An OpenAI Realtime client on a Gemini Live upstream (DSL `openai_realtime_to_gemini_live`;
// docs/realtime.md "Across families"). One object per session, fed every message of both sides in order:
// client events become Gemini messages (the session configuration: openai-realtime-config.ts; items:
// openai-realtime-items.ts), Gemini's messages become OpenAI events (openai-realtime-responses.ts). What
// Gemini cannot carry is answered with an OpenAI `error` event naming the event or field, never dropped.

import { randomBytes } from 'node:crypto';
import { asObject, asString } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { MIN_COMMIT_BYTES } from '../openai/realtime.ts';
import type {
  RealtimeOutput,
  RealtimeTranslator,
  RealtimeTranslatorFactory,
  RealtimeTranslatorInit,
} from '../types.ts';
import {
  defaultSession,
  detectsActivity,
  INPUT_AUDIO_MIME,
  laterUpdateRefusal,
  type Refusal,
  responseRefusal,
  setupFor,
  updatedSession,
} from './openai-realtime-config.ts';
import { itemToGemini, withoutAudio } from './openai-realtime-items.ts';
import { type Conversation, Responses } from './openai-realtime-responses.ts';

const SESSION_LIFETIME_S = 3600;

/** Client events Gemini Live has nothing for. */
const NOT_CARRIED: Readonly<Record<string, string>> = {
  'conversation.item.delete': 'Gemini Live cannot remove items from its conversation',
  'conversation.item.truncate': 'Gemini Live cannot truncate what it said',
  'conversation.item.retrieve': 'the gateway keeps no copy of the conversation',
  'output_audio_buffer.clear': 'there is no output audio buffer over WebSocket',
  'transcription_session.update': 'Gemini Live has no transcription-only sessions',
};

function randomId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;
}

export const openaiRealtimeToGeminiLive: RealtimeTranslatorFactory = {
  name: 'openai_realtime_to_gemini_live',
  from: 'realtime',
  to: 'native.live',
  create: (init) => new OpenaiRealtimeToGeminiLive(init),
};

class OpenaiRealtimeToGeminiLive implements RealtimeTranslator, Conversation {
  session: JsonObject;
  lastItemId: string | null = null;
  readonly conversationId: string;
  private readonly responses: Responses;
  private readonly upstreamModel: string;
  private readonly newId: (prefix: string) => string;
  private setupSent = false;
  /** The setup carried a session.update: Gemini's setupComplete answers it (session.updated). */
  private setupAnswers = false;
  /** Bytes of input audio appended since the last commit. */
  private buffered = 0;
  /** activityStart sent and no activityEnd yet (automatic activity detection off). */
  private speaking = false;
  /** Gemini answers what was just sent on its own (activityEnd, a function response): the next
   * response.create asks for nothing more. */
  private answering = false;
  /** The user audio item the input transcription belongs to, and its transcript so far. */
  private heard: { itemId: string; transcript: string } | undefined;

  constructor(init: RealtimeTranslatorInit) {
    this.newId = init.newId ?? randomId;
    this.upstreamModel = init.upstreamModel;
    this.conversationId = this.newId('conv_');
    const now = init.now?.() ?? Math.floor(Date.now() / 1000);
    this.session = defaultSession(this.newId('sess_'), init.model, now + SESSION_LIFETIME_S);
    this.responses = new Responses(this);
  }

  get responseInProgress(): string | undefined {
    return this.responses.inProgress;
  }

  id(prefix: string): string {
    return this.newId(prefix);
  }

  event(type: string, fields: JsonObject): JsonObject {
    return { type, event_id: this.newId('event_'), ...fields };
  }

  open(): RealtimeOutput {
    return { upstream: [], client: [this.event('session.created', { session: this.session })] };
  }

  fromClient(message: JsonObject | undefined, binary: boolean): RealtimeOutput {
    const out: RealtimeOutput = { upstream: [], client: [] };
    if (binary || message === undefined) {
      out.client.push(
        binary
          ? this.error(
              'invalid_event',
              'Expected a text WebSocket message with a JSON event.',
              null,
              undefined,
            )
          : this.error('invalid_json', 'Invalid event: failed to parse a JSON object.', null, undefined),
      );
      return out;
    }
    const type = asString(message.type) ?? '';
    const eventId = message.event_id;
    if (!this.setupSent) {
      // Gemini's configuration is its first message: the client's first session.update, else defaults.
      if (type === 'session.update') {
        this.firstUpdate(message, out);
        return out;
      }
      this.sendSetup(out);
    }
    switch (type) {
      case 'session.update':
        this.laterUpdate(message, out);
        break;
      case 'input_audio_buffer.append':
        this.append(message, out);
        break;
      case 'input_audio_buffer.commit':
        this.commit(eventId, out);
        break;
      case 'input_audio_buffer.clear':
        // Audio already streamed to Gemini cannot be taken back.
        if (this.buffered === 0) out.client.push(this.event('input_audio_buffer.cleared', {}));
        else
          out.client.push(
            this.unsupported(type, 'Gemini Live cannot discard audio already streamed to it', eventId),
          );
        break;
      case 'conversation.item.create':
        this.createItem(message, out);
        break;
      case 'response.create':
        this.createResponse(message, out);
        break;
      case 'response.cancel':
        // Gemini has no cancel: the response ends now for the client, and the turn is billed whole.
        if (!this.responses.cancel(out.client))
          out.client.push(
            this.error(
              'response_cancel_not_active',
              'Cancellation failed: no active response found',
              null,
              eventId,
            ),
          );
        break;
      default: {
        const why = Object.hasOwn(NOT_CARRIED, type) ? NOT_CARRIED[type] : undefined;
        out.client.push(
          why !== undefined
            ? this.unsupported(type, why, eventId)
            : this.error(
                'invalid_value',
                `Invalid value: '${type}' is not a client event type.`,
                'type',
                eventId,
              ),
        );
      }
    }
    return out;
  }

  fromUpstream(message: JsonObject | undefined): RealtimeOutput {
    const out: RealtimeOutput = { upstream: [], client: [] };
    if (message === undefined) return out;
    if (message.setupComplete !== undefined && this.setupAnswers) {
      this.setupAnswers = false;
      out.client.push(this.event('session.updated', { session: this.session }));
    }
    const content = asObject(message.serverContent);
    const heard = asString(asObject(content?.inputTranscription)?.text);
    if (heard !== undefined && heard !== '') {
      const item = this.heard ?? this.commitAudio(out.client);
      item.transcript += heard;
      out.client.push(
        this.event('conversation.item.input_audio_transcription.delta', {
          item_id: item.itemId,
          content_index: 0,
          delta: heard,
        }),
      );
    }
    this.responses.serverMessage(message, out.client);
    if (content?.turnComplete === true) {
      const item = this.heard;
      this.heard = undefined;
      if (item !== undefined && item.transcript !== '')
        out.client.push(
          this.event('conversation.item.input_audio_transcription.completed', {
            item_id: item.itemId,
            content_index: 0,
            transcript: item.transcript,
          }),
        );
    }
    return out;
  }

  /** With automatic activity detection Gemini decides when the user's turn ended: it is committed then. */
  beforeResponse(out: JsonObject[]): void {
    if (detectsActivity(this.session) && this.heard === undefined && this.buffered > 0) this.commitAudio(out);
  }

  private sendSetup(out: RealtimeOutput): void {
    this.setupSent = true;
    out.upstream.push(setupFor(this.session, this.upstreamModel));
  }

  private firstUpdate(message: JsonObject, out: RealtimeOutput): void {
    const patch = asObject(message.session);
    if (patch === undefined) {
      out.client.push(this.missing('session', message.event_id));
      return;
    }
    // A refused first update changes nothing, as OpenAI's do: the setup waits for the next message.
    const next = updatedSession(this.session, patch);
    if ('refusal' in next) {
      out.client.push(this.refused(next.refusal, message.event_id));
      return;
    }
    this.session = next.session;
    this.setupAnswers = true;
    this.sendSetup(out);
  }

  private laterUpdate(message: JsonObject, out: RealtimeOutput): void {
    const patch = asObject(message.session);
    if (patch === undefined) {
      out.client.push(this.missing('session', message.event_id));
      return;
    }
    const refusal = laterUpdateRefusal(this.session, patch);
    out.client.push(
      refusal === undefined
        ? this.event('session.updated', { session: this.session })
        : this.refused(refusal, message.event_id),
    );
  }

  private append(message: JsonObject, out: RealtimeOutput): void {
    const audio = asString(message.audio);
    if (audio === undefined) {
      out.client.push(this.missing('audio', message.event_id));
      return;
    }
    if (!detectsActivity(this.session) && !this.speaking) {
      out.upstream.push({ realtimeInput: { activityStart: {} } });
      this.speaking = true;
    }
    out.upstream.push({ realtimeInput: { audio: { data: audio, mimeType: INPUT_AUDIO_MIME } } });
    this.buffered += Buffer.byteLength(audio, 'base64');
    this.answering = false;
  }

  private commit(eventId: JsonValue | undefined, out: RealtimeOutput): void {
    if (this.buffered < MIN_COMMIT_BYTES) {
      const ms = (this.buffered / 48).toFixed(2);
      out.client.push(
        this.error(
          'input_audio_buffer_commit_empty',
          `Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has ${ms}ms of audio.`,
          null,
          eventId,
        ),
      );
      return;
    }
    if (detectsActivity(this.session)) {
      out.upstream.push({ realtimeInput: { audioStreamEnd: true } });
    } else {
      out.upstream.push({ realtimeInput: { activityEnd: {} } });
      this.speaking = false;
    }
    this.commitAudio(out.client);
    this.answering = true;
  }

  /** The audio since the last commit becomes a user item (OpenAI's committed events). */
  private commitAudio(out: JsonObject[]): { itemId: string; transcript: string } {
    const previous = this.lastItemId;
    const item: JsonObject = {
      id: this.newId('item_'),
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_audio', transcript: null }],
    };
    const itemId = item.id as string;
    this.lastItemId = itemId;
    this.buffered = 0;
    out.push(this.event('input_audio_buffer.committed', { previous_item_id: previous, item_id: itemId }));
    out.push(this.event('conversation.item.added', { previous_item_id: previous, item }));
    out.push(this.event('conversation.item.done', { previous_item_id: previous, item }));
    this.heard = { itemId, transcript: '' };
    return this.heard;
  }

  private createItem(message: JsonObject, out: RealtimeOutput): void {
    const eventId = message.event_id;
    const item = asObject(message.item);
    if (item === undefined) {
      out.client.push(this.missing('item', eventId));
      return;
    }
    const previous = message.previous_item_id;
    if (previous !== undefined && previous !== null && previous !== this.lastItemId) {
      out.client.push(
        this.refused(
          {
            param: 'previous_item_id',
            message: 'previous_item_id: Gemini Live only appends to its conversation',
          },
          eventId,
        ),
      );
      return;
    }
    const upstream = itemToGemini(item, (callId) => this.responses.answerCall(callId));
    if ('refusal' in upstream) {
      out.client.push(this.refused(upstream.refusal, eventId));
      return;
    }
    out.upstream.push(upstream.message);
    this.answering = item.type === 'function_call_output';
    const id = asString(item.id) ?? this.newId('item_');
    const echoed: JsonObject = { id, object: 'realtime.item', ...item, status: 'completed' };
    echoed.id = id;
    // Audio is not echoed back (as OpenAI does), only its place.
    if (Array.isArray(item.content)) echoed.content = item.content.map(withoutAudio);
    const prior = this.lastItemId;
    this.lastItemId = id;
    out.client.push(this.event('conversation.item.added', { previous_item_id: prior, item: echoed }));
    out.client.push(this.event('conversation.item.done', { previous_item_id: prior, item: echoed }));
  }

  private createResponse(message: JsonObject, out: RealtimeOutput): void {
    const params = asObject(message.response) ?? {};
    const refusal = responseRefusal(params, this.session);
    if (refusal !== undefined) {
      out.client.push(this.refused(refusal, message.event_id));
      return;
    }
    this.responses.metadata = params.metadata ?? null;
    if (this.answering) {
      this.answering = false;
      return;
    }
    if (this.responses.active) {
      out.client.push(
        this.error(
          'conversation_already_has_active_response',
          'Conversation already has an active response in progress. Wait until the response is finished before creating a new one.',
          null,
          message.event_id,
        ),
      );
      return;
    }
    out.upstream.push({ clientContent: { turnComplete: true } });
  }

  private error(
    code: string,
    message: string,
    param: string | null,
    eventId: JsonValue | undefined,
  ): JsonObject {
    return this.event('error', {
      error: {
        type: 'invalid_request_error',
        code,
        message,
        param,
        event_id: typeof eventId === 'string' ? eventId : null,
      },
    });
  }

  private unsupported(type: string, why: string, eventId: JsonValue | undefined): JsonObject {
    return this.error('unsupported_event', `${type} is not carried to Gemini Live: ${why}.`, 'type', eventId);
  }

  private refused(refusal: Refusal, eventId: JsonValue | undefined): JsonObject {
    return this.error('unsupported_parameter', refusal.message, refusal.param, eventId);
  }

  private missing(param: string, eventId: JsonValue | undefined): JsonObject {
    return this.error(
      'missing_required_parameter',
      `Missing required parameter: '${param}'.`,
      param,
      eventId,
    );
  }
}
