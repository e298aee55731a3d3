// POST /v1/realtime/client_secrets, answered by the gateway (docs/realtime.md "Client secrets"): a
// server holding an access key asks for a short-lived secret that a browser uses to open one realtime
// session, in the shape of the vendor endpoint it mirrors ({ value, expires_at, session }); errors in the
// shape of the family that owns the path.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError, toGatewayError } from '../common/errors.ts';
import type { JsonObject, JsonValue } from '../common/types.ts';
import { lingerAfterReply } from './lingering-close.ts';
import { MODEL_NAME_RULE, modelNameProblem } from './model-name.ts';
import { readBody } from './request-body.ts';
import type { Runtime } from './runtime.ts';
import { sendError, sendJson } from './send.ts';

/** OpenAI's bounds for `expires_after.seconds`, and its default. */
const MIN_TTL_S = 10;
const MAX_TTL_S = 7200;
const DEFAULT_TTL_S = 600;

export async function answerClientSecret(
  rt: Runtime,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  query: URLSearchParams,
  format: string,
): Promise<void> {
  try {
    const principal = await rt.authenticate(req.headers, query);
    const raw = await readBody(req, 64 * 1024, rt.config.limits.clientBodyTimeoutMs);
    let body: JsonObject = {};
    if (raw.length > 0) {
      try {
        const parsed = JSON.parse(raw.toString('utf8')) as JsonValue;
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error();
        body = parsed;
      } catch {
        throw new GatewayError('invalid_json');
      }
    }
    const expires = body.expires_after as JsonObject | undefined;
    const seconds = expires?.seconds ?? DEFAULT_TTL_S;
    if (
      typeof seconds !== 'number' ||
      !Number.isInteger(seconds) ||
      seconds < MIN_TTL_S ||
      seconds > MAX_TTL_S
    )
      throw new GatewayError(
        'invalid_parameter',
        `expires_after.seconds must be an integer from ${MIN_TTL_S} to ${MAX_TTL_S}`,
        'expires_after.seconds',
      );
    const session = (body.session as JsonObject | undefined) ?? { type: 'realtime' };
    const model = session.model;
    if (model !== undefined && (typeof model !== 'string' || modelNameProblem(model) !== undefined))
      throw new GatewayError(
        'invalid_model',
        `session.model is not a valid model name. ${MODEL_NAME_RULE}`,
        'session.model',
      );
    const secret = rt.clientSecrets.mint(principal, seconds, model);
    sendJson(res, 200, {
      value: secret.value,
      expires_at: Math.floor(secret.expiresAt / 1000),
      session,
    });
  } catch (err) {
    if (!req.complete && !req.destroyed) lingerAfterReply(req, res);
    sendError(res, format, toGatewayError(err), id);
  }
}
