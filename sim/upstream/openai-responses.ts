// OpenAI Responses API: POST /v1/responses (plain and streamed) and POST /v1/responses/input_tokens.

import { badRequest, type Conversation, decide, json, responsesUsage, SSE } from './openai-common.ts';
import { openaiImagePartTokens, openaiToolTokens } from './prompt-rules.ts';
import { responsesJsonRequest } from './structured.ts';
import {
  asArray,
  asNumber,
  asObject,
  asString,
  contentText,
  nextId,
  nowSeconds,
  splitPieces,
  tokens,
} from './text.ts';
import { framesBeforeCut, type SimReply, type SimRequest } from './types.ts';

// ---------------------------------------------------------------- responses

// The model reads a Responses input as the same chat it reads a chat request as, so it is counted as
// that chat by the same recipe (readChatMessages): 3 per message plus its role and text (instructions are
// a developer message); function calls join the assistant message before them (one is opened when there
// is none), 3 each around the name and arguments; a function call output is a `tool` message; 3 prime
// the reply. The same conversation costs the same through either API.
function readResponsesInput(input: unknown, instructions: string | undefined): Conversation {
  const REPLY_PRIMING = 3;
  let promptTokens = REPLY_PRIMING + (instructions ? 3 + tokens('developer') + tokens(instructions) : 0);
  if (typeof input === 'string') {
    promptTokens += 3 + tokens('user') + tokens(input);
    return { userText: input, lastIsUser: true, promptTokens };
  }
  let userText = '';
  let lastIsUser = false;
  let lastRole: string | undefined;
  for (const item of asArray(input)) {
    const o = asObject(item);
    if (o?.type === 'function_call') {
      if (lastRole !== 'assistant') promptTokens += 3 + tokens('assistant');
      promptTokens += 3 + tokens(asString(o.name) ?? '') + tokens(asString(o.arguments) ?? '');
      lastRole = 'assistant';
      lastIsUser = false;
      continue;
    }
    if (o?.type === 'function_call_output') {
      const output = o.output;
      promptTokens +=
        3 + tokens('tool') + (typeof output === 'string' ? tokens(output) : tokens(contentText(output)));
      lastRole = 'tool';
      lastIsUser = false;
      continue;
    }
    const role = asString(o?.role);
    const text = contentText(o?.content);
    promptTokens +=
      3 + (role === undefined ? 0 : tokens(role)) + tokens(text) + openaiImagePartTokens(o?.content);
    if (role === 'user') userText = text;
    lastIsUser = role === 'user';
    lastRole = role;
  }
  return { userText, lastIsUser, promptTokens };
}

