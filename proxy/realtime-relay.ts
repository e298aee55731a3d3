// The relay of an open realtime session (docs/realtime.md): frames both ways with back-pressure, or
// through the rule's realtime translator (realtime-translate.ts); the usage each model response reports
// is put on record before the message that reports it reaches the client; a response the client cuts is
// cancelled or estimated as the upstream's dialect allows; the gateway's own closes wait for the
// response in progress. The upgrade that leads here is realtime-session.ts.

import { type RawData, WebSocket } from 'ws';
import { errorText, GatewayError } from '../common/errors.ts';
import type { RelayCounter } from '../common/gateway-metrics.ts';
import type { JsonObject, Usage } from '../common/types.ts';
import type { RealtimeDialect, RealtimeUsage } from '../hooks/families/types.ts';
import { runRequestStages } from './pipeline.ts';
import { record, sessionContext } from './realtime-record.ts';
import { FrameTranslator, type RealtimeTranslation, type TranslatedFrames } from './realtime-translate.ts';
import type { Context } from './request-context.ts';
import type { RuleHooks, Runtime } from './runtime.ts';

/** A side's unsent bytes above which the other side stops being read, and below which it resumes. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;

/** Server messages of one response kept for estimating a cut one. */
const MAX_KEPT_MESSAGES = 10_000;

/** How long a response cancelled by a client that left gets to report its usage. */
const CANCEL_WAIT_MS = 5000;

/** WebSocket close codes sent to the client (4xxx would be the application's own). */
export const CLOSE = { upstreamGone: 1011, policy: 1008, goingAway: 1001, badMessage: 1007 } as const;

/** The upstream socket of each client socket, so that shutdown waits for both to close. */
export const upstreamOf = new WeakMap<WebSocket, WebSocket>();

/** A close reason fits in a control frame (123 bytes of UTF-8). */
export function closeReason(text: string): string {
  return Buffer.byteLength(text) <= 123 ? text : `${text.slice(0, 110)}...`;
}

