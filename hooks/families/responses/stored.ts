// Stored responses of the Responses API (hooks/families/response-state.ts): what a record holds, and
// how `previous_response_id` and `item_reference` items are resolved from it before any provider sees
// the request, so every provider (OpenAI itself included) gets a self-contained `input`.
//
// A record is `{response, input}`: the response as the client received it, and the conversation up to
// it as input items (the earlier turns and the request's own input, references resolved). So
// `previous_response_id: R` reads one record: R's input, then R's output, then the new input.
//
// Output items become input items without their `id` and `status`: an upstream that keeps state of its
// own (OpenAI) would otherwise look the ids up in its store, where items another provider made are not.
// Reasoning items without `encrypted_content` carry nothing a model can read back and are left out.

import { clip, GatewayError } from '../../../common/errors.ts';
import type { JsonObject, JsonValue, ResponsePart } from '../../../common/types.ts';
import { asString, isObject } from '../../translators/json.ts';
import type {
  ResolvedRequest,
  StoredLookup,
  StoredRecord,
  StoredResponsesSpec,
} from '../response-state-types.ts';

const MAX_ID_LENGTH = 256;

interface Record {
  readonly response: JsonObject;
  readonly input: JsonValue[];
}

function parseRecord(text: string | undefined): Record | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as JsonValue;
    if (isObject(value) && isObject(value.response) && Array.isArray(value.input)) {
      return { response: value.response, input: value.input };
    }
  } catch {
    // an unreadable record is a missing one
  }
  return undefined;
}

/** An item of a stored output or input, as it goes back into a request's input (undefined: left out). */
function asInputItem(item: JsonValue): JsonValue | undefined {
  if (!isObject(item)) return item;
  if (item.type === 'reasoning' && typeof item.encrypted_content !== 'string') return undefined;
  if (item.type === 'reasoning') return item;
  const { id: _id, status: _status, ...rest } = item;
  return rest;
}

function inputItems(items: readonly JsonValue[]): JsonValue[] {
  const out: JsonValue[] = [];
  for (const item of items) {
    const converted = asInputItem(item);
    if (converted !== undefined) out.push(converted);
  }
  return out;
}

function requestInput(input: JsonValue | undefined): JsonValue[] {
  if (input === undefined || input === null) return [];
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? input : [input];
}

/** An id the gateway could have stored: anything else is not looked up (it would become a store key). */
function isId(id: string): boolean {
  return id !== '' && id.length <= MAX_ID_LENGTH;
}

function isReference(item: JsonValue): item is JsonObject {
  return isObject(item) && item.type === 'item_reference';
}

function notFound(code: 'previous_response_not_found' | 'item_not_found', id: string, param: string): never {
  const what = code === 'item_not_found' ? 'Item' : 'Previous response';
  throw new GatewayError(code, `${what} with id '${clip(id, 200)}' not found.`, param);
}

/** The item of that id in a record (its output first, then its input). */
function findItem(record: Record, id: string): JsonValue | undefined {
  const output = Array.isArray(record.response.output) ? record.response.output : [];
  for (const list of [output, record.input]) {
    const found = list.find((item) => isObject(item) && item.id === id);
    if (found !== undefined) return found;
  }
  return undefined;
}

function hasReferences(body: JsonObject): boolean {
  const previous = body.previous_response_id;
  return (
    (typeof previous === 'string' && previous !== '') ||
    (Array.isArray(body.input) && body.input.some(isReference))
  );
}

async function resolve(body: JsonObject, lookup: StoredLookup): Promise<ResolvedRequest> {
  // Nothing named: the request goes on as the client wrote it.
  if (!hasReferences(body)) return { body, input: requestInput(body.input), previousId: undefined };
  const history: JsonValue[] = [];
  const previousId = asString(body.previous_response_id);
  if (previousId !== undefined && previousId !== '') {
    const previous = parseRecord(isId(previousId) ? await lookup.response(previousId) : undefined);
    if (previous === undefined) notFound('previous_response_not_found', previousId, 'previous_response_id');
    const output = Array.isArray(previous.response.output) ? previous.response.output : [];
    history.push(...previous.input, ...inputItems(output));
  }
  const own: JsonValue[] = [];
  for (const item of requestInput(body.input)) {
    if (!isReference(item)) {
      own.push(item);
      continue;
    }
    const id = asString(item.id) ?? '';
    const record = parseRecord(isId(id) ? await lookup.item(id) : undefined);
    const found = record === undefined ? undefined : findItem(record, id);
    if (found === undefined) notFound('item_not_found', id, 'input');
    const converted = asInputItem(found);
    if (converted !== undefined) own.push(converted);
  }
  const input = [...history, ...own];
  const { previous_response_id: _previous, ...rest } = body;
  return { body: { ...rest, input }, input, previousId };
}

const FINAL_EVENTS = ['response.completed', 'response.incomplete'];

function finalResponse(part: ResponsePart): JsonObject | undefined {
  if (part.type === 'json') {
    const value = part.value;
    return isObject(value) && value.object === 'response' && typeof value.id === 'string' ? value : undefined;
  }
  const named = part.event !== undefined && FINAL_EVENTS.includes(part.event);
  // Cheap test first: this runs on every event of every Responses stream.
  if (!named && !FINAL_EVENTS.some((type) => part.data.startsWith(`{"type":"${type}"`))) return undefined;
  try {
    const event = JSON.parse(part.data) as JsonValue;
    if (!isObject(event) || !FINAL_EVENTS.includes(String(event.type))) return undefined;
    const response = event.response;
    return isObject(response) && typeof response.id === 'string' ? response : undefined;
  } catch {
    return undefined;
  }
}

function record(resolved: ResolvedRequest, response: JsonObject): StoredRecord | undefined {
  const id = asString(response.id);
  if (id === undefined || id === '') return undefined;
  const stored: JsonObject = { ...response, store: true, previous_response_id: resolved.previousId ?? null };
  const output = Array.isArray(response.output) ? response.output : [];
  const itemIds = new Set<string>();
  for (const item of [...output, ...resolved.input]) {
    if (isObject(item) && typeof item.id === 'string' && item.id !== '') itemIds.add(item.id);
  }
  return {
    id,
    itemIds: [...itemIds],
    record: JSON.stringify({ response: stored, input: resolved.input }),
  };
}

export const responsesStored: StoredResponsesSpec = {
  family: 'responses',
  api: 'responses',
  resolvedApis: ['responses', 'responses.input_tokens'],
  path: '/v1/responses',
  storeRequested: (body) => body.store !== false,
  hasReferences,
  resolve,
  finalResponse,
  record,
  view: (text) => parseRecord(text)?.response ?? null,
  deleted: (id) => ({ id, object: 'response', deleted: true }),
};
