// OpenAI Realtime (GA protocol) over WebSocket: GET /v1/realtime?model=… upgraded. One instance per
// connection: the session configuration, the conversation, the input audio buffer and the response
// being streamed. Event shapes follow the GA API (openai SDK resources/realtime) and live captures.

import {
  failMessage,
  type HandshakeFailure,
  PacedTurn,
  type RealtimeConn,
  type RealtimeProtocolSession,
  speech,
} from './realtime-types.ts';
import {
  asArray as arr,
  nextId,
  nowSeconds,
  asObject as obj,
  replyText,
  splitPieces,
  asString as str,
  tokens,
  toolCallsFor,
  truncateToTokens,
  wantsTool,
} from './text.ts';

type Json = Record<string, unknown>;

/** One token per 100 ms of input audio, one per 50 ms of output audio (the API's published rates). */
const INPUT_AUDIO_MS_PER_TOKEN = 100;
const OUTPUT_AUDIO_MS_PER_TOKEN = 50;
/** Generated speech lasts 100 ms per transcript token. */
const SPEECH_MS_PER_TEXT_TOKEN = 100;
/** The real API reports cache hits in steps of 64 tokens. */
const CACHE_STEP = 64;
const RATE_LIMIT_TOKENS = 15_000_000;

/** Bytes per second of a GA audio format ({type: "audio/pcm", rate} | audio/pcmu | audio/pcma). */
function bytesPerSecond(format: unknown): number {
  const f = obj(format);
  const type = str(f?.type) ?? 'audio/pcm';
  if (type === 'audio/pcmu' || type === 'audio/pcma') return 8000;
  const rate = typeof f?.rate === 'number' && f.rate > 0 ? f.rate : 24_000;
  return rate * 2;
}

function audioMs(bytes: number, format: unknown): number {
  return Math.round((bytes * 1000) / bytesPerSecond(format));
}

function base64Bytes(b64: string): number {
  return Buffer.byteLength(b64, 'base64');
}

function deepMerge(target: Json, patch: Json): Json {
  const out: Json = { ...target };
  for (const [k, v] of Object.entries(patch)) {
    const a = obj(out[k]);
    const b = obj(v);
    out[k] = a && b ? deepMerge(a, b) : v;
  }
  return out;
}

function defaultSession(id: string, model: string, transcription: boolean): Json {
  const format = { type: 'audio/pcm', rate: 24_000 };
  const input = { format, transcription: null, noise_reduction: null, turn_detection: null };
  if (transcription) {
    return {
      type: 'transcription',
      object: 'realtime.transcription_session',
      id,
      expires_at: nowSeconds() + 3600,
      audio: { input },
      include: null,
    };
  }
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
    expires_at: nowSeconds() + 3600,
    audio: { input, output: { format, voice: 'alloy', speed: 1 } },
    include: null,
  };
}

/** A conversation item plus what the simulator needs to count it (audio is not kept, only its size). */
interface Entry {
  item: Json;
  /** Input-rate audio tokens of the item (user audio, or the assistant's own speech later in context). */
  audioTokens: number;
  /** Audio length, for the echo of an audio-only user turn. */
  audioMs: number;
}

interface ContextCount {
  text: number;
  audio: number;
  userText: string;
}

function itemText(item: Json): string {
  const type = str(item.type);
  if (type === 'function_call') return `${str(item.name) ?? ''}${str(item.arguments) ?? ''}`;
  if (type === 'function_call_output') return str(item.output) ?? '';
  let out = '';
  for (const part of arr(item.content)) {
    const p = obj(part);
    // Only text reaches the model: transcripts of audio parts are for reference, the audio is counted.
    const text = str(p?.text);
    if (text !== undefined && text !== '') out = out === '' ? text : `${out}\n${text}`;
  }
  return out;
}

/** Usage of one response: see README "Realtime usage". */
function usageObject(
  input: { text: number; audio: number },
  cached: number,
  output: { text: number; audio: number },
): Json {
  const inputTokens = input.text + input.audio;
  const cachedText = Math.min(cached, input.text);
  const outputTokens = output.text + output.audio;
  return {
    total_tokens: inputTokens + outputTokens,
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    input_token_details: {
      text_tokens: input.text,
      audio_tokens: input.audio,
      image_tokens: 0,
      cached_tokens: cached,
      cached_tokens_details: { text_tokens: cachedText, audio_tokens: cached - cachedText, image_tokens: 0 },
    },
    output_token_details: { text_tokens: output.text, audio_tokens: output.audio },
  };
}