export function responses(req: SimRequest): SimReply {
  const body = req.json;
  if (!body || body.input === undefined) return badRequest("Missing required parameter: 'input'.");
  const model = asString(body.model) ?? 'gpt-4o-mini';
  const { knobs } = req;
  const conv = readResponsesInput(body.input, asString(body.instructions));
  const toolNames: string[] = [];
  for (const t of asArray(body.tools)) {
    const name = asString(asObject(t)?.name);
    if (name !== undefined) toolNames.push(name);
  }
  if (toolNames.length > 0) conv.promptTokens += openaiToolTokens(body.tools, model);
  const d = decide(conv, knobs, toolNames, body.tool_choice, asNumber(body.max_output_tokens), {
    json: responsesJsonRequest(body),
    reasoning: asObject(body.reasoning)?.effort !== undefined,
    parallel: body.parallel_tool_calls !== false,
  });
  const reasoningTokens = d.reasoning === undefined ? 0 : tokens(d.reasoning);
  const usage = knobs.noUsage
    ? null
    : responsesUsage(conv.promptTokens, d.outputTokens, knobs, reasoningTokens);
  const reasoningId = nextId('rs_');
  const reasoningItem =
    d.reasoning === undefined
      ? undefined
      : { id: reasoningId, type: 'reasoning', summary: [{ type: 'summary_text', text: d.reasoning }] };
  /** The output index of the answer item: after the reasoning item when there is one. */
  const at = reasoningItem === undefined ? 0 : 1;
  const id = nextId('resp_');
  const itemId = d.tool ? nextId('fc_') : nextId('msg_');
  const callId = d.tool ? nextId('call_') : '';
  const base = {
    id,
    object: 'response',
    created_at: nowSeconds(),
    status: 'in_progress',
    error: null,
    incomplete_details: null,
    instructions: asString(body.instructions) ?? null,
    max_output_tokens: asNumber(body.max_output_tokens) ?? null,
    model,
    output: [] as unknown[],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: 1,
    truncation: 'disabled',
    usage: null as unknown,
    metadata: {},
  };
  const callItems = d.tools.map((tool, i) => ({
    id: i === 0 ? itemId : nextId('fc_'),
    type: 'function_call',
    status: 'completed',
    arguments: tool.argsJson,
    call_id: i === 0 ? callId : nextId('call_'),
    name: tool.name,
  }));
  const doneItem = d.tool
    ? callItems[0]!
    : {
        id: itemId,
        type: 'message',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', annotations: [], logprobs: [], text: d.text }],
      };
  const incomplete = d.finish === 'length';
  const completed = {
    ...base,
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output: [...(reasoningItem === undefined ? [] : [reasoningItem]), ...(d.tool ? callItems : [doneItem])],
    usage,
  };
  if (body.stream !== true) return json(completed);

  let seq = 0;
  const frames: string[] = [];
  const emit = (type: string, fields: Record<string, unknown>): void => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
  };
  emit('response.created', { response: base });
  emit('response.in_progress', { response: base });
  if (reasoningItem !== undefined && d.reasoning !== undefined) {
    const item = { item_id: reasoningId, output_index: 0, summary_index: 0 };
    emit('response.output_item.added', {
      output_index: 0,
      item: { id: reasoningId, type: 'reasoning', summary: [] },
    });
    emit('response.reasoning_summary_part.added', { ...item, part: { type: 'summary_text', text: '' } });
    for (const piece of splitPieces(d.reasoning, 2))
      emit('response.reasoning_summary_text.delta', { ...item, delta: piece });
    emit('response.reasoning_summary_text.done', { ...item, text: d.reasoning });
    emit('response.reasoning_summary_part.done', {
      ...item,
      part: { type: 'summary_text', text: d.reasoning },
    });
    emit('response.output_item.done', { output_index: 0, item: reasoningItem });
  }
  if (d.tool) {
    callItems.forEach((item, i) => {
      const index = at + i;
      emit('response.output_item.added', {
        output_index: index,
        item: { ...item, status: 'in_progress', arguments: '' },
      });
      for (const frag of splitPieces(item.arguments, Math.max(2, Math.min(knobs.chunks, 6)))) {
        emit('response.function_call_arguments.delta', {
          item_id: item.id,
          output_index: index,
          delta: frag,
        });
      }
      emit('response.function_call_arguments.done', {
        item_id: item.id,
        output_index: index,
        arguments: item.arguments,
      });
      emit('response.output_item.done', { output_index: index, item });
    });
  } else {
    emit('response.output_item.added', {
      output_index: at,
      item: { id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
    });
    const part = { type: 'output_text', annotations: [], logprobs: [], text: '' };
    emit('response.content_part.added', { item_id: itemId, output_index: at, content_index: 0, part });
    for (const piece of splitPieces(d.text, knobs.chunks)) {
      emit('response.output_text.delta', {
        item_id: itemId,
        output_index: at,
        content_index: 0,
        delta: piece,
        logprobs: [],
      });
    }
    emit('response.output_text.done', {
      item_id: itemId,
      output_index: at,
      content_index: 0,
      text: d.text,
      logprobs: [],
    });
    emit('response.content_part.done', {
      item_id: itemId,
      output_index: at,
      content_index: 0,
      part: { ...part, text: d.text },
    });
    emit('response.output_item.done', { output_index: at, item: doneItem });
  }
  emit(incomplete ? 'response.incomplete' : 'response.completed', { response: completed });
  // Numbered after the frames a midstream failure sends, as the real stream numbers its error event.
  const errorFrame = `event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: framesBeforeCut(frames.length), code: 'server_error', message: 'The server had an error while processing your request.', param: null })}\n\n`;
  return { kind: 'stream', contentType: SSE, frames, errorFrame };
}

/** POST /v1/responses/input_tokens: the prompt tokens a Responses body would cost. */
export function responsesInputTokens(req: SimRequest): SimReply {
  const body = req.json ?? {};
  const conv = readResponsesInput(body.input ?? '', asString(body.instructions));
  const tools = openaiToolTokens(body.tools, asString(body.model) ?? '');
  return json({ object: 'response.input_tokens', input_tokens: conv.promptTokens + tools });
}
