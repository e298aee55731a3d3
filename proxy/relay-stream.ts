// Relaying an upstream event stream: raw bytes when every response hook only observes, the hooks'
// events otherwise (a chunk they passed on unchanged still goes out as received), and an error event
// in the client's shape when the upstream fails mid-stream. A binary stream (a registered framing's
// content type) is decoded into the same events and always serialized as SSE.

import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { errorText, GatewayError } from '../common/errors.ts';
import type { JsonValue, RequestContext, ResponseHead, ResponsePart } from '../common/types.ts';
import { errorEvent, REPLY_TEXT_FIELDS } from '../hooks/families/index.ts';
import type { StreamFraming, StreamFramingDecoder } from '../hooks/families/types.ts';
import { DELIVERED_TEXT_LIMIT, recordDelivered } from './metering.ts';
import { runResponseChunk, runResponseEnd } from './pipeline.ts';
import type { RequestCompletion } from './request-completion.ts';
import type { Context } from './request-context.ts';
import type { RequestTrace } from './request-trace.ts';
import type { RuleHooks } from './runtime.ts';
import { write } from './send.ts';
import { endsWithBlankLine, type SseEvent, SseReader, serializeEvent } from './sse.ts';
import { classifyUpstreamError, type UpstreamResponse } from './upstream.ts';

/** One reply on its way to the client, as the three relays take it. */
export interface RelayJob {
  readonly ctx: Context;
  readonly hooks: RuleHooks;
  readonly up: UpstreamResponse;
  readonly res: ServerResponse;
  readonly head: ResponseHead;
  readonly completion: RequestCompletion;
}

/**
 * An event that carries generated text: a non-empty string under one of the text fields of the families'
 * deltas (role-only deltas, `message_start`, pings and usage events do not). Tested only until the first.
 */
const GENERATED_TEXT = new RegExp(
  `"(?:${[...REPLY_TEXT_FIELDS].map(escapeRegExp).join('|')})"\\s*:\\s*"[^"]`,
);

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^$|()[\]{}\\]/g, '\\$&');
}

/**
 * Relays an SSE stream, or with `framing` a binary event stream: its decoder turns each network chunk
 * into events, which go through the same hooks and reach the client serialized as SSE (there are no
 * bytes a client could take as they came).
 */
export async function relayStream(job: RelayJob, framing?: StreamFraming): Promise<void> {
  const { ctx, hooks, up, res, head, completion } = job;
  if (framing === undefined) head.headers['content-type'] ??= 'text/event-stream';
  else {
    head.headers['content-type'] = 'text/event-stream; charset=utf-8';
    delete head.headers['content-length'];
  }
  head.headers['cache-control'] = 'no-cache';
  head.headers['x-accel-buffering'] = 'no';
  res.writeHead(head.status, head.headers);
  res.flushHeaders();
  ctx.responseStarted = true;
  const passthrough = hooks.observeOnly && framing === undefined;
  const keep = { bytes: hooks.keepDelivered ? 0 : DELIVERED_TEXT_LIMIT };
  // Transform mode: the events the hooks gave out for the current chunk; serialized only when the chunk
  // cannot go out as received (see the loop).
  const held: SseEvent[] = [];
  let unchanged = true;
  const trace = ctx.trace;
  // Events the client has been given (as received when passed through, else the hooks' output): an
  // error event the gateway adds continues their numbering.
  let eventsSent = 0;
  const emit = (parts: readonly ResponsePart[]) => {
    // Read on after the client left: the hooks saw the events, nothing is delivered.
    if (ctx.clientAborted) return;
    for (const part of parts) {
      if (part.type !== 'event') continue;
      if (!passthrough) eventsSent++;
      if (!passthrough) held.push(part);
      if (keep.bytes < DELIVERED_TEXT_LIMIT) recordDelivered(ctx, part.data, keep);
      if (trace !== undefined) traceEvent(trace, ctx.clientFormat, part.data);
    }
  };
  const serializeHeld = (): string => {
    let text = '';
    for (const ev of held) text += serializeEvent(ev);
    held.length = 0;
    return text;
  };
  const onEvent = (ev: SseEvent) => {
    if (passthrough) eventsSent++;
    if (ctx.firstTokenMs === undefined && GENERATED_TEXT.test(ev.data)) {
      ctx.firstTokenMs = performance.now() - ctx.startedAt;
    }
    const part: ResponsePart = { type: 'event', event: ev.event, data: ev.data };
    const parts = runResponseChunk(hooks.response, ctx, [part]);
    // Hooks hand an event on unchanged as its own part object (provider-rule.ts, observers).
    if (parts.length !== 1 || parts[0] !== part) unchanged = false;
    emit(parts);
  };
  const reader = framing === undefined ? new SseReader(onEvent) : new FramedReader(framing, onEvent);
  // In transform mode a chunk still goes out as the bytes received when serializing could not change
  // it: the stream was at an event boundary before the chunk and is again at its end (it ends with a
  // blank line), so its bytes are exactly the events it completed, and the hooks passed every one of
  // them on as it came (nothing dropped, added or changed). That is most chunks of a stream (the usage
  // strip drops one event), and they skip building and encoding a string per event. Comment lines
  // (`: keep-alive`) and id/retry fields in such a chunk reach the client as sent; a chunk that starts
  // or ends mid-event, or in which a hook changed anything, is serialized from the hooks' output.
  let atBoundary = true;
  const readOnMs = completion.readOnMs;
  let stopReading: (() => void) | undefined;
  if (readOnMs !== undefined) {
    ctx.cancellation.defer(() => {
      stopReading = readOn(ctx, completion, readOnMs);
    });
  }
  try {
    for await (const chunk of up.body) {
      if (chunk.length === 0) continue;
      if (ctx.clientAborted) {
        reader.push(chunk);
      } else if (passthrough) {
        const pending = write(res, chunk);
        reader.push(chunk);
        if (pending !== undefined) await pending;
      } else {
        const fromBoundary = atBoundary;
        unchanged = true;
        reader.push(chunk);
        atBoundary = framing === undefined && endsWithBlankLine(chunk);
        let data: Uint8Array | string;
        if (fromBoundary && atBoundary && unchanged) {
          held.length = 0;
          data = chunk;
        } else {
          data = serializeHeld();
        }
        if (data.length > 0) {
          const pending = write(res, data);
          if (pending !== undefined) await pending;
        }
      }
    }
    reader.end();
  } catch (err) {
    // The client left and the upstream call was ended: at once, or (read on) at the bound or a shutdown.
    if (ctx.clientAborted && ctx.endReason !== 'client_gone') return;
    const gwErr = classifyUpstreamError(err);
    ctx.error = {
      code: gwErr instanceof GatewayError ? gwErr.code : 'upstream_unreachable',
      message: 'upstream stream failed',
    };
    ctx.log.warn({ provider: ctx.provider, err: errorText(err) }, 'upstream stream failed mid-way');
  } finally {
    if (readOnMs !== undefined) ctx.cancellation.defer(undefined);
    stopReading?.();
  }
  if (ctx.clientAborted) return;
  const before = held.length;
  emit(runResponseEnd(hooks.response, ctx));
  const ended = held.length > before;
  let out = serializeHeld();
  if (passthrough && ctx.error !== undefined) {
    out += `\n\n${serializeEvent(errorEvent(ctx.clientFormat, streamFailure(ctx), ctx.id, eventsSent))}`;
  } else if (ctx.error !== undefined && !ended) {
    out += serializeEvent(errorEvent(ctx.clientFormat, streamFailure(ctx), ctx.id, eventsSent));
  }
  if (out !== '') res.write(out);
  // Clients (and SDKs) see the stream as over only when the response ends: complete first.
  await completion.endReply(res);
}