/** The response being streamed, with how far it got (for response.cancel and its partial usage). */
interface Run {
  id: string;
  itemId: string;
  audio: boolean;
  inConversation: boolean;
  previousItemId: string | null;
  turn?: PacedTurn;
  input: { text: number; audio: number };
  cached: number;
  /** Text (or transcript) and audio bytes sent so far. */
  textSent: string;
  audioBytesSent: number;
  itemAdded: boolean;
  partAdded: boolean;
  finished: boolean;
  responseBase: Json;
  outputFormat: unknown;
}

export class OpenAIRealtimeSession implements RealtimeProtocolSession {
  private session: Json;
  private readonly items: Entry[] = [];
  private audioBuffer = 0;
  private run: Run | undefined;
  /** Input tokens of the previous response: the cached prefix of the next one. */
  private previousInput = 0;
  private readonly conversationId = nextId('conv_');
  private readonly transcription: boolean;

  private readonly conn: RealtimeConn;
  private readonly failure: HandshakeFailure;

  constructor(conn: RealtimeConn, failure: HandshakeFailure) {
    this.conn = conn;
    this.failure = failure;
    this.transcription = conn.query.get('intent') === 'transcription';
    const id = nextId('sess_');
    conn.record.id = id;
    this.session = defaultSession(id, conn.record.model, this.transcription);
  }

  open(): void {
    const { conn } = this;
    if (this.failure.mode === 'hang') return;
    const greet = (): void => {
      if (conn.record.model === '' && !this.transcription && conn.query.get('call_id') === null) {
        this.error(
          'missing_model',
          'You must provide a model parameter, for example wss://api.openai.com/v1/realtime?model=gpt-realtime',
          null,
          null,
        );
        conn.close(4000, 'invalid_request_error.missing_model');
        return;
      }
      this.emit('session.created', { session: this.session });
    };
    if (conn.knobs.latencyMs > 0) conn.later(greet, conn.knobs.latencyMs);
    else greet();
  }

  closed(): void {
    this.run?.turn?.stop();
  }

  private emit(type: string, fields: Json): void {
    this.conn.send({ type, event_id: nextId('event_'), ...fields });
  }

  private error(code: string, message: string, param: string | null, eventId: unknown): void {
    this.emit('error', {
      error: {
        type: 'invalid_request_error',
        code,
        message,
        param,
        event_id: typeof eventId === 'string' ? eventId : null,
      },
    });
  }

  message(value: unknown, _text: string, isBinary: boolean): void {
    if (this.failure.mode === 'hang') return;
    if (isBinary) {
      this.error(
        'invalid_event',
        'Expected a text WebSocket message; binary frames are not supported.',
        null,
        null,
      );
      return;
    }
    const event = obj(value);
    if (event === undefined) {
      this.error('invalid_json', 'Invalid event: failed to parse JSON value.', null, null);
      return;
    }
    const eventId = event.event_id;
    switch (event.type) {
      case 'session.update':
        this.sessionUpdate(event);
        return;
      case 'conversation.item.create':
        this.itemCreate(event, eventId);
        return;
      case 'conversation.item.delete':
        this.itemDelete(event, eventId);
        return;
      case 'conversation.item.retrieve':
        this.itemRetrieve(event, eventId);
        return;
      case 'conversation.item.truncate':
        this.itemTruncate(event, eventId);
        return;
      case 'input_audio_buffer.append': {
        this.audioBuffer += base64Bytes(str(event.audio) ?? '');
        return;
      }
      case 'input_audio_buffer.clear':
        this.audioBuffer = 0;
        this.emit('input_audio_buffer.cleared', {});
        return;
      case 'input_audio_buffer.commit':
        this.commit(eventId);
        return;
      case 'response.create':
        this.responseCreate(obj(event.response) ?? {}, eventId);
        return;
      case 'response.cancel':
        this.responseCancel(eventId);
        return;
      case 'output_audio_buffer.clear':
        this.emit('output_audio_buffer.cleared', { response_id: this.run?.id ?? null });
        return;
      default:
        this.error(
          'invalid_value',
          `Invalid value: '${String(event.type)}'. Supported values are: 'session.update', 'input_audio_buffer.append', 'input_audio_buffer.commit', 'input_audio_buffer.clear', 'conversation.item.create', 'conversation.item.truncate', 'conversation.item.delete', 'conversation.item.retrieve', 'response.create', and 'response.cancel'.`,
          'type',
          eventId,
        );
    }
  }

