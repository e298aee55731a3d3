// The request half of responses_to_openai (hooks/families/responses/responses-to-openai.ts): a Responses
// API body -> a chat.completions body. What is refused and why: that file's header and
// docs/translation.md.

import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { asString, isObject, refuseUnknownFields } from '../../translators/json.ts';
import { TranslationError, type TranslatorInit } from '../../translators/types.ts';
import { streamWithUsage } from '../openai/request-fields.ts';

// previous_response_id and item_reference items are resolved from the gateway's stored responses before
// any rule runs (hooks/families/responses/stored.ts); one still here was not resolved.
const REFUSED_FIELDS: Readonly<Record<string, string>> = {
  previous_response_id: 'previous_response_id could not be resolved for this provider',
  conversation: 'conversation is not supported for this provider: send the whole conversation in input',
  background: 'background responses are not supported for this provider',
  prompt: 'stored prompts (prompt) are not supported for this provider',
};

function refuse(message: string, field: string): never {
  throw new TranslationError(message, field);
}

function contentText(part: JsonObject, at: string): string {
  const text = asString(part.text) ?? asString(part.refusal);
  if (text === undefined) refuse(`${at}.text must be a string`, `${at}.text`);
  return text;
}

/** Responses content parts -> chat content (a plain string when it is text only). */
function chatContent(content: JsonValue | undefined, at: string): JsonValue {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) refuse(`${at} must be a string or an array`, at);
  const parts = content.map((part, i): JsonObject => {
    const where = `${at}[${i}]`;
    if (!isObject(part)) refuse(`${where} must be an object`, where);
    switch (part.type) {
      case 'input_text':
      case 'output_text':
      case 'refusal':
        return { type: 'text', text: contentText(part, where) };
      case 'input_image': {
        const url = asString(part.image_url);
        if (url === undefined) {
          refuse(
            `${where}: only images given by image_url (a URL or a data: URL) can be sent to this provider`,
            `${where}.image_url`,
          );
        }
        const image: JsonObject = { url };
        const detail = asString(part.detail);
        if (detail !== undefined && detail !== 'auto') image.detail = detail;
        return { type: 'image_url', image_url: image };
      }
      default:
        return refuse(
          `${where}.type ${JSON.stringify(part.type)} is not supported for this provider`,
          `${where}.type`,
        );
    }
  });
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text as string).join('') : parts;
}

function toolOutput(output: JsonValue | undefined, at: string): string {
  if (typeof output === 'string') return output;
  const content = chatContent(output, at);
  if (typeof content !== 'string')
    refuse(`${at}: a function_call_output can carry text only for this provider`, at);
  return content;
}

function inputMessages(input: JsonValue | undefined): JsonObject[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input)) refuse('input must be a string or an array', 'input');
  const messages: JsonObject[] = [];
  input.forEach((item, i) => {
    const at = `input[${i}]`;
    if (!isObject(item)) refuse(`${at} must be an object`, at);
    const type = item.type ?? 'message';
    if (type === 'message') {
      const role = item.role === 'developer' ? 'system' : item.role;
      if (role !== 'user' && role !== 'assistant' && role !== 'system') {
        refuse(`${at}.role ${JSON.stringify(item.role)} is not supported`, `${at}.role`);
      }
      messages.push({ role, content: chatContent(item.content, `${at}.content`) });
    } else if (type === 'function_call') {
      const callId = asString(item.call_id);
      const name = asString(item.name);
      if (callId === undefined || name === undefined) refuse(`${at} needs a call_id and a name`, at);
      const call = {
        id: callId,
        type: 'function',
        function: { name, arguments: asString(item.arguments) ?? '{}' },
      };
      const last = messages.at(-1);
      if (last?.role === 'assistant') {
        last.tool_calls = [...(Array.isArray(last.tool_calls) ? last.tool_calls : []), call];
      } else {
        messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      }
    } else if (type === 'function_call_output') {
      const callId = asString(item.call_id);
      if (callId === undefined) refuse(`${at}.call_id must be a string`, `${at}.call_id`);
      messages.push({ role: 'tool', tool_call_id: callId, content: toolOutput(item.output, `${at}.output`) });
    } else if (type !== 'reasoning') {
      refuse(`${at}.type ${JSON.stringify(type)} is not supported for this provider`, `${at}.type`);
    }
  });
  return messages;
}

