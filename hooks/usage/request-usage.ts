// Quantities a preset read from the request (images asked for, characters to speak, audio sent), merged
// with what the reply reports.

import type { Usage } from '../../common/types.ts';
import type { RequestUsage } from './types.ts';

/**
 * What the reply reported merged with what the request said: reply fields win; an estimated request
 * quantity is dropped as soon as the reply reports usage of its own.
 */
export function mergeRequestUsage(fromRequest: RequestUsage, reported: Usage): Usage {
  if (fromRequest.estimated !== undefined) return reported;
  return { ...fromRequest.usage, ...reported };
}