  private sessionUpdate(event: Json): void {
    const patch = obj(event.session);
    if (patch === undefined) {
      this.error(
        'missing_required_parameter',
        "Missing required parameter: 'session'.",
        'session',
        event.event_id,
      );
      return;
    }
    const { id, object, model, type, expires_at, ...rest } = patch;
    this.session = deepMerge(this.session, rest);
    this.emit('session.updated', { session: this.session });
  }

  private lastItemId(): string | null {
    return str(this.items.at(-1)?.item.id) ?? null;
  }

  private addItem(item: Json, audioTokens: number, ms: number, previous: string | null): void {
    this.items.push({ item, audioTokens, audioMs: ms });
    this.emit('conversation.item.added', { previous_item_id: previous, item });
    this.emit('conversation.item.done', { previous_item_id: previous, item });
  }

  private itemCreate(event: Json, eventId: unknown): void {
    const raw = obj(event.item);
    if (raw === undefined) {
      this.error('missing_required_parameter', "Missing required parameter: 'item'.", 'item', eventId);
      return;
    }
    const previous = str(event.previous_item_id) ?? this.lastItemId();
    // Audio is counted, not kept: the recording already holds what the client sent.
    let audioBytes = 0;
    const content = arr(raw.content).map((part) => {
      const p = obj(part);
      const audio = str(p?.audio);
      if (p === undefined || audio === undefined) return part;
      audioBytes += base64Bytes(audio);
      return { ...p, audio: undefined, transcript: p.transcript ?? null };
    });
    const item: Json = {
      id: str(raw.id) ?? nextId('item_'),
      object: 'realtime.item',
      ...raw,
      status: 'completed',
      ...(raw.content !== undefined ? { content } : {}),
    };
    const format = obj(obj(obj(this.session.audio)?.input))?.format;
    const ms = audioMs(audioBytes, format);
    this.addItem(item, Math.ceil(ms / INPUT_AUDIO_MS_PER_TOKEN), ms, previous);
  }

  private itemDelete(event: Json, eventId: unknown): void {
    const id = str(event.item_id);
    const at = this.items.findIndex((e) => e.item.id === id);
    if (at < 0) {
      this.error('item_not_found', `Item with item_id not found: ${String(id)}`, 'item_id', eventId);
      return;
    }
    this.items.splice(at, 1);
    this.emit('conversation.item.deleted', { item_id: id });
  }

  private itemRetrieve(event: Json, eventId: unknown): void {
    const id = str(event.item_id);
    const entry = this.items.find((e) => e.item.id === id);
    if (entry === undefined) {
      this.error('item_not_found', `Item with item_id not found: ${String(id)}`, 'item_id', eventId);
      return;
    }
    this.emit('conversation.item.retrieved', { item: entry.item });
  }

  private itemTruncate(event: Json, eventId: unknown): void {
    const id = str(event.item_id);
    const entry = this.items.find((e) => e.item.id === id);
    if (entry === undefined) {
      this.error('item_not_found', `Item with item_id not found: ${String(id)}`, 'item_id', eventId);
      return;
    }
    const end = typeof event.audio_end_ms === 'number' ? event.audio_end_ms : 0;
    entry.audioTokens = Math.min(entry.audioTokens, Math.ceil(end / INPUT_AUDIO_MS_PER_TOKEN));
    this.emit('conversation.item.truncated', {
      item_id: id,
      content_index: event.content_index ?? 0,
      audio_end_ms: end,
    });
  }

  private commit(eventId: unknown): void {
    const input = obj(obj(this.session.audio)?.input);
    const ms = audioMs(this.audioBuffer, input?.format);
    if (ms < 100) {
      this.error(
        'input_audio_buffer_commit_empty',
        `Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has ${ms.toFixed(2)}ms of audio.`,
        null,
        eventId,
      );
      return;
    }
    this.audioBuffer = 0;
    const previous = this.lastItemId();
    const item: Json = {
      id: nextId('item_'),
      object: 'realtime.item',
      type: 'message',
      status: 'completed',
      role: 'user',
      content: [{ type: 'input_audio', transcript: null }],
    };
    const audioTokens = Math.ceil(ms / INPUT_AUDIO_MS_PER_TOKEN);
    this.emit('input_audio_buffer.committed', { previous_item_id: previous, item_id: item.id });
    this.addItem(item, audioTokens, ms, previous);
    const transcription = obj(input?.transcription);
    if (transcription !== undefined) {
      const transcript = `Simulated transcript of ${ms} ms of audio.`;
      const out = tokens(transcript);
      this.emit('conversation.item.input_audio_transcription.completed', {
        item_id: item.id,
        content_index: 0,
        transcript,
        usage: {
          type: 'tokens',
          total_tokens: audioTokens + out,
          input_tokens: audioTokens,
          input_token_details: { text_tokens: 0, audio_tokens: audioTokens },
          output_tokens: out,
        },
      });
    }
  }

