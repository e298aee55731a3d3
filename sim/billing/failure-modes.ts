// Failure injection: parsing the mode strings and keeping the two independent slots (ingest, lookup).

import type { FailureMode, IngestFailureMode, LookupFailureMode } from './types.ts';

export type IngestFailure =
  | { kind: 'none' }
  | { kind: 'error500' }
  | { kind: 'hang' }
  | { kind: 'reset' }
  | { kind: 'slow'; ms: number }
  | { kind: 'error500-times'; remaining: number };

export type LookupFailure = { kind: 'none' } | { kind: 'lookup-error' } | { kind: 'lookup-hang' };

export type ParsedFailure =
  | { slot: 'both' }
  | { slot: 'ingest'; failure: IngestFailure; mode: IngestFailureMode }
  | { slot: 'lookup'; failure: LookupFailure; mode: LookupFailureMode };

function parseCount(text: string, mode: string): number {
  if (!/^\d+$/.test(text)) throw new Error(`invalid failure mode ${JSON.stringify(mode)}`);
  return Number(text);
}

/** Throws on an unknown mode so that a typo in a test fails loudly instead of testing nothing. */
export function parseFailureMode(mode: string): ParsedFailure {
  if (mode === 'none') return { slot: 'both' };
  if (mode === 'error500' || mode === 'hang' || mode === 'reset')
    return { slot: 'ingest', failure: { kind: mode }, mode };
  if (mode === 'lookup-error' || mode === 'lookup-hang') {
    return { slot: 'lookup', failure: { kind: mode }, mode };
  }
  if (mode.startsWith('slow:')) {
    const ms = parseCount(mode.slice('slow:'.length), mode);
    return { slot: 'ingest', failure: { kind: 'slow', ms }, mode: `slow:${ms}` };
  }
  if (mode.startsWith('error500-times:')) {
    const n = parseCount(mode.slice('error500-times:'.length), mode);
    return { slot: 'ingest', failure: { kind: 'error500-times', remaining: n }, mode: `error500-times:${n}` };
  }
  throw new Error(`invalid failure mode ${JSON.stringify(mode)}`);
}

export function isFailureMode(mode: string): mode is FailureMode {
  try {
    parseFailureMode(mode);
    return true;
  } catch {
    return false;
  }
}
