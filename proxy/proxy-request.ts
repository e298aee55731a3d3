// One proxied request from its first byte to its completion: the context, the body read and checked,
// the onRequest stage, the upstream leg, and the error reply in the client's shape.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorText, GatewayError, toGatewayError } from '../common/errors.ts';
import type { JsonObject, OnRequestResult, RequestContext } from '../common/types.ts';
import { forward } from './forward.ts';
import { lingerAfterReply } from './lingering-close.ts';
import { MODEL_NAME_RULE, modelNameProblem } from './model-name.ts';
import { runAuthenticate, runOnRequest } from './pipeline.ts';
import { parseJsonBody, readMultipartFields, startBodyRead } from './request-body.ts';
import { RequestCompletion } from './request-completion.ts';
import { Context } from './request-context.ts';
import { RequestTrace } from './request-trace.ts';
import type { Route } from './routes.ts';
import type { Runtime } from './runtime.ts';
import { identify, sendError, sendJson } from './send.ts';

export async function proxyRequest(
  rt: Runtime,
  route: Extract<Route, { kind: 'proxy' }>,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  correlationId: string | undefined,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const ctx = new Context(rt.log, route, req, id, route.upstreamPath ?? path, query);
  ctx.correlationId = correlationId;
  if (rt.tracing.enabled) {
    ctx.trace = new RequestTrace(rt.tracing, ctx, req, routeTemplate(route, path));
  }
  const onClose = () => {
    if (!res.writableFinished) ctx.abort();
  };
  res.on('close', onClose);
  // The request completes exactly once: just before the reply's last byte when it is served, or after
  // the connection closes otherwise.
  const completion = new RequestCompletion(rt, ctx);
  // The body is read while the key is checked, and parsed only once the key is accepted: nothing of an
  // unauthenticated request's body is interpreted.
  const bodyRead = startBodyRead(req, rt.config.limits.maxBodyBytes, rt.config.limits.clientBodyTimeoutMs);
  try {
    let early: OnRequestResult;
    try {
      early = await runAuthenticate(rt.requestHooks, ctx);
    } catch (err) {
      bodyRead.cancel();
      throw err;
    }
    if (early.kind === 'continue') {
      ctx.rawBody = await bodyRead.bytes;
      // A malformed body, or a model name out of shape, is answered after the onRequest hooks: a
      // refused balance says so whatever the body.
      const bodyError = await parseRequest(rt, route, req, ctx);
      early = await runOnRequest(rt.requestHooks, ctx);
      if (early.kind === 'continue' && bodyError !== undefined) throw bodyError;
    } else {
      bodyRead.cancel();
    }
    if (early.kind === 'respond') {
      if (!req.complete) lingerAfterReply(req, res);
      identify(res, id, correlationId);
      if (early.headers !== undefined)
        for (const [k, v] of Object.entries(early.headers)) res.setHeader(k, v);
      ctx.status = early.status;
      sendJson(res, early.status, early.body);
      return;
    }
    await forward(rt, ctx, res, completion);
  } catch (err) {
    const gwErr = toGatewayError(err);
    if (err instanceof GatewayError) {
      // answered below in the client's shape
    } else if (ctx.clientAborted || req.destroyed || isConnectionReset(err)) {
      // A client that goes away mid-request is ordinary traffic, not a gateway fault.
      ctx.abort();
      ctx.log.debug({ err: errorText(err) }, 'client went away');
    } else {
      ctx.log.error({ err: errorText(err) }, 'request failed');
    }
    ctx.error = { code: gwErr.code, message: gwErr.message };
    if (!res.headersSent) {
      ctx.status = gwErr.status;
      // What the client still sends of a refused body is discarded within a bound, then the connection closes.
      if (!req.complete && !req.destroyed) lingerAfterReply(req, res);
      // A request that reached a provider is reported even when it failed: its event goes on record
      // before the error reply leaves, as a served reply's does (docs/billing.md "The guarantees").
      const recorded = ctx.provider === undefined ? undefined : completion.complete();
      if (recorded !== undefined) await recorded;
      if (!res.headersSent) identify(res, id, correlationId);
      sendError(res, ctx.clientFormat, gwErr, id);
    } else if (!res.writableEnded) {
      res.end();
    }
  } finally {
    if (!completion.started && !res.writableFinished && !res.destroyed) await onceClosed(res);
    await completion.settled();
    // The reply outlives the request: V8's young-generation collections keep a closed connection's
    // socket, and with it its reply and the reply's listeners, until the next full collection. A
    // listener left here would keep the whole context (the parsed body and its prompt) alive with it,
    // so every large body was moved to the old generation after its request had ended.
    res.off('close', onClose);
  }
}

/** http.route: the path, with a model named in it as `{model}` (bounded span names). */
function routeTemplate(route: Extract<Route, { kind: 'proxy' }>, path: string): string {
  const model = route.pathModel;
  if (model === undefined) return path;
  for (const form of [model, encodeURIComponent(model)]) {
    const at = path.indexOf(`/${form}`);
    if (at >= 0) return `${path.slice(0, at + 1)}{model}${path.slice(at + 1 + form.length)}`;
  }
  return route.api;
}

function isConnectionReset(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE';
}

function onceClosed(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.writableFinished || res.destroyed) resolve();
    else res.once('close', resolve);
  });
}

/** ctx.body (JSON) or the multipart fields the gateway reads; a client error is returned, not thrown. */
async function parseRequest(
  rt: Runtime,
  route: Extract<Route, { kind: 'proxy' }>,
  req: IncomingMessage,
  ctx: RequestContext,
): Promise<GatewayError | undefined> {
  if (route.body === 'json') {
    let body: JsonObject;
    try {
      body = parseJsonBody(route.format, route.api, ctx.rawBody, rt.config.limits.maxJsonDepth);
    } catch (err) {
      if (err instanceof GatewayError) return err;
      throw err;
    }
    ctx.body = body;
    if (ctx.model === undefined && typeof body.model === 'string') ctx.model = body.model;
    if (body.stream === true) ctx.stream = true;
    return modelError(ctx);
  }
  const contentType = req.headers['content-type'] ?? '';
  if (!contentType.toLowerCase().startsWith('multipart/form-data')) {
    return new GatewayError('unsupported_media_type', 'Expected a multipart/form-data body');
  }
  try {
    const fields = await readMultipartFields(contentType, ctx.rawBody);
    ctx.model = fields.model;
    ctx.stream = fields.stream;
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  return modelError(ctx);
}

/**
 * A model name outside the documented shape is refused before it is routed, priced, logged or rendered
 * into an upstream path; ctx.model is cleared so nothing after this keeps the client's string.
 */
function modelError(ctx: RequestContext): GatewayError | undefined {
  if (ctx.model === undefined) return undefined;
  const problem = modelNameProblem(ctx.model);
  if (problem === undefined) return undefined;
  ctx.model = undefined;
  return new GatewayError(
    'invalid_model',
    `The model name is not valid: ${problem}. ${MODEL_NAME_RULE}`,
    'model',
  );
}
