// Stored responses (docs/translation.md "Stored responses"): the request hook resolves what a request
// names of earlier replies (before target selection, so every provider gets the same self-contained
// request), and the recorder, the last response hook of a rule, keeps the reply as the client saw it.
// The family says what a reference and a whole response look like (hooks/families/response-state.ts);
// this file knows only subjects, the store and its bounds.
//
// Only a subject's own records are ever read: a request without a subject (the master key with no
// fallback subject) stores nothing, and every id it names is not found. Logs carry ids and sizes only,
// never a prompt or a reply.

import type { ResponsesConfig } from '../../common/config-types.ts';
import { errorText, GatewayError } from '../../common/errors.ts';
import { RequestState } from '../../common/request-state.ts';
import type { ResponseStore } from '../../common/response-store-types.ts';
import { StoreUnavailableError, type SubjectRef } from '../../common/store-types.ts';
import { CONTINUE, type Hook, type RequestContext, type ResponsePart } from '../../common/types.ts';
import {
  type ResolvedRequest,
  resolvingSpecOf,
  type StoredLookup,
  type StoredResponsesSpec,
} from '../families/response-state.ts';

interface Pending {
  readonly spec: StoredResponsesSpec;
  readonly resolved: ResolvedRequest;
  readonly subject: SubjectRef;
  recorded: boolean;
}

export interface StoredResponsesOptions {
  /** Undefined when nothing can be stored (then every reference is not found). */
  readonly store: ResponseStore | undefined;
  readonly config: ResponsesConfig;
}

export interface StoredResponsesHooks {
  /** onRequest: resolves references (404 in the client's shape for one not found). */
  readonly request: Hook;
  /** The response hook that stores the reply; observes only. */
  readonly recorder: Hook;
}

/** The request's subject, when it has one its records can be kept under. */
export function storedSubject(ctx: Pick<RequestContext, 'principal'>): SubjectRef | undefined {
  const p = ctx.principal;
  if (p === undefined || p.subjectId === '') return undefined;
  return { type: p.subjectType, id: p.subjectId };
}

export function lookupFor(store: ResponseStore | undefined, subject: SubjectRef | undefined): StoredLookup {
  if (store === undefined || subject === undefined) {
    return { response: async () => undefined, item: async () => undefined };
  }
  return { response: (id) => store.get(subject, id), item: (id) => store.getByItem(subject, id) };
}

/** A store that cannot answer is a 503 the client may retry; the family's own 404s pass as they are. */
export function storeFailure(err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return new GatewayError('stored_response_unavailable');
  return err;
}

export function createStoredResponsesHooks(opts: StoredResponsesOptions): StoredResponsesHooks {
  const { store, config } = opts;
  const storing = store !== undefined && config.storeTtlS > 0;
  const slot = new RequestState<Pending>();

  const request: Hook = {
    name: 'response-state',
    async onRequest(ctx) {
      const spec = resolvingSpecOf(ctx.api);
      const body = ctx.body;
      if (spec === undefined || body === undefined) return CONTINUE;
      const subject = storedSubject(ctx);
      let resolved: ResolvedRequest;
      try {
        resolved = await spec.resolve(body, lookupFor(storing ? store : undefined, subject));
      } catch (err) {
        throw storeFailure(err);
      }
      ctx.body = resolved.body;
      if (storing && subject !== undefined && spec.api === ctx.api && spec.storeRequested(body)) {
        slot.set(ctx, { spec, resolved, subject, recorded: false });
      }
      return CONTINUE;
    },
  };

  const recorder: Hook = {
    name: 'response-state-recorder',
    responseMode: 'observe',
    onResponseChunk(ctx, parts) {
      const pending = slot.get(ctx);
      if (pending === undefined || pending.recorded || store === undefined) return parts;
      for (const part of parts) {
        if (recordPart(ctx, pending, part, store, config)) break;
      }
      return parts;
    },
  };
  return { request, recorder };
}

/** Stores the response if this part carries it whole; true once it did (or decided not to). */
function recordPart(
  ctx: RequestContext,
  pending: Pending,
  part: ResponsePart,
  store: ResponseStore,
  config: ResponsesConfig,
): boolean {
  const response = pending.spec.finalResponse(part);
  if (response === undefined) return false;
  pending.recorded = true;
  const record = pending.spec.record(pending.resolved, response);
  if (record === undefined) return true;
  const bytes = Buffer.byteLength(record.record);
  if (bytes > config.storeMaxBytes) {
    ctx.log.info(
      { responseId: record.id, bytes, maxBytes: config.storeMaxBytes },
      'response not stored: larger than the configured store_max_bytes',
    );
    return true;
  }
  ctx.replyHold = store.put(pending.subject, record, config.storeTtlS * 1000).catch((err: unknown) => {
    ctx.log.warn({ responseId: record.id, err: errorText(err) }, 'response not stored');
  });
  return true;
}
