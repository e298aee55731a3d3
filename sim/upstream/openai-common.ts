// The OpenAI dialect shared by its endpoints: error bodies, usage objects, and the decision of what
// the simulated model answers (text, tool calls, reasoning, structured output).

import type { IncomingHttpHeaders } from 'node:http';
import { chatToolCallTokens, openaiImagePartTokens } from './prompt-rules.ts';
import { type JsonRequest, structuredText } from './structured.ts';
import {
  asObject,
  asString,
  contentText,
  nextId,
  reasoningText,
  replyText,
  type ToolCallPlan,
  tokens,
  toolCallsFor,
  truncateToTokens,
  wantsTool,
} from './text.ts';
import type { Dialect, JsonReply, Knobs } from './types.ts';

export const SSE = 'text/event-stream; charset=utf-8';
export const FINGERPRINT = 'fp_sim';

const ERROR_KINDS: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
  503: { type: 'server_error', code: null },
};

export function openaiErrorBody(status: number, message: string): string {
  const kind = ERROR_KINDS[status] ?? {
    type: status >= 500 ? 'server_error' : 'invalid_request_error',
    code: null,
  };
  return JSON.stringify({ error: { message, type: kind.type, param: null, code: kind.code } });
}

export const openaiDialect: Dialect = {
  name: 'openai',
  errorReply(status: number, message: string): JsonReply {
    return {
      kind: 'json',
      status,
      body: openaiErrorBody(status, message),
      headers: { 'x-request-id': nextId('req_') },
    };
  },
  hasAuth(headers: IncomingHttpHeaders): boolean {
    return (headers.authorization ?? '').length > 7;
  },
};

export const MIDSTREAM_ERROR = `data: ${openaiErrorBody(500, 'The server had an error while processing your request. Sorry about that!')}\n\n`;

export function json(body: unknown, headers?: Record<string, string>): JsonReply {
  return { kind: 'json', status: 200, body: JSON.stringify(body), headers };
}

export function badRequest(message: string): JsonReply {
  return openaiDialect.errorReply(400, message);
}

export function chatUsage(prompt: number, completion: number, knobs: Knobs, reasoning = 0) {
  const output = completion + knobs.reasoningTokens + reasoning;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: { cached_tokens: Math.min(knobs.cachedTokens, prompt), audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: knobs.reasoningTokens + reasoning,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

export function responsesUsage(input: number, output: number, knobs: Knobs, reasoning = 0) {
  const out = output + knobs.reasoningTokens + reasoning;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: Math.min(knobs.cachedTokens, input) },
    output_tokens: out,
    output_tokens_details: { reasoning_tokens: knobs.reasoningTokens + reasoning },
    total_tokens: input + out,
  };
}

/** Name of the tool to call: get_weather when offered, else the first one. */
export function pickTool(names: string[]): string | undefined {
  return names.includes('get_weather') ? 'get_weather' : names[0];
}

export interface Conversation {
  userText: string;
  lastIsUser: boolean;
  promptTokens: number;
}

/** Reads chat messages: last user text and an input token count with the per-message overhead. */
export function readChatMessages(messages: unknown[]): Conversation {
  let promptTokens = 3; // reply priming, as in OpenAI's own counting recipe
  let userText = '';
  let lastRole = '';
  for (const m of messages) {
    const msg = asObject(m);
    const role = asString(msg?.role) ?? '';
    const text = contentText(msg?.content);
    // OpenAI's recipe: 3 per message, its role, content and name (and 1 more for a name).
    promptTokens +=
      3 +
      tokens(role) +
      tokens(text) +
      openaiImagePartTokens(msg?.content) +
      chatToolCallTokens(msg?.tool_calls);
    const name = asString(msg?.name);
    if (name !== undefined) promptTokens += 1 + tokens(name);
    if (role === 'user') userText = text;
    lastRole = role;
  }
  return { userText, lastIsUser: lastRole === 'user', promptTokens };
}

export interface Decision {
  text: string;
  finish: 'stop' | 'length';
  /** The first of `tools` (the Responses reply makes one call). */
  tool: ToolCallPlan | undefined;
  tools: ToolCallPlan[];
  /** Visible reasoning, when the request asked for an effort; its tokens are not in outputTokens. */
  reasoning: string | undefined;
  outputTokens: number;
}

/** What a request asks of the reply besides its text. */
export interface Asks {
  json?: JsonRequest;
  reasoning?: boolean;
  parallel?: boolean;
}

export function decide(
  conv: Conversation,
  knobs: Knobs,
  toolNames: string[],
  toolChoice: unknown,
  maxTokens: number | undefined,
  asks: Asks = {},
): Decision {
  const reasoning = asks.reasoning === true ? reasoningText(conv.userText) : undefined;
  const choice = asObject(toolChoice);
  const forcedName = asString(asObject(choice?.function)?.name) ?? asString(choice?.name);
  const toolName = forcedName ?? pickTool(toolNames);
  const useTool = wantsTool({
    toolName,
    lastIsUser: conv.lastIsUser,
    userText: conv.userText,
    knobs,
    forced: toolChoice === 'required' || forcedName !== undefined,
    disabled: toolChoice === 'none',
  });
  if (useTool && toolName !== undefined) {
    const tools = toolCallsFor(toolName, conv.userText, asks.parallel !== false);
    const outputTokens = tools.reduce((n, t) => n + tokens(t.name) + tokens(t.argsJson) + 7, 0);
    return { text: '', finish: 'stop', tool: tools[0], tools, reasoning, outputTokens };
  }
  const full = structuredText(asks.json, conv.userText) ?? replyText(conv.userText, knobs);
  const cut = maxTokens !== undefined ? truncateToTokens(full, maxTokens) : { text: full, truncated: false };
  return {
    text: cut.text,
    finish: cut.truncated ? 'length' : 'stop',
    tool: undefined,
    tools: [],
    reasoning,
    outputTokens: tokens(cut.text),
  };
}
