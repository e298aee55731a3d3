// AWS Bedrock runtime: InvokeModel / InvokeModelWithResponseStream for Anthropic models (a Messages body
// with anthropic_version "bedrock-2023-05-31"), Converse / ConverseStream for any model, CountTokens.
// Streams are AWS event-stream frames. Converse requests are answered through the Anthropic simulation,
// so both APIs report the same token counts for the same conversation.

import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  type AnthropicTurn,
  anthropicInputTokens,
  anthropicMessage,
  anthropicStreamEvents,
  anthropicTurn,
} from './anthropic.ts';
import { EVENTSTREAM, eventFrame, exceptionFrame } from './eventstream.ts';
import { asArray, asNumber, asObject, asString, splitPieces } from './text.ts';
import type { Dialect, JsonReply, Knobs, RouteHandler, SimReply, SimRequest } from './types.ts';

export const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31';
const REGION_PREFIX = /^(?:us|eu|apac|global|us-gov|jp|au|ca)\./;

const ERROR_TYPES: Record<number, string> = {
  400: 'ValidationException',
  403: 'AccessDeniedException',
  404: 'ResourceNotFoundException',
  408: 'ModelTimeoutException',
  424: 'ModelErrorException',
  429: 'ThrottlingException',
  500: 'InternalServerException',
  503: 'ServiceUnavailableException',
};

/** The status AWS gives each error type (x-sim-error-type may name any of these). */
const TYPE_STATUS: Record<string, number> = {
  ...Object.fromEntries(Object.entries(ERROR_TYPES).map(([s, t]) => [t, Number(s)])),
  ModelNotReadyException: 429,
  ServiceQuotaExceededException: 400,
  ModelStreamErrorException: 424,
};

const STREAM_EXCEPTIONS = new Set([
  'modelStreamErrorException',
  'internalServerException',
  'validationException',
  'throttlingException',
  'modelTimeoutException',
  'serviceUnavailableException',
]);

