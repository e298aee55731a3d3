// GET and DELETE <path>/{id} of a stored response (hooks/builtin/response-state.ts): the caller's own
// subject's records only, so another subject's id reads as unknown.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { clip, errorText, GatewayError, toGatewayError } from '../common/errors.ts';
import type { Principal } from '../common/types.ts';
import { storedSubject, storeFailure } from '../hooks/builtin/response-state.ts';
import { storedResponsePath } from '../hooks/families/response-state.ts';
import type { Route } from './routes.ts';
import type { Runtime } from './runtime.ts';
import { sendError, sendJson } from './send.ts';

export async function answerStoredResponse(
  rt: Runtime,
  route: Extract<Route, { kind: 'stored_response' }>,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  req.resume();
  try {
    const principal: Principal = await rt.authenticate(req.headers, query);
    const spec = storedResponsePath(path)?.spec;
    const subject = storedSubject({ principal });
    const store = rt.responses;
    const notFound = new GatewayError(
      'response_not_found',
      `Response with id '${clip(route.id, 200)}' not found.`,
    );
    if (spec === undefined || subject === undefined || store === undefined) throw notFound;
    if (req.method === 'DELETE') {
      if (!(await store.delete(subject, route.id))) throw notFound;
      sendJson(res, 200, spec.deleted(route.id));
      return;
    }
    const record = await store.get(subject, route.id);
    const view = record === undefined ? null : spec.view(record);
    if (view === null) throw notFound;
    sendJson(res, 200, view);
  } catch (caught) {
    const err = storeFailure(caught);
    const gwErr = toGatewayError(err);
    if (!(err instanceof GatewayError)) {
      rt.log.warn({ reqId: id, err: errorText(err) }, 'stored response lookup failed');
    }
    sendError(res, route.format, gwErr, id);
  }
}
