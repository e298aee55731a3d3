// Gemini Live over WebSocket: /ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent.
// One instance per connection: setup, the conversation history, pending realtime audio and the turn
// being streamed. Message shapes follow BidiGenerateContent{Setup,ClientContent,RealtimeInput,ServerMessage}.

import {
  failMessage,
  flagKnob,
  type HandshakeFailure,
  PacedTurn,
  type RealtimeConn,
  type RealtimeProtocolSession,
  speech,
} from './realtime-types.ts';
import {
  asArray as arr,
  nextId,
  asObject as obj,
  replyText,
  splitPieces,
  asString as str,
  tokens,
  toolCallsFor,
  truncateToTokens,
  wantsTool,
} from './text.ts';
import type { FailMode } from './types.ts';

type Json = Record<string, unknown>;

/** Gemini counts audio at 32 tokens per second, input and output alike. */
const AUDIO_TOKENS_PER_SECOND = 32;
/** Generated speech lasts 100 ms per reply-text token. */
const SPEECH_MS_PER_TEXT_TOKEN = 100;
const OUTPUT_RATE = 24_000;
const OUTPUT_MIME = `audio/pcm;rate=${OUTPUT_RATE}`;
/** Input audio without a rate in its MIME type is 16 kHz PCM16, as the API assumes. */
const DEFAULT_INPUT_RATE = 16_000;

/** Milliseconds of a base64 PCM16 blob, its rate from the MIME type ("audio/pcm;rate=16000"). */
function blobMs(blob: Json | undefined): number {
  const data = str(blob?.data);
  if (data === undefined) return 0;
  const mime = str(blob?.mimeType) ?? '';
  if (!mime.startsWith('audio/')) return 0;
  const rate = Number(/rate=(\d+)/.exec(mime)?.[1] ?? DEFAULT_INPUT_RATE) || DEFAULT_INPUT_RATE;
  return Math.round((Buffer.byteLength(data, 'base64') * 1000) / (rate * 2));
}

function audioTokens(ms: number): number {
  return Math.ceil((ms * AUDIO_TOKENS_PER_SECOND) / 1000);
}

interface Turn {
  role: string;
  text: string;
  audioMs: number;
  /** Audio tokens of the turn in later prompts (the model's own speech counts as audio too). */
  audioTokens: number;
}

/** The turn being streamed, with how far it got (an interruption reports what was sent). */
interface Run {
  turn?: PacedTurn;
  audio: boolean;
  finished: boolean;
  prompt: { text: number; audio: number };
  textSent: string;
  audioMsSent: number;
  /** Function calls sent, waiting for the client's toolResponse (the turn goes on after it). */
  calls?: string[];
  /** Tokens of the turn before its function calls were answered (prompt and calls), counted at its end. */
  carried?: { prompt: number; response: number };
}

export class GeminiLiveSession implements RealtimeProtocolSession {
  private setupDone = false;
  private failure: FailMode | undefined;
  private audioOut = true;
  private outputTranscription = false;
  private inputTranscription = false;
  private system = '';
  private maxTokens: number | undefined;
  /** Names of the function declarations of the setup's tools. */
  private functions: string[] = [];
  private readonly history: Turn[] = [];
  private pendingAudioMs = 0;
  private run: Run | undefined;

  private readonly conn: RealtimeConn;
  private readonly handshake: HandshakeFailure;

  constructor(conn: RealtimeConn, handshake: HandshakeFailure) {
    this.conn = conn;
    this.handshake = handshake;
    conn.record.id = nextId('live_');
    this.failure = handshake.mode;
  }

  open(): void {}

  closed(): void {
    this.run?.turn?.stop();
  }

  /** Gemini ends a session with a close frame whose reason carries the error. */
  private fatal(code: number, reason: string): void {
    this.conn.close(code, reason.slice(0, 120));
  }

