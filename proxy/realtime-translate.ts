// Realtime sessions across families (docs/realtime.md "Across families"): when the matched rule names a
// realtime translator (`req_map` of a realtime rule), the session's messages go through it, each way,
// instead of being relayed unchanged. Frames are JSON text both ways.

import type { RawData } from 'ws';
import { isObject } from '../common/json-guards.ts';
import type { JsonObject } from '../common/types.ts';
import type { CompiledRule } from '../hooks/dsl/types.ts';
import { REALTIME_TRANSLATORS, realtimeDialectForApi } from '../hooks/families/index.ts';
import type {
  RealtimeDialect,
  RealtimeOutput,
  RealtimeTranslator,
  RealtimeTranslatorFactory,
} from '../hooks/families/types.ts';

/** Nesting a client message may have (Gemini's own JSON reader stops at 100). */
export const MAX_CLIENT_DEPTH = 100;

export interface RealtimeTranslation {
  readonly factory: RealtimeTranslatorFactory;
  /** The upstream's dialect: how a response the client cuts is cancelled or estimated. */
  readonly upstreamDialect: RealtimeDialect;
}

/** The realtime translator a rule names, if any. */
export function ruleTranslation(rule: CompiledRule): RealtimeTranslation | undefined {
  for (const op of rule.request) {
    if (op.op !== 'req_map') continue;
    const factory = REALTIME_TRANSLATORS.get(op.translator);
    const upstreamDialect = factory === undefined ? undefined : realtimeDialectForApi(factory.to);
    if (factory !== undefined && upstreamDialect !== undefined) return { factory, upstreamDialect };
  }
  return undefined;
}

/** What one frame becomes: text frames for each side, in order, and a close of the client's socket. */
export interface TranslatedFrames {
  readonly upstream: readonly string[];
  readonly client: readonly string[];
  readonly close?: { readonly code: number; readonly reason: string };
}

/** One session's translator, on frames. */
export class FrameTranslator {
  private readonly translator: RealtimeTranslator;

  constructor(translation: RealtimeTranslation, model: string, upstreamModel: string) {
    this.translator = translation.factory.create({ model, upstreamModel });
  }

  /** The id of the response the client would see cut. */
  get responseInProgress(): string | undefined {
    return this.translator.responseInProgress;
  }

  open(): TranslatedFrames {
    return texts(this.translator.open());
  }

  /** A binary frame is parsed too (Gemini Live takes JSON in either); the translator decides. */
  fromClient(data: RawData | string, binary: boolean): TranslatedFrames {
    const message = parsed(data);
    // Nested deeper than any event needs: read as malformed (the translators recurse and re-serialise).
    return texts(
      this.translator.fromClient(
        message !== undefined && nestedDeeperThan(message, MAX_CLIENT_DEPTH) ? undefined : message,
        binary,
      ),
    );
  }

  /** Google's servers send the Live API's JSON as binary frames: both kinds are read. */
  fromUpstream(data: RawData): TranslatedFrames {
    return texts(this.translator.fromUpstream(parsed(data)));
  }
}

function texts(out: RealtimeOutput): TranslatedFrames {
  return {
    upstream: out.upstream.map((m) => JSON.stringify(m)),
    client: out.client.map((m) => JSON.stringify(m)),
    ...(out.close === undefined ? {} : { close: out.close }),
  };
}

function parsed(data: RawData | string): JsonObject | undefined {
  const bytes =
    typeof data === 'string'
      ? Buffer.from(data)
      : Buffer.isBuffer(data)
        ? data
        : Array.isArray(data)
          ? Buffer.concat(data)
          : Buffer.from(data);
  try {
    const value: unknown = JSON.parse(bytes.toString('utf8'));
    return isObject(value) ? (value as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

/** Whether objects and arrays nest deeper than `max` levels (iterative: no stack to exhaust). */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [v, depth] = next;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v as object))
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}