  /** Text and audio tokens of a response's context, and the user text it echoes. */
  private countContext(instructions: string, input: unknown[] | undefined): ContextCount {
    let text = tokens(instructions);
    let audio = 0;
    let userText = '';
    const entries: Entry[] =
      input === undefined
        ? this.items
        : input.map((raw) => {
            const item = obj(raw) ?? {};
            if (str(item.type) === 'item_reference') {
              const found = this.items.find((e) => e.item.id === item.id);
              if (found) return found;
            }
            return { item, audioTokens: 0, audioMs: 0 };
          });
    for (const entry of entries) {
      const t = itemText(entry.item);
      text += tokens(t);
      audio += entry.audioTokens;
      if (str(entry.item.role) === 'user') userText = t !== '' ? t : `(audio ${entry.audioMs} ms)`;
    }
    return { text, audio, userText };
  }

  private responseCreate(params: Json, eventId: unknown): void {
    const { conn } = this;
    if (this.transcription) {
      this.error(
        'invalid_request_error',
        'Responses are not available in a transcription session.',
        null,
        eventId,
      );
      return;
    }
    if (this.run !== undefined && !this.run.finished) {
      this.error(
        'conversation_already_has_active_response',
        `Conversation already has an active response in progress: ${this.run.id}. Wait until the response is finished before creating a new one.`,
        null,
        eventId,
      );
      return;
    }
    const session = this.session;
    const modalities = arr(params.output_modalities ?? session.output_modalities);
    const audio = !modalities.includes('text');
    const instructions = str(params.instructions) ?? str(session.instructions) ?? '';
    const inConversation = params.conversation !== 'none';
    const input = Array.isArray(params.input) ? params.input : undefined;
    const maxTokens = params.max_output_tokens ?? session.max_output_tokens;
    const outputAudio = deepMerge(
      obj(obj(session.audio)?.output) ?? {},
      obj(obj(params.audio)?.output) ?? {},
    );
    const knobs = conn.knobs;

    const ctx = this.countContext(instructions, input);
    const inputCount = { text: ctx.text, audio: ctx.audio };
    const inputTotal = ctx.text + ctx.audio;
    const cached =
      knobs.cachedTokens > 0
        ? Math.min(knobs.cachedTokens, inputTotal)
        : Math.min(Math.floor(this.previousInput / CACHE_STEP) * CACHE_STEP, inputTotal);
    const tools = arr(params.tools ?? session.tools).flatMap((t) => {
      const tool = obj(t);
      return tool?.type === 'function' && typeof tool.name === 'string' ? [tool.name] : [];
    });
    const toolName = tools.includes('get_weather') ? 'get_weather' : tools[0];
    const last = input === undefined ? this.items.at(-1)?.item : obj(input.at(-1));
    const choice = params.tool_choice ?? session.tool_choice;
    if (
      inConversation &&
      wantsTool({
        toolName,
        lastIsUser: str(last?.role) === 'user',
        userText: ctx.userText,
        knobs,
        forced: choice === 'required',
        disabled: choice === 'none',
      })
    ) {
      this.callTools(toolName!, ctx.userText, inputCount, cached, {
        conversation_id: this.conversationId,
        output_modalities: [audio ? 'audio' : 'text'],
        max_output_tokens: maxTokens ?? 'inf',
        audio: { output: { format: outputAudio.format ?? null, voice: outputAudio.voice ?? 'alloy' } },
        metadata: params.metadata ?? null,
      });
      return;
    }
    let reply = replyText(ctx.userText, knobs);
    let truncated = false;
    if (typeof maxTokens === 'number') {
      const cut = truncateToTokens(reply, maxTokens);
      reply = cut.text;
      truncated = cut.truncated;
    }
    const pieces = splitPieces(reply, knobs.chunks);
    const audioTotal = Math.round(
      (tokens(reply) * SPEECH_MS_PER_TEXT_TOKEN * bytesPerSecond(outputAudio.format)) / 1000,
    );

    const id = nextId('resp_');
    const itemId = nextId('item_');
    const responseBase: Json = {
      object: 'realtime.response',
      id,
      status: 'in_progress',
      status_details: null,
      output: [],
      conversation_id: inConversation ? this.conversationId : null,
      output_modalities: [audio ? 'audio' : 'text'],
      max_output_tokens: maxTokens ?? 'inf',
      audio: { output: { format: outputAudio.format ?? null, voice: outputAudio.voice ?? 'alloy' } },
      usage: null,
      metadata: params.metadata ?? null,
    };
    const steps: Array<() => void> = [];
    const run: Run = {
      id,
      itemId,
      audio,
      inConversation,
      previousItemId: inConversation ? this.lastItemId() : null,
      input: inputCount,
      cached,
      textSent: '',
      audioBytesSent: 0,
      itemAdded: false,
      partAdded: false,
      finished: false,
      responseBase,
      outputFormat: outputAudio.format,
    };
    const ids = { response_id: id, item_id: itemId, output_index: 0, content_index: 0 };
    // The opening events go out with the first delta; pacing (x-sim-chunk-delay-ms) is between deltas.
    const opening = (): void => {
      this.emit('response.created', { response: responseBase });
      const item = this.outputItem(run, 'in_progress', false);
      this.emit('response.output_item.added', { response_id: id, output_index: 0, item });
      if (inConversation)
        this.emit('conversation.item.added', { previous_item_id: run.previousItemId, item });
      run.itemAdded = true;
      this.emit('response.content_part.added', {
        ...ids,
        part: audio ? { type: 'audio', transcript: '' } : { type: 'text', text: '' },
      });
      run.partAdded = true;
    };
    // Audio is cut into as many chunks as the transcript, PCM16 samples kept whole.
    const sample = bytesPerSecond(outputAudio.format) === 8000 ? 1 : 2;
    let audioOffset = 0;
    pieces.forEach((piece, i) => {
      const end = Math.floor(((i + 1) * audioTotal) / pieces.length / sample) * sample;
      const chunkBytes = i === pieces.length - 1 ? audioTotal - audioOffset : end - audioOffset;
      audioOffset += chunkBytes;
      steps.push(() => {
        if (i === 0) opening();
        if (audio) {
          this.emit('response.output_audio_transcript.delta', { ...ids, delta: piece });
          this.emit('response.output_audio.delta', { ...ids, delta: speech(chunkBytes).toString('base64') });
          run.audioBytesSent += chunkBytes;
        } else {
          this.emit('response.output_text.delta', { ...ids, delta: piece });
        }
        run.textSent += piece;
      });
    });
    const deltas = pieces.length;
    steps.push(() =>
      this.finish(run, truncated ? 'incomplete' : 'completed', truncated ? 'max_output_tokens' : undefined),
    );
    const failure = this.failure.mode;
    const midstream = failure === 'midstream' || failure === 'midstream-reset';
    run.turn = new PacedTurn(
      conn,
      steps,
      knobs.chunkDelayMs,
      midstream ? Math.ceil(deltas / 2) : undefined,
      () => {
        run.finished = true;
        if (failure === 'midstream-reset') {
          conn.terminate();
          return;
        }
        this.conn.send({
          type: 'error',
          event_id: nextId('event_'),
          error: {
            type: 'server_error',
            code: 'server_error',
            message: failMessage(500),
            param: null,
            event_id: null,
          },
        });
        conn.close(1011, 'server_error');
      },
    );
    this.run = run;
    run.turn.start();
  }

