// Relaying the upstream reply to the client: the choice between the three relays, a JSON reply
// (observed before its last byte leaves, or transformed whole) and raw bytes (audio, images). SSE
// streams, and binary event streams a registered framing decodes, are in relay-stream.ts.

import type { ServerResponse } from 'node:http';
import { errorText, GatewayError } from '../common/errors.ts';
import type { JsonValue, ResponseHead } from '../common/types.ts';
import { framingOf } from '../hooks/families/index.ts';
import { recordDelivered } from './metering.ts';
import { runResponseChunk, runResponseHead } from './pipeline.ts';
import { type RelayJob, relayStream } from './relay-stream.ts';
import type { RequestCompletion } from './request-completion.ts';
import type { Context } from './request-context.ts';
import type { RuleHooks } from './runtime.ts';
import { write } from './send.ts';
import { classifyUpstreamError, forwardableHeaders, type UpstreamResponse } from './upstream.ts';

/** JSON replies up to this size are observed before any byte is sent; larger ones stream but a byte. */
const OBSERVE_FIRST_BYTES = 16 * 1024;

/** Largest upstream JSON reply the gateway parses (images as base64 can be large). */
const MAX_JSON_REPLY_BYTES = 256 * 1024 * 1024;

export async function relay(
  ctx: Context,
  hooks: RuleHooks,
  up: UpstreamResponse,
  res: ServerResponse,
  activeStreams: { inc(): void; dec(): void },
  completion: RequestCompletion,
): Promise<void> {
  ctx.status = up.statusCode;
  const head: ResponseHead = runResponseHead(hooks.head, ctx, {
    status: up.statusCode,
    headers: forwardableHeaders(up.headers),
  });
  ctx.status = head.status;
  head.headers['x-router-request-id'] = ctx.id;
  if (ctx.correlationId !== undefined) head.headers['x-router-correlation-id'] = ctx.correlationId;
  const job: RelayJob = { ctx, hooks, up, res, head, completion };
  const contentType = head.headers['content-type'] ?? '';
  // A binary event stream (AWS's) is decoded by its framing and goes to the client as SSE.
  const framing = head.status < 400 ? framingOf(contentType) : undefined;
  if ((contentType.startsWith('text/event-stream') || framing !== undefined) && head.status < 400) {
    activeStreams.inc();
    try {
      return await relayStream(job, framing);
    } finally {
      activeStreams.dec();
    }
  }
  if (contentType.includes('json') || head.status >= 400) {
    return relayJson(job);
  }
  return relayRaw(job);
}

async function relayJson(job: RelayJob): Promise<void> {
  const { ctx, hooks, up, res, head, completion } = job;
  let raw: Buffer;
  try {
    raw = await up.body.readAll(MAX_JSON_REPLY_BYTES);
  } catch (err) {
    throw classifyUpstreamError(err);
  }
  if (hooks.observeOnly) {
    head.headers['content-length'] = String(raw.length);
    res.writeHead(head.status, head.headers);
    ctx.responseStarted = true;
    // The reply is whole for the client at its last byte, and the request must be complete (its usage
    // event on record) by then. A small body is observed first; a large one goes out but for its last
    // byte while the observers parse it.
    const holdBack = raw.length > OBSERVE_FIRST_BYTES;
    if (holdBack) res.write(raw.subarray(0, raw.length - 1));
    // A trace reads the reply's facts only when it is sampled: parsing every reply for an unsampled one
    // cost more than the rest of its tracing.
    if (hooks.response.length > 0 || hooks.keepDelivered || ctx.trace?.recording === true) {
      const value = parseReply(raw, head.status);
      if (value !== undefined) {
        runResponseChunk(hooks.response, ctx, [{ type: 'json', value }]);
        ctx.trace?.reply(ctx.clientFormat, value);
      }
      // Output text is kept only when it is needed to estimate usage the upstream did not report.
      if (hooks.keepDelivered && head.status < 400 && ctx.usage === undefined) {
        recordDelivered(ctx, raw.toString('utf8'), { bytes: 0 });
      }
    }
    await completion.endReply(res, holdBack ? raw.subarray(raw.length - 1) : raw);
    return;
  }
  const value = parseReply(raw, head.status);
  if (value === undefined) throw new GatewayError('upstream_bad_response');
  const parts = runResponseChunk(hooks.response, ctx, [{ type: 'json', value }]);
  const json = parts.find((p) => p.type === 'json');
  const out = json === undefined ? value : json.value;
  ctx.trace?.reply(ctx.clientFormat, out);
  const text = JSON.stringify(out);
  head.headers['content-length'] = String(Buffer.byteLength(text));
  res.writeHead(head.status, head.headers);
  ctx.responseStarted = true;
  if (hooks.keepDelivered && head.status < 400 && ctx.usage === undefined) {
    recordDelivered(ctx, text, { bytes: 0 });
  }
  await completion.endReply(res, text);
}

/** A reply body as JSON; an error body that is not JSON becomes its text, a 2xx one is unreadable. */
function parseReply(raw: Buffer, status: number): JsonValue | undefined {
  const text = raw.toString('utf8');
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    return status >= 400 ? text : undefined;
  }
}

async function relayRaw(job: RelayJob): Promise<void> {
  const { ctx, up, res, head, completion } = job;
  res.writeHead(head.status, head.headers);
  ctx.responseStarted = true;
  try {
    for await (const chunk of up.body) {
      const pending = write(res, chunk);
      if (pending !== undefined) await pending;
    }
  } catch (err) {
    if (!ctx.clientAborted) {
      ctx.error = { code: 'upstream_unreachable', message: 'upstream body failed' };
      ctx.log.warn({ err: errorText(err) }, 'upstream body failed mid-way');
      res.destroy();
      return;
    }
  }
  await completion.endReply(res);
}
