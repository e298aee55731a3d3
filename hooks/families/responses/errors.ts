// Errors of the Responses API: the completion-style body for whole replies, and mid-stream an SSE event
// named `error` whose data is the Responses error chunk (`type`, `code`, `message`, `param`,
// `sequence_number`). The same object is repeated under `error`, the nested form, so both the official
// SDK (which raises `data.error`) and schema-checking clients read it.

import type { GatewayError } from '../../../common/errors.ts';
import { withRequestId } from '../../../common/errors.ts';
import type { SseOut } from '../../../common/types.ts';

/** `eventsSent`: the events of the stream before it, numbered from 0, so this one continues them. */
export function responsesErrorEvent(err: GatewayError, requestId: string, eventsSent = 0): SseOut {
  const error = {
    type: err.type,
    code: err.code,
    message: withRequestId(err.message, requestId),
    param: err.param ?? null,
  };
  const { code, message, param } = error;
  return {
    event: 'error',
    data: JSON.stringify({ type: 'error', sequence_number: eventsSent, code, message, param, error }),
  };
}
