// Anthropic Messages wire format: POST /v1/messages (plain and streamed) and count_tokens.

import type { IncomingHttpHeaders } from 'node:http';
import { anthropicContentTokens, anthropicToolTokens } from './prompt-rules.ts';
import { anthropicJsonRequest, structuredText } from './structured.ts';
import {
  asArray,
  asNumber,
  asObject,
  asString,
  contentText,
  nextId,
  reasoningText,
  replyText,
  splitPieces,
  type ToolCallPlan,
  tokens,
  toolCallsFor,
  truncateToTokens,
  wantsTool,
} from './text.ts';
import type { Dialect, JsonReply, Knobs, RouteHandler, SimReply, SimRequest } from './types.ts';

const SSE = 'text/event-stream; charset=utf-8';

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
  529: 'overloaded_error',
};

function errorBody(status: number, message: string): string {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return JSON.stringify({ type: 'error', error: { type, message } });
}

export const anthropicDialect: Dialect = {
  name: 'anthropic',
  errorReply(status: number, message: string): JsonReply {
    return {
      kind: 'json',
      status,
      body: errorBody(status, message),
      headers: { 'request-id': nextId('req_') },
    };
  },
  hasAuth(headers: IncomingHttpHeaders): boolean {
    return (headers['x-api-key'] ?? '').length > 0 || (headers.authorization ?? '').length > 7;
  },
};

const MIDSTREAM_ERROR = `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })}\n\n`;
const MIDSTREAM_THROTTLE = `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'Simulated rate limit: this request would exceed the rate limit for your organization.' } })}\n\n`;

export interface Conversation {
  userText: string;
  lastIsUser: boolean;
  inputTokens: number;
}

function hasToolResult(content: unknown): boolean {
  return asArray(content).some((b) => asObject(b)?.type === 'tool_result');
}

function readMessages(body: Record<string, unknown>): Conversation {
  const model = asString(body.model) ?? '';
  const system = body.system;
  let inputTokens = system === undefined ? 0 : tokens(contentText(system)) + 3;
  let userText = '';
  let lastIsUser = false;
  for (const m of asArray(body.messages)) {
    const msg = asObject(m);
    const role = asString(msg?.role);
    const text = contentText(msg?.content);
    inputTokens += 4 + anthropicContentTokens(msg?.content);
    const isUserTurn = role === 'user' && !hasToolResult(msg?.content);
    if (isUserTurn) userText = text;
    lastIsUser = isUserTurn;
  }
  inputTokens += anthropicToolTokens(body, model);
  return { userText, lastIsUser, inputTokens: Math.max(1, inputTokens) };
}

export interface Plan {
  text: string;
  tools: ToolCallPlan[];
  /** Extended thinking, when the request enabled it. */
  thinking: string | undefined;
  stopReason: 'end_turn' | 'max_tokens' | 'tool_use';
  outputTokens: number;
}

const TOOL_PREAMBLE = "I'll check the weather for you.";
/** Stands in for the real API's signature of a thinking block (opaque to clients). */
const SIGNATURE = 'sim-signature';