export function toBuffer(data: FrameData): Buffer {
  if (typeof data === 'string') return Buffer.from(data);
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/** A frame as received, or a translated message's text. */
export type FrameData = RawData | string;

export interface Frame {
  readonly data: FrameData;
  readonly binary: boolean;
  /** Held behind a usage event: the usage it reports, read on arrival (null: none). */
  readonly reported?: RealtimeUsage | null;
}

export interface Upstream {
  readonly socket: WebSocket;
  readonly hooks: RuleHooks;
  /** The rule's realtime translator, when the upstream speaks another family's dialect. */
  readonly translation: RealtimeTranslation | undefined;
  /** Messages the upstream sent before the relay started, in order. */
  readonly early: readonly { readonly data: RawData; readonly binary: boolean }[];
  stopKeeping(): void;
}

export function relay(
  rt: Runtime,
  ctx: Context,
  dialect: RealtimeDialect,
  client: WebSocket,
  up: Upstream,
  firstToUpstream: readonly Frame[],
): void {
  new RealtimeRelay(rt, ctx, dialect, client, up).start(firstToUpstream);
}

/** One session's relay: the two sockets, the messages held behind usage events and the response's state. */
class RealtimeRelay {
  readonly #rt: Runtime;
  readonly #ctx: Context;
  readonly #dialect: RealtimeDialect;
  readonly #client: WebSocket;
  readonly #up: Upstream;
  readonly #upstream: WebSocket;
  readonly #countToClient: RelayCounter;
  // Which dialect governs what: usage and the start of responses are read from the messages the client
  // receives (its own dialect, translated ones when a translator runs), or, when the translator says so,
  // from the upstream's own messages with the client frames made of them held alike; either way a
  // response's usage message reaches the client only once its event is on record. A response the client
  // cuts is cancelled or estimated as the upstream's dialect allows (from the upstream's own messages).
  readonly #translator: FrameTranslator | undefined;
  readonly #upstreamDialect: RealtimeDialect;
  readonly #usageFromUpstream: boolean;
  #turn = 0;
  // Server messages wait behind a usage event being put on record: the client sees the message that
  // reports a response only once its event is (as an HTTP reply's last byte).
  #recording: Promise<void> | undefined;
  readonly #held: Frame[] = [];
  // Closing for a reason of the gateway's (a subject blocked meanwhile, the duration limit) waits for
  // the response being generated to end, so that it is delivered and billed whole.
  #active = false;
  #closing: string | undefined;
  #leftMidResponse: (() => void) | undefined;
  readonly #estimates: boolean;
  readonly #relayedInResponse: JsonObject[] = [];
  #lastUsage: Usage | undefined;

  constructor(rt: Runtime, ctx: Context, dialect: RealtimeDialect, client: WebSocket, up: Upstream) {
    this.#rt = rt;
    this.#ctx = ctx;
    this.#dialect = dialect;
    this.#client = client;
    this.#up = up;
    this.#upstream = up.socket;
    this.#countToClient = rt.metrics.realtimeFrames.toClient;
    this.#translator =
      up.translation === undefined
        ? undefined
        : new FrameTranslator(up.translation, ctx.model ?? '', ctx.upstreamModel ?? ctx.model ?? '');
    this.#upstreamDialect = up.translation?.upstreamDialect ?? dialect;
    this.#usageFromUpstream = up.translation?.factory.usageFrom === 'upstream';
    this.#estimates =
      this.#upstreamDialect.cancelMessage === undefined && this.#upstreamDialect.estimateCut !== undefined;
  }

  /** Wires the sockets: the first messages both ways, then every later one, the closes and the limits. */
  start(firstToUpstream: readonly Frame[]): void {
    const rt = this.#rt;
    const ctx = this.#ctx;
    const client = this.#client;
    const upstream = this.#upstream;
    const translator = this.#translator;
    upstreamOf.set(client, upstream);
    if (translator === undefined)
      for (const f of firstToUpstream) upstream.send(f.data, { binary: f.binary });
    const toUpstream = rt.metrics.realtimeFrames.toUpstream;
    rt.metrics.realtimeSessions.inc();
    client.once('close', () => rt.metrics.realtimeSessions.dec());
    client.on('message', (data, binary) => {
      toUpstream.frame(byteLength(data));
      if (translator === undefined) this.#send(upstream, data, binary);
      else this.#cross(() => translator.fromClient(data, binary));
    });
    const maxS = rt.config.limits.realtimeMaxSessionS;
    if (maxS > 0) {
      const timer = setTimeout(
        () => this.#closeAfterResponse(`the session reached its longest duration (${maxS} s)`),
        maxS * 1000,
      );
      timer.unref();
      client.once('close', () => clearTimeout(timer));
    }
    this.#up.stopKeeping();
    if (translator !== undefined) {
      this.#cross(() => translator.open());
      // The client's first messages (Gemini's setup) are translated as every later one.
      for (const f of firstToUpstream) this.#cross(() => translator.fromClient(f.data, f.binary));
    }
    for (const m of this.#up.early) this.#fromUpstream(m.data, m.binary);
    upstream.on('message', this.#fromUpstream);
    client.on('close', (code, reason) => this.#clientClosed(code, reason));
    // The client gets what was held behind a usage event before the close (an upstream may close right
    // after its last usage message).
    upstream.on('close', (code, reason) => this.#afterHeld(() => closeOther(client, code, reason)));
    client.on('error', (err) => ctx.log.debug({ err: errorText(err) }, 'realtime client socket failed'));
    upstream.on('error', (err) => {
      ctx.log.warn({ provider: ctx.provider, err: errorText(err) }, 'realtime upstream socket failed');
      if (client.readyState === WebSocket.OPEN)
        client.close(CLOSE.upstreamGone, 'the upstream connection failed');
    });
  }

  // A side is read only while the sockets its messages fill are below the water marks; through a
  // translator the client's messages fill its own socket too (errors, echoes), so one that does not
  // read stops being read.
  #fills(side: WebSocket): WebSocket[] {
    const client = this.#client;
    const upstream = this.#upstream;
    return side === upstream ? [client] : this.#translator === undefined ? [upstream] : [upstream, client];
  }

  readonly #balance = (): void => {
    for (const side of [this.#client, this.#upstream])
      if (side.isPaused && this.#fills(side).every((s) => s.bufferedAmount < LOW_WATER)) side.resume();
  };

  #send(to: WebSocket, data: FrameData, binary: boolean): void {
    if (to.readyState !== WebSocket.OPEN) return;
    to.send(data, { binary }, this.#balance);
    if (to.bufferedAmount > HIGH_WATER)
      for (const side of [this.#client, this.#upstream])
        if (!side.isPaused && this.#fills(side).includes(to)) side.pause();
  }

  #toClient(data: FrameData, binary: boolean): void {
    this.#countToClient.frame(byteLength(data));
    this.#send(this.#client, data, binary);
  }

  /** `reported`: the usage the message reports (noteFrame read it), null when none. */
  #deliver(data: FrameData, binary: boolean, reported: RealtimeUsage | null): void {
    if (this.#recording !== undefined) {
      this.#held.push({ data, binary, reported });
      return;
    }
    // Google's servers send the Live API's JSON messages as binary frames: both kinds are read.
    if (reported === null) {
      this.#toClient(data, binary);
      return;
    }
    const usage = reported;
    const pending = record(this.#rt, this.#ctx, this.#up.hooks, usage.responseId, usage.usage, 'upstream');
    if (pending === undefined) {
      this.#toClient(data, binary);
      this.#responseEnded();
      return;
    }
    this.#held.push({ data, binary });
    // The message that reports the usage goes out; what came behind it is read as it would have been.
    const release = () => {
      this.#recording = undefined;
      const [reported, ...rest] = this.#held.splice(0);
      if (reported !== undefined) this.#toClient(reported.data, reported.binary);
      this.#responseEnded();
      for (const m of rest) this.#deliver(m.data, m.binary, m.reported ?? null);
    };
    this.#recording = pending.then(release, release);
  }

  #closeNow(reason: string): void {
    if (this.#client.readyState === WebSocket.OPEN) this.#client.close(CLOSE.policy, closeReason(reason));
  }

  #closeAfterResponse(reason: string): void {
    this.#closing ??= reason;
    if (!this.#active && this.#recording === undefined) this.#closeNow(this.#closing);
  }

  /** Runs once the messages held behind usage events have gone to the client. */
  #afterHeld(then: () => void): void {
    if (this.#recording === undefined) then();
    else this.#recording.then(() => this.#afterHeld(then));
  }

  /** A response's usage has been recorded and its message delivered. */
  #responseEnded(): void {
    if (this.#leftMidResponse !== undefined) return;
    if (this.#closing !== undefined) {
      if (!this.#active) this.#closeNow(this.#closing);
      return;
    }
    const ctx = this.#ctx;
    // The subject may have been blocked (webhook) since the session opened: the key and the balance are
    // asked again (from the caches), as for a new request.
    runRequestStages(this.#rt.requestHooks, sessionContext(ctx, ctx.id, undefined)).then(
      (again) => {
        if (again.kind === 'respond') this.#closeAfterResponse(refusalText(again.body));
      },
      (err: unknown) => {
        if (err instanceof GatewayError && err.status < 500) this.#closeAfterResponse(err.message);
        else ctx.log.warn({ err: errorText(err) }, 'realtime balance re-check failed');
      },
    );
  }

  // A response starts and ends as its messages arrive, not as they are delivered (a usage message may
  // be held): a client that leaves while a usage is being recorded cut nothing, and a response that
  // starts meanwhile is in progress.
  // Returns the usage the message reports (null: none), so that it is read once per message.
  #noteFrame(data: FrameData, reader: RealtimeDialect = this.#dialect): RealtimeUsage | null {
    if (!this.#active && reader.responseMarkers.some((m) => toBuffer(data).includes(m))) this.#active = true;
    const usage = usageIn(reader, data, this.#turn + 1);
    if (usage === undefined) return null;
    // Counted as they arrive: turns without ids are numbered in arrival order, held or not.
    this.#turn++;
    this.#active = false;
    this.#lastUsage = usage.usage;
    this.#relayedInResponse.length = 0;
    this.#leftMidResponse?.();
    return usage;
  }

  #keepRelayed(data: RawData): void {
    // What a response relays is kept only where a cut one is estimated from it (bounded).
    if (this.#active && this.#estimates && this.#relayedInResponse.length < MAX_KEPT_MESSAGES) {
      try {
        this.#relayedInResponse.push(JSON.parse(toBuffer(data).toString('utf8')) as JsonObject);
      } catch {
        // not JSON: nothing to count
      }
    }
  }

  /** A message through the translator: its frames for the client mark and report responses as relayed ones do. */
  #cross(translate: () => TranslatedFrames, relayed?: RawData): void {
    const client = this.#client;
    let frames: TranslatedFrames;
    try {
      frames = translate();
    } catch (err) {
      // A translator fault ends its session, never the gateway.
      this.#ctx.log.error({ err: errorText(err) }, 'realtime translation failed');
      if (client.readyState === WebSocket.OPEN)
        client.close(CLOSE.upstreamGone, 'the message could not be translated');
      return;
    }
    const usageFromUpstream = this.#usageFromUpstream;
    const reports = usageFromUpstream ? [] : frames.client.map((m) => this.#noteFrame(m));
    const upstreamUsage =
      usageFromUpstream && relayed !== undefined ? this.#noteFrame(relayed, this.#upstreamDialect) : null;
    if (relayed !== undefined) this.#keepRelayed(relayed);
    for (const m of frames.upstream) this.#send(this.#upstream, m, false);
    // With usage from upstream, the last frame made of a message that reports it reports it (a
    // translator makes one).
    const last = frames.client.length - 1;
    for (const [i, m] of frames.client.entries())
      this.#deliver(m, false, usageFromUpstream ? (i === last ? upstreamUsage : null) : reports[i]!);

    const close = frames.close;
    if (close !== undefined) {
      const shut = () => {
        if (client.readyState === WebSocket.OPEN) client.close(close.code, closeReason(close.reason));
      };
      // After what the translation sent the client, held ones included.
      this.#afterHeld(shut);
    }
  }

  readonly #fromUpstream = (data: RawData, binary: boolean): void => {
    const translator = this.#translator;
    if (translator !== undefined) {
      this.#cross(() => translator.fromUpstream(data), data);
      return;
    }
    const usage = this.#noteFrame(data);
    this.#keepRelayed(data);
    this.#deliver(data, binary, usage);
  };

  #clientClosed(code: number, reason: Buffer): void {
    const ctx = this.#ctx;
    const upstream = this.#upstream;
    // A client that leaves mid-response: the response is cancelled upstream, and the usage the upstream
    // reports for what it generated until then is billed; bounded, then the upstream is closed anyway.
    const cancel = this.#upstreamDialect.cancelMessage;
    if (this.#active && cancel !== undefined && upstream.readyState === WebSocket.OPEN) {
      upstream.send(JSON.stringify(cancel));
      const timer = setTimeout(() => closeOther(upstream, code, reason), CANCEL_WAIT_MS);
      // Its usage is on record when the response ends (responseEnded): then the upstream may go.
      this.#leftMidResponse = () => {
        clearTimeout(timer);
        closeOther(upstream, code, reason);
      };
      return;
    }
    if (this.#active && this.#estimates) {
      // No cancel that reports usage: what was relayed of the cut response is billed as an estimate.
      const model = ctx.upstreamModel ?? ctx.model ?? '';
      const usage = this.#upstreamDialect.estimateCut!(this.#relayedInResponse, model, this.#lastUsage);
      this.#turn++;
      const responseId = this.#translator?.responseInProgress ?? `turn-${this.#turn}`;
      record(this.#rt, ctx, this.#up.hooks, responseId, usage, 'estimated');
    }
    closeOther(upstream, code, reason);
  }
}

/** The message of a refusal body in any family's shape. */
function refusalText(body: unknown): string {
  const error = (body as { error?: { message?: unknown } } | null)?.error;
  return typeof error?.message === 'string' ? error.message : 'the session is no longer allowed';
}

function byteLength(data: FrameData): number {
  if (typeof data === 'string') return Buffer.byteLength(data);
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data.byteLength;
}

function closeOther(other: WebSocket, code: number, reason: Buffer): void {
  if (other.readyState === WebSocket.CLOSED || other.readyState === WebSocket.CLOSING) return;
  // 1005 (no status) and 1006 (abnormal) are never sent in a close frame.
  const sendable = code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 && code !== 1015;
  other.close(sendable ? code : 1000, sendable ? reason : undefined);
}

function usageIn(
  dialect: RealtimeDialect,
  data: FrameData,
  turn: number,
): { responseId: string; usage: Usage } | undefined {
  // Most frames (audio and text deltas) carry no usage: looked for in the bytes, decoded only on a hit.
  const bytes = toBuffer(data);
  if (!dialect.usageMarkers.some((m) => bytes.includes(m))) return undefined;
  try {
    const message = JSON.parse(bytes.toString('utf8')) as JsonObject;
    return dialect.usage(message, turn);
  } catch {
    return undefined;
  }
}