function header(headers: IncomingHttpHeaders | undefined, name: string): string | undefined {
  const v = headers?.[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Bedrock's error reply: x-amzn-ErrorType names the exception, the body is `{message}`. */
export function bedrockError(status: number, errorType: string, message: string): JsonReply {
  return {
    kind: 'json',
    status,
    body: JSON.stringify({ message }),
    headers: {
      'x-amzn-errortype': `${errorType}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      'x-amzn-requestid': randomUUID(),
    },
  };
}

export const bedrockDialect: Dialect = {
  name: 'bedrock',
  errorReply(status, message, headers) {
    const named = header(headers, 'x-sim-error-type');
    const type =
      named !== undefined && TYPE_STATUS[named] !== undefined
        ? named
        : (ERROR_TYPES[status] ?? (status >= 500 ? 'InternalServerException' : 'ValidationException'));
    return bedrockError(status, type, message);
  },
  hasAuth(headers) {
    return (headers.authorization ?? '').length > 0;
  },
};

/** The model id without an ARN's resource path or an inference-profile region prefix. */
export function baseModelId(modelId: string): string {
  const id = modelId.startsWith('arn:') ? modelId.slice(modelId.lastIndexOf('/') + 1) : modelId;
  return id.replace(REGION_PREFIX, '');
}

export function isAnthropicModel(modelId: string): boolean {
  // An application inference profile's ARN names no model; the simulator takes it for Claude.
  if (/^arn:[^:]+:bedrock:[^:]*:[^:]*:application-inference-profile\//.test(modelId)) return true;
  return baseModelId(modelId).startsWith('anthropic.');
}

/** "anthropic.claude-sonnet-4-5-20250929-v1:0" → "claude-sonnet-4-5-20250929", as the response's `model`. */
function anthropicName(modelId: string): string {
  return baseModelId(modelId)
    .replace(/^anthropic\./, '')
    .replace(/-v\d+(?::\d+)?$/, '');
}

function malformed(detail: string): JsonReply {
  return bedrockError(
    400,
    'ValidationException',
    `Malformed input request: ${detail}, please reformat your input and try again.`,
  );
}

function invalidInvokeBody(body: Record<string, unknown> | undefined): JsonReply | undefined {
  if (!body) return malformed('#: expected type: JSONObject, found: Null');
  const missing = ['anthropic_version', 'max_tokens', 'messages'].filter((k) => body[k] === undefined);
  if (missing.length > 0) return malformed(missing.map((k) => `#: required key [${k}] not found`).join(', '));
  for (const k of ['model', 'stream']) {
    if (body[k] !== undefined) return malformed(`#: extraneous key [${k}] is not permitted`);
  }
  if (body.anthropic_version !== BEDROCK_ANTHROPIC_VERSION)
    return bedrockError(400, 'ValidationException', 'Invalid API version');
  if (!Array.isArray(body.messages)) return malformed('#/messages: expected type: JSONArray');
  if (asNumber(body.max_tokens) === undefined) return malformed('#/max_tokens: expected type: Integer');
  const beta = body.anthropic_beta;
  if (beta !== undefined && !(Array.isArray(beta) && beta.every((b) => typeof b === 'string')))
    return malformed('#/anthropic_beta: expected type: JSONArray');
  return undefined;
}

function latencies(knobs: Knobs, frames: number): { first: number; total: number } {
  const first = knobs.latencyMs;
  return { first, total: first + Math.max(0, frames - 1) * knobs.chunkDelayMs };
}

function streamErrorFrame(headers: IncomingHttpHeaders): Buffer {
  const named = header(headers, 'x-sim-stream-exception');
  const type = named !== undefined && STREAM_EXCEPTIONS.has(named) ? named : 'modelStreamErrorException';
  const payload =
    type === 'modelStreamErrorException'
      ? { message: 'Simulated model stream error.', originalStatusCode: 500, originalMessage: 'Overloaded' }
      : { message: `Simulated ${type}.` };
  return exceptionFrame(type, payload);
}

const THROTTLE_FRAME = exceptionFrame('throttlingException', {
  message: 'Simulated throttling: too many tokens, please wait before trying again.',
});

function streamHeaders(): Record<string, string> {
  return { 'x-amzn-requestid': randomUUID(), 'x-amzn-bedrock-content-type': 'application/json' };
}

function invokeModel(req: SimRequest, stream: boolean): SimReply {
  const modelId = req.params.model!;
  if (!isAnthropicModel(modelId))
    return bedrockError(
      400,
      'ValidationException',
      `The simulator serves InvokeModel for Anthropic models only; use Converse for ${modelId}.`,
    );
  const body = req.json;
  const invalid = invalidInvokeBody(body);
  if (invalid !== undefined || !body) return invalid!;
  const { knobs } = req;
  const turn = anthropicTurn(body, knobs, anthropicName(modelId));
  const inputTokens = turn.conv.inputTokens - turn.cacheRead - turn.cacheWrite;
  if (!stream) {
    const { total } = latencies(knobs, 1);
    const headers: Record<string, string> = { 'x-amzn-requestid': randomUUID() };
    if (!knobs.noUsage) {
      headers['x-amzn-bedrock-input-token-count'] = String(inputTokens);
      headers['x-amzn-bedrock-output-token-count'] = String(turn.plan.outputTokens);
      headers['x-amzn-bedrock-cache-read-input-token-count'] = String(turn.cacheRead);
      headers['x-amzn-bedrock-cache-write-input-token-count'] = String(turn.cacheWrite);
      headers['x-amzn-bedrock-invocation-latency'] = String(total);
    }
    return { kind: 'json', status: 200, body: JSON.stringify(anthropicMessage(turn)), headers };
  }
  const events = anthropicStreamEvents(turn, knobs).filter((e) => e.type !== 'ping');
  const { first, total } = latencies(knobs, events.length);
  const last = events[events.length - 1]!;
  if (!knobs.noUsage)
    last['amazon-bedrock-invocationMetrics'] = {
      inputTokenCount: inputTokens,
      outputTokenCount: turn.plan.outputTokens,
      invocationLatency: total,
      firstByteLatency: first,
      cacheReadInputTokenCount: turn.cacheRead,
      cacheWriteInputTokenCount: turn.cacheWrite,
    };
  return {
    kind: 'stream',
    contentType: EVENTSTREAM,
    frames: events.map((e) =>
      eventFrame('chunk', { bytes: Buffer.from(JSON.stringify(e), 'utf8').toString('base64') }),
    ),
    errorFrame: streamErrorFrame(req.headers),
    throttleFrame: THROTTLE_FRAME,
    headers: streamHeaders(),
  };
}

// --- Converse -------------------------------------------------------------------------------------

function converseContent(block: unknown): unknown {
  const b = asObject(block);
  if (!b) return undefined;
  if (typeof b.text === 'string') return { type: 'text', text: b.text };
  const use = asObject(b.toolUse);
  if (use) return { type: 'tool_use', id: use.toolUseId, name: use.name, input: use.input ?? {} };
  const result = asObject(b.toolResult);
  if (result) {
    const content = asArray(result.content).map((c) => {
      const o = asObject(c);
      return { type: 'text', text: typeof o?.text === 'string' ? o.text : JSON.stringify(o?.json ?? null) };
    });
    return {
      type: 'tool_result',
      tool_use_id: result.toolUseId,
      content,
      is_error: result.status === 'error',
    };
  }
  const reasoning = asObject(asObject(b.reasoningContent)?.reasoningText);
  if (reasoning)
    return { type: 'thinking', thinking: reasoning.text ?? '', signature: reasoning.signature ?? '' };
  if (b.image !== undefined) return { type: 'image' };
  if (b.document !== undefined) return { type: 'document' };
  return undefined;
}

/** The Messages body a Converse request amounts to (what Bedrock sends a Claude model). */
export function converseToMessages(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const system = asArray(body.system)
    .map((s) => asString(asObject(s)?.text))
    .filter((t): t is string => t !== undefined)
    .map((text) => ({ type: 'text', text }));
  if (system.length > 0) out.system = system;
  out.messages = asArray(body.messages).map((m) => {
    const msg = asObject(m);
    return {
      role: msg?.role,
      content: asArray(msg?.content)
        .map(converseContent)
        .filter((c) => c !== undefined),
    };
  });
  const config = asObject(body.inferenceConfig);
  out.max_tokens = asNumber(config?.maxTokens) ?? 4096;
  const toolConfig = asObject(body.toolConfig);
  const tools = asArray(toolConfig?.tools)
    .map((t) => asObject(asObject(t)?.toolSpec))
    .filter((s) => s !== undefined)
    .map((s) => ({
      name: s.name,
      description: s.description,
      input_schema: asObject(s.inputSchema)?.json ?? {},
    }));
  if (tools.length > 0) out.tools = tools;
  const choice = asObject(toolConfig?.toolChoice);
  if (choice?.any !== undefined) out.tool_choice = { type: 'any' };
  else if (asObject(choice?.tool)) out.tool_choice = { type: 'tool', name: asObject(choice?.tool)?.name };
  else if (choice?.auto !== undefined) out.tool_choice = { type: 'auto' };
  const extra = asObject(body.additionalModelRequestFields);
  if (extra?.thinking !== undefined) out.thinking = extra.thinking;
  const format = asObject(asObject(body.outputConfig)?.textFormat);
  const schemaText = asString(asObject(asObject(format?.structure)?.jsonSchema)?.schema);
  if (format?.type === 'json_schema' && schemaText !== undefined) {
    try {
      out.output_config = { format: { type: 'json_schema', schema: JSON.parse(schemaText) } };
    } catch {
      // an unparsable schema answers as plain text
    }
  }
  return out;
}

function invalidConverseBody(body: Record<string, unknown> | undefined): JsonReply | undefined {
  if (!body || !Array.isArray(body.messages) || body.messages.length === 0)
    return bedrockError(
      400,
      'ValidationException',
      'The model returned the following errors: messages: at least one message is required',
    );
  if (asObject(body.messages[0])?.role !== 'user')
    return bedrockError(
      400,
      'ValidationException',
      'A conversation must start with a user message. Try again with a conversation that starts with a user message.',
    );
  const max = asObject(body.inferenceConfig)?.maxTokens;
  if (max !== undefined && !(typeof max === 'number' && max >= 1))
    return bedrockError(
      400,
      'ValidationException',
      "1 validation error detected: Value at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1",
    );
  return undefined;
}

function converseUsage(turn: AnthropicTurn): Record<string, number> {
  const input = turn.conv.inputTokens - turn.cacheRead - turn.cacheWrite;
  const output = turn.plan.outputTokens;
  return {
    inputTokens: input,
    outputTokens: output,
    totalTokens: input + output + turn.cacheRead + turn.cacheWrite,
    cacheReadInputTokens: turn.cacheRead,
    cacheWriteInputTokens: turn.cacheWrite,
  };
}

function converse(req: SimRequest, stream: boolean): SimReply {
  const body = req.json;
  const invalid = invalidConverseBody(body);
  if (invalid !== undefined || !body) return invalid!;
  const { knobs } = req;
  const turn = anthropicTurn(converseToMessages(body), knobs, baseModelId(req.params.model!));
  const p = turn.plan;
  if (!stream) {
    const content: unknown[] = [];
    if (p.thinking !== undefined)
      content.push({ reasoningContent: { reasoningText: { text: p.thinking, signature: 'sim-signature' } } });
    content.push({ text: p.text });
    p.tools.forEach((tool, i) => {
      content.push({ toolUse: { toolUseId: turn.toolIds[i], name: tool.name, input: tool.args } });
    });
    return {
      kind: 'json',
      status: 200,
      body: JSON.stringify({
        output: { message: { role: 'assistant', content } },
        stopReason: p.stopReason,
        usage: knobs.noUsage ? undefined : converseUsage(turn),
        metrics: { latencyMs: latencies(knobs, 1).total },
      }),
      headers: { 'x-amzn-requestid': randomUUID() },
    };
  }
  const frames: Buffer[] = [eventFrame('messageStart', { role: 'assistant' })];
  let index = 0;
  if (p.thinking !== undefined) {
    for (const piece of splitPieces(p.thinking, 2))
      frames.push(
        eventFrame('contentBlockDelta', {
          contentBlockIndex: index,
          delta: { reasoningContent: { text: piece } },
        }),
      );
    frames.push(
      eventFrame('contentBlockDelta', {
        contentBlockIndex: index,
        delta: { reasoningContent: { signature: 'sim-signature' } },
      }),
    );
    frames.push(eventFrame('contentBlockStop', { contentBlockIndex: index }));
    index++;
  }
  const pieces = p.tools.length > 0 ? splitPieces(p.text, 2) : splitPieces(p.text, knobs.chunks);
  for (const piece of pieces)
    frames.push(eventFrame('contentBlockDelta', { contentBlockIndex: index, delta: { text: piece } }));
  frames.push(eventFrame('contentBlockStop', { contentBlockIndex: index }));
  p.tools.forEach((tool, i) => {
    index++;
    frames.push(
      eventFrame('contentBlockStart', {
        contentBlockIndex: index,
        start: { toolUse: { toolUseId: turn.toolIds[i], name: tool.name } },
      }),
    );
    for (const frag of splitPieces(tool.argsJson, Math.max(2, Math.min(knobs.chunks, 6))))
      frames.push(
        eventFrame('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: frag } } }),
      );
    frames.push(eventFrame('contentBlockStop', { contentBlockIndex: index }));
  });
  frames.push(eventFrame('messageStop', { stopReason: p.stopReason }));
  if (!knobs.noUsage)
    frames.push(
      eventFrame('metadata', {
        usage: converseUsage(turn),
        metrics: { latencyMs: latencies(knobs, frames.length + 1).total },
      }),
    );
  return {
    kind: 'stream',
    contentType: EVENTSTREAM,
    frames,
    errorFrame: streamErrorFrame(req.headers),
    throttleFrame: THROTTLE_FRAME,
    headers: streamHeaders(),
  };
}

function countTokens(req: SimRequest): SimReply {
  const input = asObject(req.json?.input);
  const invoke = asObject(input?.invokeModel);
  const conv = asObject(input?.converse);
  let messagesBody: Record<string, unknown> | undefined;
  if (invoke !== undefined) {
    try {
      const raw = asString(invoke.body) ?? '';
      messagesBody = asObject(JSON.parse(Buffer.from(raw, 'base64').toString('utf8')));
    } catch {
      messagesBody = undefined;
    }
    if (!messagesBody || !Array.isArray(messagesBody.messages))
      return malformed('#: required key [messages] not found');
  } else if (conv !== undefined) {
    messagesBody = converseToMessages({
      messages: conv.messages ?? [],
      system: conv.system,
      toolConfig: conv.toolConfig,
      additionalModelRequestFields: conv.additionalModelRequestFields,
    });
  } else {
    return bedrockError(
      400,
      'ValidationException',
      "1 validation error detected: Value null at 'input' failed to satisfy constraint: Member must not be null",
    );
  }
  return {
    kind: 'json',
    status: 200,
    body: JSON.stringify({ inputTokens: anthropicInputTokens(messagesBody) }),
    headers: { 'x-amzn-requestid': randomUUID() },
  };
}

export const BEDROCK_PATH =
  /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream|converse|converse-stream|count-tokens)$/;

export const bedrockOperations: Record<string, RouteHandler> = {
  invoke: (req) => invokeModel(req, false),
  'invoke-with-response-stream': (req) => invokeModel(req, true),
  converse: (req) => converse(req, false),
  'converse-stream': (req) => converse(req, true),
  'count-tokens': countTokens,
};
