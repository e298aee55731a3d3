// Families whose clients name earlier replies by id (the Responses API's `previous_response_id` and
// `item_reference`) declare here how: which api's replies are stored, how a request's references are
// resolved into a self-contained request, which reply part is the whole response, and the answers of
// `GET` and `DELETE <path>/{id}`. The gateway's built-in hook (hooks/builtin/response-state.ts) does
// the storing and the lookups for every provider alike; it never reads the request or reply itself.

import type { ApiName } from '../../common/types.ts';
import type { StoredResponsesSpec } from './response-state-types.ts';
import { responsesStored } from './responses/stored.ts';

export type {
  ResolvedRequest,
  StoredLookup,
  StoredRecord,
  StoredResponsesSpec,
} from './response-state-types.ts';

export const STORED_RESPONSES: readonly StoredResponsesSpec[] = [responsesStored];

export function storedResponsesOf(api: ApiName): StoredResponsesSpec | undefined {
  return STORED_RESPONSES.find((s) => s.api === api);
}

/** The spec whose references a request of this api may hold (stored or not). */
export function resolvingSpecOf(api: ApiName): StoredResponsesSpec | undefined {
  return STORED_RESPONSES.find((s) => s.resolvedApis.includes(api));
}

/** The spec that answers `GET`/`DELETE` on this path, and the id in it. */
export function storedResponsePath(path: string): { spec: StoredResponsesSpec; id: string } | undefined {
  for (const spec of STORED_RESPONSES) {
    const prefix = `${spec.path}/`;
    if (!path.startsWith(prefix)) continue;
    const id = path.slice(prefix.length);
    if (/^[A-Za-z0-9_.:-]{1,200}$/.test(id)) return { spec, id };
  }
  return undefined;
}