  /**
   * The model calls the tools (one call per place asked about), all at once: one function_call item each,
   * its arguments in one delta, and the response ends with them (the client answers with
   * function_call_output items and a new response.create).
   */
  private callTools(
    name: string,
    userText: string,
    input: { text: number; audio: number },
    cached: number,
    fields: Json,
  ): void {
    const id = nextId('resp_');
    const base: Json = { object: 'realtime.response', id, status: 'in_progress', status_details: null };
    this.emit('response.created', { response: { ...base, output: [], ...fields, usage: null } });
    const output: Json[] = [];
    let argumentTokens = 0;
    for (const [i, call] of toolCallsFor(name, userText, true).entries()) {
      const previous = this.lastItemId();
      const callId = nextId('call_');
      const item: Json = {
        id: nextId('item_'),
        object: 'realtime.item',
        type: 'function_call',
        status: 'in_progress',
        name: call.name,
        call_id: callId,
        arguments: '',
      };
      const ids = { response_id: id, item_id: item.id, output_index: i, call_id: callId };
      this.emit('response.output_item.added', { response_id: id, output_index: i, item });
      this.emit('conversation.item.added', { previous_item_id: previous, item });
      this.emit('response.function_call_arguments.delta', { ...ids, delta: call.argsJson });
      this.emit('response.function_call_arguments.done', {
        ...ids,
        name: call.name,
        arguments: call.argsJson,
      });
      const done = { ...item, status: 'completed', arguments: call.argsJson };
      this.items.push({ item: done, audioTokens: 0, audioMs: 0 });
      this.emit('conversation.item.done', { previous_item_id: previous, item: done });
      this.emit('response.output_item.done', { response_id: id, output_index: i, item: done });
      output.push(done);
      argumentTokens += tokens(`${call.name}${call.argsJson}`);
    }
    const usage = usageObject(input, cached, { text: argumentTokens, audio: 0 });
    this.previousInput = input.text + input.audio;
    this.emit('response.done', {
      response: {
        ...base,
        status: 'completed',
        output,
        ...fields,
        usage: this.conn.knobs.noUsage ? null : usage,
      },
    });
    this.conn.responseDone();
  }