  message(value: unknown, text: string): void {
    if (this.failure === 'hang') return;
    const msg = obj(value);
    if (msg === undefined) {
      this.fatal(1007, `Invalid JSON payload received. Unexpected token: ${text.slice(0, 20)}`);
      return;
    }
    if (!this.setupDone) {
      const setup = obj(msg.setup);
      if (setup === undefined) {
        this.fatal(1007, 'Request contains an invalid argument: the first message must be setup.');
        return;
      }
      this.setup(setup);
      return;
    }
    if (msg.clientContent !== undefined) this.clientContent(obj(msg.clientContent) ?? {});
    else if (msg.realtimeInput !== undefined) this.realtimeInput(obj(msg.realtimeInput) ?? {});
    else if (msg.toolResponse !== undefined) this.toolResponse(obj(msg.toolResponse) ?? {});
    else if (msg.setup !== undefined)
      this.fatal(1007, 'Request contains an invalid argument: setup was already sent.');
    else this.fatal(1007, `Invalid JSON payload received. Unknown name "${Object.keys(msg)[0] ?? ''}".`);
  }

  private setup(setup: Json): void {
    const { conn } = this;
    const name = str(setup.model) ?? '';
    if (name === '') {
      this.fatal(1007, 'Request contains an invalid argument: setup.model is required.');
      return;
    }
    const model = name.replace(/^models\//, '');
    conn.record.model = model;
    conn.knobs = conn.knobsFor(model);
    conn.binary = flagKnob(conn.knobHeaders, 'binary', model);
    if (!this.handshake.decided && conn.knobs.fail !== undefined) this.failure = conn.failure(conn.knobs);
    const failure = this.failure;
    if (failure === 'hang') return;
    if (failure === 'reset') {
      conn.terminate();
      return;
    }
    if (typeof failure === 'number') {
      this.fatal(failure >= 500 || failure === 429 ? 1011 : 1008, failMessage(failure));
      return;
    }
    const generation = obj(setup.generationConfig) ?? {};
    const modalities = arr(generation.responseModalities).map((m) => String(m).toUpperCase());
    this.audioOut = !modalities.includes('TEXT');
    this.maxTokens = typeof generation.maxOutputTokens === 'number' ? generation.maxOutputTokens : undefined;
    this.outputTranscription = setup.outputAudioTranscription !== undefined;
    this.inputTranscription = setup.inputAudioTranscription !== undefined;
    this.functions = arr(setup.tools).flatMap((t) =>
      arr(obj(t)?.functionDeclarations).flatMap((d) => str(obj(d)?.name) ?? []),
    );
    const sys = setup.systemInstruction;
    this.system = typeof sys === 'string' ? sys : partsText(obj(sys)?.parts).text;
    this.setupDone = true;
    const complete = (): void => conn.send({ setupComplete: {} });
    if (conn.knobs.latencyMs > 0) conn.later(complete, conn.knobs.latencyMs);
    else complete();
  }

  private clientContent(content: Json): void {
    this.interrupt();
    for (const raw of arr(content.turns)) {
      const turn = obj(raw);
      const parts = partsText(turn?.parts);
      const role = str(turn?.role) ?? 'user';
      this.history.push({
        role,
        text: parts.text,
        audioMs: parts.audioMs,
        audioTokens: audioTokens(parts.audioMs),
      });
    }
    if (content.turnComplete === true) this.respond(false);
  }

  private realtimeInput(input: Json): void {
    const chunks = [obj(input.audio), ...arr(input.mediaChunks).map(obj)];
    for (const chunk of chunks) this.pendingAudioMs += blobMs(chunk);
    if (input.activityStart !== undefined) this.interrupt();
    const text = str(input.text);
    if (text !== undefined && text !== '') {
      this.interrupt();
      this.commitAudio(text);
      this.respond(false);
    } else if (
      (input.audioStreamEnd === true || input.activityEnd !== undefined) &&
      this.pendingAudioMs > 0
    ) {
      this.interrupt();
      this.commitAudio('');
      this.respond(this.inputTranscription);
    }
  }

  /** The pending realtime audio (and text) becomes a user turn. */
  private commitAudio(text: string): void {
    const ms = this.pendingAudioMs;
    this.pendingAudioMs = 0;
    this.history.push({ role: 'user', text, audioMs: ms, audioTokens: audioTokens(ms) });
  }

  /** A new client turn while the model is answering: interrupted, then the turn completes with what was sent. */
  private interrupt(): void {
    const run = this.run;
    if (run === undefined || run.finished) return;
    run.turn?.stop();
    this.conn.send({ serverContent: { interrupted: true } });
    this.complete(run);
  }

  private respond(transcribeInput: boolean, carried?: Run['carried']): void {
    const { conn } = this;
    const knobs = conn.knobs;
    let promptText = tokens(this.system);
    let promptAudio = 0;
    let userText = '';
    let userMs = 0;
    for (const turn of this.history) {
      promptText += tokens(turn.text);
      promptAudio += turn.audioTokens;
      if (turn.role === 'user') {
        userText = turn.text;
        userMs = turn.audioMs;
      }
    }
    if (userText === '' && userMs > 0) userText = `(audio ${userMs} ms)`;
    const toolName = this.functions.includes('get_weather') ? 'get_weather' : this.functions[0];
    const lastIsUser = this.history.at(-1)?.role === 'user';
    if (wantsTool({ toolName, lastIsUser, userText, knobs, forced: false, disabled: false })) {
      this.callTools(toolName!, userText, { text: promptText, audio: promptAudio }, transcribeInput, userMs);
      return;
    }
    let reply = replyText(userText, knobs);
    if (this.maxTokens !== undefined) reply = truncateToTokens(reply, this.maxTokens).text;
    const pieces = splitPieces(reply, knobs.chunks);
    const replyTokens = tokens(reply);
    const run: Run = {
      audio: this.audioOut,
      finished: false,
      prompt: { text: promptText, audio: promptAudio },
      textSent: '',
      audioMsSent: 0,
      carried,
    };
    const steps: Array<() => void> = [];
    const totalMs = replyTokens * SPEECH_MS_PER_TEXT_TOKEN;
    let msOffset = 0;
    pieces.forEach((piece, i) => {
      const end = Math.floor(((i + 1) * totalMs) / pieces.length);
      const ms = end - msOffset;
      msOffset = end;
      steps.push(() => {
        // The input transcription goes out with the first chunk; pacing is between chunks.
        if (i === 0 && transcribeInput) {
          conn.send({
            serverContent: { inputTranscription: { text: `Simulated transcript of ${userMs} ms of audio.` } },
          });
        }
        if (run.audio) {
          const data = speech(Math.round((ms * OUTPUT_RATE * 2) / 1000)).toString('base64');
          conn.send({
            serverContent: { modelTurn: { parts: [{ inlineData: { mimeType: OUTPUT_MIME, data } }] } },
          });
          if (this.outputTranscription)
            conn.send({ serverContent: { outputTranscription: { text: piece } } });
          run.audioMsSent += ms;
        } else {
          conn.send({ serverContent: { modelTurn: { parts: [{ text: piece }] } } });
        }
        run.textSent += piece;
      });
    });
    const deltas = pieces.length;
    steps.push(() => {
      conn.send({ serverContent: { generationComplete: true } });
      this.complete(run);
    });
    const failure = this.failure;
    const midstream = failure === 'midstream' || failure === 'midstream-reset';
    run.turn = new PacedTurn(
      conn,
      steps,
      knobs.chunkDelayMs,
      midstream ? Math.ceil(deltas / 2) : undefined,
      () => {
        run.finished = true;
        if (failure === 'midstream-reset') conn.terminate();
        else this.fatal(1011, 'Internal error encountered.');
      },
    );
    this.run = run;
    run.turn.start();
  }

  /**
   * The model calls the tools (one call per place asked about) and waits: the turn goes on once the
   * client's toolResponse answers them, and its turnComplete counts both parts.
   */
  private callTools(
    name: string,
    userText: string,
    prompt: { text: number; audio: number },
    transcribeInput: boolean,
    userMs: number,
  ): void {
    const { conn } = this;
    if (transcribeInput)
      conn.send({
        serverContent: { inputTranscription: { text: `Simulated transcript of ${userMs} ms of audio.` } },
      });
    const calls = toolCallsFor(name, userText, true).map((c) => ({
      id: nextId('fc_'),
      name: c.name,
      args: c.args,
    }));
    const text = calls.map((c) => `${c.name}${JSON.stringify(c.args)}`).join('\n');
    this.history.push({ role: 'model', text, audioMs: 0, audioTokens: 0 });
    this.run = {
      audio: this.audioOut,
      finished: false,
      prompt: { text: 0, audio: 0 },
      textSent: '',
      audioMsSent: 0,
      calls: calls.map((c) => c.id),
      carried: { prompt: prompt.text + prompt.audio, response: tokens(text) },
    };
    conn.send({ toolCall: { functionCalls: calls } });
  }

  /** The answers to the pending function calls: the turn goes on with the reply. */
  private toolResponse(response: Json): void {
    const run = this.run;
    const responses = arr(response.functionResponses).map(obj);
    if (run?.calls === undefined || run.finished) return;
    const answered = new Set(responses.map((r) => str(r?.id)));
    if (!run.calls.every((id) => answered.has(id))) return;
    this.history.push({ role: 'function', text: JSON.stringify(responses), audioMs: 0, audioTokens: 0 });
    run.finished = true;
    this.respond(false, run.carried);
  }

  /** turnComplete with the usage of the turn (partial when it was interrupted); the reply joins the history. */
  private complete(run: Run): void {
    if (run.finished) return;
    run.finished = true;
    const textTokens = tokens(run.textSent);
    const outAudio = run.audio ? audioTokens(run.audioMsSent) : 0;
    this.history.push({
      role: 'model',
      text: run.audio ? '' : run.textSent,
      audioMs: run.audioMsSent,
      audioTokens: outAudio,
    });
    const prompt = run.prompt.text + run.prompt.audio + (run.carried?.prompt ?? 0);
    const reply = run.audio ? outAudio : textTokens;
    const calls = run.carried?.response ?? 0;
    const response = reply + calls;
    const knobs = this.conn.knobs;
    const usage: Json = {
      promptTokenCount: prompt,
      responseTokenCount: response,
      totalTokenCount: prompt + response,
      promptTokensDetails: [
        { modality: 'TEXT', tokenCount: run.prompt.text },
        ...(run.prompt.audio > 0 ? [{ modality: 'AUDIO', tokenCount: run.prompt.audio }] : []),
      ],
      // Function calls are text, whatever the reply's modality.
      responseTokensDetails:
        run.audio && calls > 0
          ? [
              { modality: 'AUDIO', tokenCount: reply },
              { modality: 'TEXT', tokenCount: calls },
            ]
          : [{ modality: run.audio ? 'AUDIO' : 'TEXT', tokenCount: response }],
    };
    if (knobs.cachedTokens > 0) {
      const cached = Math.min(knobs.cachedTokens, prompt);
      usage.cachedContentTokenCount = cached;
      usage.cacheTokensDetails = [{ modality: 'TEXT', tokenCount: cached }];
    }
    this.conn.send(
      knobs.noUsage
        ? { serverContent: { turnComplete: true } }
        : { serverContent: { turnComplete: true }, usageMetadata: usage },
    );
    this.conn.responseDone();
  }
}

/** Text of Content parts (joined by newlines) and the length of their inline audio. */
function partsText(parts: unknown): { text: string; audioMs: number } {
  let text = '';
  let audioMs = 0;
  for (const raw of arr(parts)) {
    const part = obj(raw);
    const t = str(part?.text);
    if (t !== undefined && t !== '' && part?.thought !== true) text = text === '' ? t : `${text}\n${t}`;
    audioMs += blobMs(obj(part?.inlineData));
  }
  return { text, audioMs };
}