function plan(body: Record<string, unknown>, conv: Conversation, knobs: Knobs): Plan {
  const names = asArray(body.tools)
    .map((t) => asString(asObject(t)?.name))
    .filter((n): n is string => n !== undefined);
  const choice = asObject(body.tool_choice);
  const forcedName = choice?.type === 'tool' ? asString(choice.name) : undefined;
  const toolName = forcedName ?? (names.includes('get_weather') ? 'get_weather' : names[0]);
  const useTool = wantsTool({
    toolName,
    lastIsUser: conv.lastIsUser,
    userText: conv.userText,
    knobs,
    forced: choice?.type === 'any' || forcedName !== undefined,
    disabled: choice?.type === 'none',
  });
  const thinkingType = asString(asObject(body.thinking)?.type);
  const thinking =
    thinkingType === 'enabled' || thinkingType === 'adaptive' ? reasoningText(conv.userText) : undefined;
  const thinkingTokens = thinking === undefined ? 0 : tokens(thinking);
  if (useTool && toolName !== undefined) {
    const tools = toolCallsFor(toolName, conv.userText, choice?.disable_parallel_tool_use !== true);
    return {
      text: TOOL_PREAMBLE,
      tools,
      thinking,
      stopReason: 'tool_use',
      outputTokens:
        tokens(TOOL_PREAMBLE) + tools.reduce((n, t) => n + tokens(t.argsJson) + 20, 0) + thinkingTokens,
    };
  }
  const full = structuredText(anthropicJsonRequest(body), conv.userText) ?? replyText(conv.userText, knobs);
  const maxTokens = asNumber(body.max_tokens);
  const cut = maxTokens !== undefined ? truncateToTokens(full, maxTokens) : { text: full, truncated: false };
  return {
    text: cut.text,
    tools: [],
    thinking,
    stopReason: cut.truncated ? 'max_tokens' : 'end_turn',
    outputTokens: Math.max(1, tokens(cut.text)) + thinkingTokens,
  };
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** One simulated Messages turn, shared by /v1/messages, Bedrock InvokeModel and Vertex rawPredict. */
export interface AnthropicTurn {
  id: string;
  model: string;
  conv: Conversation;
  plan: Plan;
  toolIds: string[];
  /** Anthropic `usage` (undefined with the no-usage knob). */
  usage: Record<string, unknown> | undefined;
  cacheRead: number;
  cacheWrite: number;
  content: unknown[];
}

/** Why a Messages body cannot be answered (the API's message), or undefined. */
export function invalidMessagesBody(body: Record<string, unknown> | undefined): string | undefined {
  if (!body || !Array.isArray(body.messages)) return 'messages: Field required';
  if (asNumber(body.max_tokens) === undefined) return 'max_tokens: Field required';
  return undefined;
}

export function anthropicTurn(body: Record<string, unknown>, knobs: Knobs, model: string): AnthropicTurn {
  const conv = readMessages(body);
  const p = plan(body, conv, knobs);
  const cacheRead = Math.min(knobs.cachedTokens, conv.inputTokens);
  const cacheWrite = Math.min(knobs.cacheWriteTokens, conv.inputTokens - cacheRead);
  // Anthropic reports cached input separately: input_tokens excludes cache reads and writes.
  const usage = knobs.noUsage
    ? undefined
    : {
        input_tokens: conv.inputTokens - cacheRead - cacheWrite,
        cache_creation_input_tokens: cacheWrite,
        cache_read_input_tokens: cacheRead,
        output_tokens: p.outputTokens,
        ...(p.thinking === undefined
          ? {}
          : { output_tokens_details: { thinking_tokens: tokens(p.thinking) } }),
        service_tier: 'standard',
      };
  const toolIds = p.tools.map(() => nextId('toolu_01'));
  const content: unknown[] = [];
  if (p.thinking !== undefined)
    content.push({ type: 'thinking', thinking: p.thinking, signature: SIGNATURE });
  content.push({ type: 'text', text: p.text });
  p.tools.forEach((tool, i) => {
    content.push({ type: 'tool_use', id: toolIds[i], name: tool.name, input: tool.args });
  });
  return { id: nextId('msg_01'), model, conv, plan: p, toolIds, usage, cacheRead, cacheWrite, content };
}

export function anthropicMessage(turn: AnthropicTurn): Record<string, unknown> {
  return {
    id: turn.id,
    type: 'message',
    role: 'assistant',
    model: turn.model,
    content: turn.content,
    stop_reason: turn.plan.stopReason,
    stop_sequence: null,
    usage: turn.usage,
  };
}

/** The stream events of a turn, in order (`ping` included, as the API sends it). */
export function anthropicStreamEvents(turn: AnthropicTurn, knobs: Knobs): Record<string, unknown>[] {
  const { plan: p, usage } = turn;
  const events: Record<string, unknown>[] = [];
  events.push({
    type: 'message_start',
    message: {
      id: turn.id,
      type: 'message',
      role: 'assistant',
      model: turn.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: usage ? { ...usage, output_tokens: 1 } : undefined,
    },
  });
  let index = 0;
  const delta = (d: unknown) => ({ type: 'content_block_delta', index, delta: d });
  if (p.thinking !== undefined) {
    events.push({
      type: 'content_block_start',
      index,
      content_block: { type: 'thinking', thinking: '', signature: '' },
    });
    for (const piece of splitPieces(p.thinking, 2))
      events.push(delta({ type: 'thinking_delta', thinking: piece }));
    events.push(delta({ type: 'signature_delta', signature: SIGNATURE }));
    events.push({ type: 'content_block_stop', index });
    index++;
  }
  events.push({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
  events.push({ type: 'ping' });
  const pieces = p.tools.length > 0 ? splitPieces(p.text, 2) : splitPieces(p.text, knobs.chunks);
  for (const piece of pieces) events.push(delta({ type: 'text_delta', text: piece }));
  events.push({ type: 'content_block_stop', index });
  p.tools.forEach((tool, i) => {
    index++;
    events.push({
      type: 'content_block_start',
      index,
      content_block: { type: 'tool_use', id: turn.toolIds[i], name: tool.name, input: {} },
    });
    // The real API opens with an empty partial_json before the fragments.
    events.push(delta({ type: 'input_json_delta', partial_json: '' }));
    for (const frag of splitPieces(tool.argsJson, Math.max(2, Math.min(knobs.chunks, 6)))) {
      events.push(delta({ type: 'input_json_delta', partial_json: frag }));
    }
    events.push({ type: 'content_block_stop', index });
  });
  events.push({
    type: 'message_delta',
    delta: { stop_reason: p.stopReason, stop_sequence: null },
    usage: usage
      ? {
          output_tokens: p.outputTokens,
          ...(p.thinking === undefined
            ? {}
            : { output_tokens_details: { thinking_tokens: tokens(p.thinking) } }),
        }
      : undefined,
  });
  events.push({ type: 'message_stop' });
  return events;
}

/** Messages reply (JSON, or SSE when `stream`) for an already validated body. */
export function anthropicReply(turn: AnthropicTurn, stream: boolean, knobs: Knobs): SimReply {
  if (!stream) {
    return {
      kind: 'json',
      status: 200,
      body: JSON.stringify(anthropicMessage(turn)),
      headers: { 'request-id': nextId('req_') },
    };
  }
  return {
    kind: 'stream',
    contentType: SSE,
    frames: anthropicStreamEvents(turn, knobs).map((e) => sse(e.type as string, e)),
    errorFrame: MIDSTREAM_ERROR,
    throttleFrame: MIDSTREAM_THROTTLE,
    headers: { 'request-id': nextId('req_') },
  };
}

function messages(req: SimRequest): SimReply {
  const body = req.json;
  const invalid = invalidMessagesBody(body);
  if (invalid !== undefined || !body) return anthropicDialect.errorReply(400, invalid ?? '');
  const turn = anthropicTurn(body, req.knobs, asString(body.model) ?? 'claude-sonnet-4-5');
  return anthropicReply(turn, body.stream === true, req.knobs);
}

/** Input tokens of a Messages body, as count_tokens answers. */
export function anthropicInputTokens(body: Record<string, unknown>): number {
  return readMessages(body).inputTokens;
}

function countTokens(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || !Array.isArray(body.messages))
    return anthropicDialect.errorReply(400, 'messages: Field required');
  return {
    kind: 'json',
    status: 200,
    body: JSON.stringify({ input_tokens: readMessages(body).inputTokens }),
  };
}

export const anthropicRoutes: Record<string, RouteHandler> = {
  'POST /v1/messages': messages,
  'POST /v1/messages/count_tokens': countTokens,
};
