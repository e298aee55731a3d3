// A completion-style (chat) request as a Responses request, request side only: what OpenAI's counting
// endpoint (POST /v1/responses/input_tokens) takes, so that a count for an OpenAI-served model reaches
// the provider from any client family through the pivot (proxy/provider-count.ts). Messages become input
// items (an assistant's tool calls `function_call` items, tool messages `function_call_output`), chat's
// nested function tools become Responses' flat ones; sampling and output options, which do not change
// the input, are left out.

import type { JsonObject, JsonValue } from '../../../common/types.ts';

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function contentPart(part: JsonValue, role: string): JsonValue | undefined {
  if (typeof part === 'string')
    return { type: role === 'assistant' ? 'output_text' : 'input_text', text: part };
  if (!isObject(part)) return undefined;
  switch (part['type']) {
    case 'text':
      return { type: role === 'assistant' ? 'output_text' : 'input_text', text: part['text'] ?? '' };
    case 'image_url': {
      const image = isObject(part['image_url']) ? part['image_url'] : {};
      const out: JsonObject = { type: 'input_image', image_url: image['url'] ?? null };
      if (typeof image['detail'] === 'string') out['detail'] = image['detail'];
      return out;
    }
    case 'file': {
      const file = isObject(part['file']) ? part['file'] : {};
      return { type: 'input_file', ...file };
    }
    case 'input_audio':
      return { type: 'input_audio', input_audio: part['input_audio'] ?? null };
    default:
      return undefined;
  }
}

function content(value: JsonValue | undefined, role: string): JsonValue {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return '';
  return value.map((p) => contentPart(p, role)).filter((p): p is JsonValue => p !== undefined);
}

/** Text of a tool message's content (a string or text parts). */
function toolOutput(value: JsonValue | undefined): string {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) return '';
  return value
    .map((p) => (isObject(p) && typeof p['text'] === 'string' ? p['text'] : ''))
    .filter((t) => t !== '')
    .join('\n');
}

function inputItems(messages: JsonValue | undefined): JsonValue[] {
  const items: JsonValue[] = [];
  if (!Array.isArray(messages)) return items;
  for (const m of messages) {
    if (!isObject(m)) continue;
    const role = typeof m['role'] === 'string' ? m['role'] : 'user';
    if (role === 'tool') {
      items.push({
        type: 'function_call_output',
        call_id: m['tool_call_id'] ?? '',
        output: toolOutput(m['content']),
      });
      continue;
    }
    const body = content(m['content'], role);
    if (body !== '' && !(Array.isArray(body) && body.length === 0)) items.push({ role, content: body });
    if (role !== 'assistant' || !Array.isArray(m['tool_calls'])) continue;
    for (const call of m['tool_calls']) {
      const fn = isObject(call) && isObject(call['function']) ? call['function'] : undefined;
      if (fn === undefined) continue;
      items.push({
        type: 'function_call',
        call_id: (call as JsonObject)['id'] ?? '',
        name: fn['name'] ?? '',
        arguments: typeof fn['arguments'] === 'string' ? fn['arguments'] : '',
      });
    }
  }
  return items;
}

function tools(value: JsonValue | undefined): JsonValue[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.map((t) =>
    isObject(t) && isObject(t['function']) ? { type: 'function', ...t['function'] } : t,
  );
}

function toolChoice(value: JsonValue | undefined): JsonValue | undefined {
  if (isObject(value) && isObject(value['function']))
    return { type: 'function', name: value['function']['name'] ?? '' };
  return value;
}

/** The Responses request a chat request's input is: for counting its input tokens. */
export function chatToResponsesRequest(chat: JsonObject): JsonObject {
  const out: JsonObject = { input: inputItems(chat['messages']) };
  if (chat['model'] !== undefined) out['model'] = chat['model'];
  const fns = tools(chat['tools']);
  if (fns !== undefined && fns.length > 0) out['tools'] = fns;
  const choice = toolChoice(chat['tool_choice']);
  if (choice !== undefined) out['tool_choice'] = choice;
  if (typeof chat['reasoning_effort'] === 'string') out['reasoning'] = { effort: chat['reasoning_effort'] };
  const format = chat['response_format'];
  if (isObject(format) && format['type'] === 'json_schema' && isObject(format['json_schema'])) {
    out['text'] = { format: { type: 'json_schema', ...format['json_schema'] } };
  }
  return out;
}