function chatTools(tools: JsonValue): JsonObject[] {
  if (!Array.isArray(tools)) refuse('tools must be an array', 'tools');
  return tools.map((tool, i) => {
    const at = `tools[${i}]`;
    if (!isObject(tool)) refuse(`${at} must be an object`, at);
    if (tool.type !== 'function') {
      refuse(
        `${at}: the hosted tool ${JSON.stringify(tool.type)} is not available for this provider`,
        `${at}.type`,
      );
    }
    const name = asString(tool.name);
    if (name === undefined) refuse(`${at}.name must be a string`, `${at}.name`);
    const fn: JsonObject = {
      name,
      parameters: isObject(tool.parameters) ? tool.parameters : { type: 'object' },
    };
    if (typeof tool.description === 'string') fn.description = tool.description;
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict;
    return { type: 'function', function: fn };
  });
}

function chatToolChoice(choice: JsonValue): JsonValue {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string') {
    return { type: 'function', function: { name: choice.name } };
  }
  return refuse(`tool_choice ${JSON.stringify(choice)} is not supported for this provider`, 'tool_choice');
}

function responseFormat(text: JsonValue): JsonObject | undefined {
  const format = isObject(text) ? text.format : undefined;
  if (!isObject(format) || format.type === 'text') return undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type === 'json_schema') {
    const schema: JsonObject = { name: asString(format.name) ?? 'response', schema: format.schema ?? {} };
    if (typeof format.strict === 'boolean') schema.strict = format.strict;
    if (typeof format.description === 'string') schema.description = format.description;
    return { type: 'json_schema', json_schema: schema };
  }
  return refuse(`text.format.type ${JSON.stringify(format.type)} is not supported`, 'text.format.type');
}

/** Fields translated below, and hints that do not change the answer (`include`, `metadata` tags, caching). */
const KNOWN_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'temperature',
  'top_p',
  'parallel_tool_calls',
  'user',
  'safety_identifier',
  'top_logprobs',
  'tools',
  'tool_choice',
  'text',
  'reasoning',
  'stream',
  'stream_options',
  'store',
  'truncation',
  'include',
  'metadata',
  'service_tier',
  'prompt_cache_key',
  ...Object.keys(REFUSED_FIELDS),
]);

export function translateRequest(body: JsonObject, init: TranslatorInit): JsonObject {
  refuseUnknownFields(
    body,
    KNOWN_FIELDS,
    (field) => new TranslationError(`${field} is not supported for this provider`, field),
  );
  if (body.truncation === 'auto') {
    refuse('truncation: "auto" is not supported for this provider; shorten the input yourself', 'truncation');
  }
  for (const [field, message] of Object.entries(REFUSED_FIELDS)) {
    if (body[field] !== undefined && body[field] !== null && body[field] !== false) refuse(message, field);
  }
  const messages: JsonObject[] = [];
  const instructions = asString(body.instructions);
  if (instructions !== undefined && instructions !== '')
    messages.push({ role: 'system', content: instructions });
  messages.push(...inputMessages(body.input));
  const out: JsonObject = { model: init.upstreamModel ?? body.model ?? null, messages };
  if (typeof body.max_output_tokens === 'number') out.max_tokens = body.max_output_tokens;
  for (const field of ['temperature', 'top_p', 'parallel_tool_calls', 'user', 'top_logprobs'] as const) {
    if (body[field] !== undefined && body[field] !== null) out[field] = body[field];
  }
  if (out.top_logprobs !== undefined) out.logprobs = true;
  const user = asString(body.safety_identifier);
  if (out.user === undefined && user !== undefined) out.user = user;
  if (body.tools !== undefined && body.tools !== null) {
    const tools = chatTools(body.tools);
    if (tools.length > 0) out.tools = tools;
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null)
    out.tool_choice = chatToolChoice(body.tool_choice);
  const format = body.text === undefined ? undefined : responseFormat(body.text);
  if (format) out.response_format = format;
  const effort = isObject(body.reasoning) ? asString(body.reasoning.effort) : undefined;
  if (effort !== undefined) out.reasoning_effort = effort;
  return streamWithUsage(out, body.stream === true);
}
