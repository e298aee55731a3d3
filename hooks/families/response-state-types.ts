// What a family whose clients name earlier replies by id declares (hooks/families/response-state.ts
// registers them): the types only, so a family's module and the registry import it without a circle.

import type { ApiName, JsonObject, JsonValue, ResponsePart } from '../../common/types.ts';

/** Reads of the caller's own stored records (JSON text as stored); undefined when there is none. */
export interface StoredLookup {
  response(id: string): Promise<string | undefined>;
  item(id: string): Promise<string | undefined>;
}

export interface ResolvedRequest {
  /** The request with every reference replaced by what it names: what goes to the provider. */
  readonly body: JsonObject;
  /** The conversation so far as input items (earlier turns and this request's input), to store. */
  readonly input: readonly JsonValue[];
  /** The previous response named, echoed in the stored response. */
  readonly previousId: string | undefined;
}

export interface StoredRecord {
  readonly id: string;
  readonly itemIds: readonly string[];
  readonly record: string;
}

export interface StoredResponsesSpec {
  /** The family (its error shape answers the lookups). */
  readonly family: string;
  readonly api: ApiName;
  /** Apis whose requests may name stored responses (the generation api, and e.g. its token count). */
  readonly resolvedApis: readonly ApiName[];
  /** `GET` and `DELETE <path>/{id}` answer stored responses. */
  readonly path: string;
  /** Whether the client asked that this reply be stored (the default). */
  storeRequested(body: JsonObject): boolean;
  /** Whether the request names anything stored (no lookup is made otherwise). */
  hasReferences(body: JsonObject): boolean;
  /** Resolves the references; throws a catalogue error (404) naming the first one not found. */
  resolve(body: JsonObject, lookup: StoredLookup): Promise<ResolvedRequest>;
  /** The whole response when this part of the client's reply carries it (the JSON reply, the final event). */
  finalResponse(part: ResponsePart): JsonObject | undefined;
  /** The record to store for a served response. */
  record(resolved: ResolvedRequest, response: JsonObject): StoredRecord | undefined;
  /** The body of `GET <path>/{id}`. */
  view(record: string): JsonValue;
  /** The body of a successful `DELETE <path>/{id}`. */
  deleted(id: string): JsonValue;
}