/**
 * finish_upstream: the client left, and the stream is read on (its events through the hooks, so the
 * usage meter reads the final counts) until the upstream ends it or `maxMs` passes. Returns what stops
 * the bound and forgets the stream when the reading is over.
 */
function readOn(ctx: Context, completion: RequestCompletion, maxMs: number): () => void {
  ctx.endReason = 'client_gone';
  ctx.log.debug({ maxMs }, 'client gone: reading the upstream on for its final usage');
  const timer = setTimeout(() => {
    ctx.endReason = 'timeout';
    ctx.cancellation.end();
  }, maxMs);
  // A shutdown stops the reading, and the stream is billed as if it had stopped with its client.
  const forget = completion.adoptOrphan(() => {
    ctx.endReason = undefined;
    ctx.cancellation.end();
  });
  return () => {
    clearTimeout(timer);
    forget();
  };
}

/** A binary stream's decoder behind the SSE reader's two calls. */
class FramedReader {
  readonly #decoder: StreamFramingDecoder;
  readonly #onEvent: (ev: SseEvent) => void;

  constructor(framing: StreamFraming, onEvent: (ev: SseEvent) => void) {
    this.#decoder = framing.create();
    this.#onEvent = onEvent;
  }

  push(chunk: Uint8Array): void {
    this.#deliver(this.#decoder.decode(chunk));
  }

  end(): void {
    this.#deliver(this.#decoder.end());
  }

  #deliver(parts: readonly ResponsePart[]): void {
    for (const part of parts) {
      if (part.type === 'event') {
        this.#onEvent(
          part.event === undefined ? { data: part.data } : { event: part.event, data: part.data },
        );
      }
    }
  }
}

function streamFailure(ctx: RequestContext): GatewayError {
  return new GatewayError(
    ctx.error?.code === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_unreachable',
    'The upstream stream failed before it completed',
  );
}

/** Reply facts (id, model, finish reasons) of one event the client gets, when tracing is on. */
function traceEvent(trace: RequestTrace, format: string, data: string): void {
  // Sampled out, nothing new to read, or not a JSON object ([DONE], pings).
  if (data.charCodeAt(0) !== 123 || !trace.wantsEvent(format, data)) return;
  try {
    trace.reply(format, JSON.parse(data) as JsonValue);
  } catch {
    // not JSON: nothing to read
  }
}