  /** The assistant item as it stands (audio data omitted, as the API does after the deltas). */
  private outputItem(run: Run, status: string, withContent: boolean): Json {
    const content = !withContent
      ? []
      : run.audio
        ? [{ type: 'output_audio', transcript: run.textSent }]
        : [{ type: 'output_text', text: run.textSent }];
    return { id: run.itemId, object: 'realtime.item', type: 'message', status, role: 'assistant', content };
  }

  /** The closing events, for a response that completed, ran out of tokens, or was cancelled mid-way. */
  private finish(run: Run, status: 'completed' | 'incomplete' | 'cancelled', reason?: string): void {
    if (run.finished) return;
    run.finished = true;
    const ids = { response_id: run.id, item_id: run.itemId, output_index: 0, content_index: 0 };
    const itemStatus = status === 'completed' ? 'completed' : 'incomplete';
    if (run.partAdded) {
      if (run.audio) {
        this.emit('response.output_audio.done', ids);
        this.emit('response.output_audio_transcript.done', { ...ids, transcript: run.textSent });
      } else {
        this.emit('response.output_text.done', { ...ids, text: run.textSent });
      }
      this.emit('response.content_part.done', {
        ...ids,
        part: run.audio ? { type: 'audio', transcript: run.textSent } : { type: 'text', text: run.textSent },
      });
    }
    const output: Json[] = [];
    if (run.itemAdded) {
      const item = this.outputItem(run, itemStatus, run.partAdded);
      if (run.inConversation) {
        this.emit('conversation.item.done', { previous_item_id: run.previousItemId, item });
        const ms = audioMs(run.audioBytesSent, run.outputFormat);
        this.items.push({ item, audioTokens: Math.ceil(ms / INPUT_AUDIO_MS_PER_TOKEN), audioMs: ms });
      }
      this.emit('response.output_item.done', { response_id: run.id, output_index: 0, item });
      output.push(item);
    }
    const textTokens = tokens(run.textSent);
    const audioTokens = run.audio
      ? Math.ceil(audioMs(run.audioBytesSent, run.outputFormat) / OUTPUT_AUDIO_MS_PER_TOKEN)
      : 0;
    const usage = usageObject(run.input, run.cached, { text: textTokens, audio: audioTokens });
    this.previousInput = run.input.text + run.input.audio;
    this.emit('response.done', {
      response: {
        ...run.responseBase,
        status,
        status_details:
          status === 'completed'
            ? null
            : status === 'cancelled'
              ? { type: 'cancelled', reason: reason ?? 'client_cancelled' }
              : { type: 'incomplete', reason },
        output,
        usage: this.conn.knobs.noUsage ? null : usage,
      },
    });
    this.conn.responseDone();
    this.emit('rate_limits.updated', {
      rate_limits: [
        {
          name: 'tokens',
          limit: RATE_LIMIT_TOKENS,
          remaining: RATE_LIMIT_TOKENS - (usage.total_tokens as number),
          reset_seconds: 0.001,
        },
      ],
    });
  }

  private responseCancel(eventId: unknown): void {
    const run = this.run;
    if (run === undefined || run.finished) {
      this.error(
        'response_cancel_not_active',
        'Cancellation failed: no active response found',
        null,
        eventId,
      );
      return;
    }
    run.turn?.stop();
    this.finish(run, 'cancelled', 'client_cancelled');
  }
}
