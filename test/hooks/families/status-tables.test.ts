// One status table per wire family, pinned to what each vendor documents, and used alike by the
// gateway's own errors and by the translators that answer that family's clients.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../../common/errors.ts';
import type { JsonValue } from '../../../common/types.ts';
import { anthropicToOpenai } from '../../../hooks/families/anthropic/anthropic-to-openai.ts';
import { anthropicFamily } from '../../../hooks/families/anthropic/index.ts';
import { geminiToOpenai } from '../../../hooks/families/gemini/gemini-to-openai.ts';
import { geminiFamily } from '../../../hooks/families/gemini/index.ts';
import { errorBody } from '../../../hooks/families/index.ts';
import { openaiFamily } from '../../../hooks/families/openai/index.ts';
import type { TranslatorInit } from '../../../hooks/translators/types.ts';

const INIT: TranslatorInit = {
  requestId: 'req_t',
  model: 'm',
  upstreamModel: 'm',
  stream: false,
  createdAt: 1760000000,
};

/** Anthropic's API errors page: HTTP status -> `error.type`. */
const ANTHROPIC_DOCUMENTED: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

/** The gateway's choices for statuses Anthropic's page does not list. */
const ANTHROPIC_CHOSEN: Readonly<Record<number, string>> = {
  405: 'invalid_request_error',
  408: 'timeout_error',
  415: 'invalid_request_error',
  502: 'api_error',
  503: 'overloaded_error',
};

/** google.rpc.Code: each code's documented HTTP mapping, read backwards (one code per status). */
const GOOGLE_DOCUMENTED: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/**
 * The gateway's choices for statuses Google's mapping has no row for: a failed precondition for the
 * balance check (Google answers a missing billing setup with FAILED_PRECONDITION), the nearest code
 * otherwise.
 */
const GOOGLE_CHOSEN: Readonly<Record<number, string>> = {
  402: 'FAILED_PRECONDITION',
  405: 'UNIMPLEMENTED',
  408: 'DEADLINE_EXCEEDED',
  412: 'FAILED_PRECONDITION',
  413: 'INVALID_ARGUMENT',
  414: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  422: 'INVALID_ARGUMENT',
  502: 'UNAVAILABLE',
  505: 'INTERNAL',
};

function entries(table: Readonly<Record<number, string>>): [number, string][] {
  return Object.entries(table).map(([status, name]) => [Number(status), name]);
}

test('the Anthropic table gives each status the type Anthropic documents', () => {
  for (const [status, type] of entries({ ...ANTHROPIC_DOCUMENTED, ...ANTHROPIC_CHOSEN })) {
    assert.equal(anthropicFamily.errorType(status), type, `HTTP ${status}`);
  }
});

test('the Gemini table gives each status the google.rpc code Google maps it to', () => {
  for (const [status, code] of entries({ ...GOOGLE_DOCUMENTED, ...GOOGLE_CHOSEN })) {
    assert.equal(geminiFamily.errorType(status), code, `HTTP ${status}`);
  }
});

test('the completion-style table types the statuses its SDK tells apart', () => {
  assert.equal(openaiFamily.errorType(401), 'authentication_error');
  assert.equal(openaiFamily.errorType(403), 'permission_error');
  assert.equal(openaiFamily.errorType(429), 'rate_limit_error');
  assert.equal(openaiFamily.errorType(400), 'invalid_request_error');
  assert.equal(openaiFamily.errorType(504), 'server_error');
});

/** Every catalogue status the gateway can answer a family's client with. */
const GATEWAY_ERRORS = [
  new GatewayError('insufficient_balance'),
  new GatewayError('invalid_api_key'),
  new GatewayError('not_found'),
  new GatewayError('method_not_allowed'),
  new GatewayError('request_timeout'),
  new GatewayError('request_too_large'),
  new GatewayError('unsupported_media_type'),
  new GatewayError('internal_error'),
  new GatewayError('upstream_unreachable'),
  new GatewayError('shutting_down'),
  new GatewayError('upstream_timeout'),
];

function errorField(body: JsonValue, key: string): unknown {
  return (body as { error: Record<string, unknown> }).error[key];
}

test('gateway errors and translated upstream errors read the same Anthropic table', () => {
  for (const err of GATEWAY_ERRORS) {
    const own = errorField(errorBody('anthropic', err, 'req_t'), 'type');
    const translated = errorField(anthropicToOpenai.create(INIT).error(err.status, '<html>'), 'type');
    assert.equal(own, anthropicFamily.errorType(err.status), err.code);
    assert.equal(translated, own, `HTTP ${err.status}`);
  }
});

test('gateway errors and translated upstream errors read the same Gemini table', () => {
  for (const err of GATEWAY_ERRORS) {
    const own = errorField(errorBody('gemini', err, 'req_t'), 'status');
    const translated = errorField(geminiToOpenai.create(INIT).error(err.status, '<html>'), 'status');
    assert.equal(own, geminiFamily.errorType(err.status), err.code);
    assert.equal(translated, own, `HTTP ${err.status}`);
  }
});
