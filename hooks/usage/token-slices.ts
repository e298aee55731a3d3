// Token counting in linear time, in slices that give the event loop back.
//
// BPE merges each piece the pre-tokenizer cuts text into in time quadratic in the piece's length, and a
// run without whitespace (base64, a CJK paragraph, "xxxx…") is a single piece: 100k characters of "x"
// took seconds. So text reaches the tokenizer in chunks of at most CHUNK_MAX characters, cut
// - before a space that follows a non-whitespace character where the chunk's second half has one: no
//   pre-tokenizer piece of o200k_base or cl100k_base spans such a point, so ordinary text counts
//   exactly as it does whole;
// - otherwise (a longer run without spaces) at the fixed length, never between the halves of a
//   surrogate pair; each such cut may add about one token.
// The counting itself is a generator that yields after each chunk; runInSlices drives it for at most
// SLICE.ms or SLICE.chars per event-loop turn, all computations together, and continues in a later turn
// (setImmediate).

/** Tokens of one chunk, from the tokenizer. */
export type ChunkCounter = (chunk: string) => number;

/** Steps of a sliced computation: each yields the characters it just handled, then the result. */
export type Steps<T> = Iterator<number, T, undefined>;

export const CHUNK_MAX = 256;
const CUT_FROM = CHUNK_MAX / 2;
const WHITESPACE = /\s/;

export interface SliceBudget {
  /** Most milliseconds of counting in one event-loop turn (checked after each chunk). */
  readonly ms: number;
  /** Most characters counted in one turn, so that a large input always takes several turns. */
  readonly chars: number;
}

export const SLICE: SliceBudget = { ms: 2, chars: 4096 };

/** End (exclusive) of the chunk starting at `start`. */
export function chunkEnd(text: string, start: number): number {
  const limit = start + CHUNK_MAX;
  if (limit >= text.length) return text.length;
  // Searched within the chunk: in text without spaces, lastIndexOf on the whole text scans back to its
  // start for every chunk, which made counting quadratic.
  const window = text.slice(start, limit + 1);
  let at = window.lastIndexOf(' ');
  while (at > CUT_FROM) {
    if (!WHITESPACE.test(window.charAt(at - 1))) return start + at;
    at = window.lastIndexOf(' ', at - 1);
  }
  const code = text.charCodeAt(limit);
  return code >= 0xdc00 && code <= 0xdfff ? limit - 1 : limit;
}

/**
 * text[start, end) in a string of its own. V8's slice of a long string refers to the whole string, and
 * gpt-tokenizer's merge cache keeps (up to 100,000) pieces of what it counted, slices again: one cached
 * piece kept a whole prompt alive. Appending a character and cutting it off makes V8 copy the chunk (it
 * flattens the concatenation), so pieces refer to the copy.
 */
function ownChunk(text: string, start: number, end: number): string {
  return `${text.slice(start, end)} `.slice(0, -1);
}

/**
 * Counts text chunk by chunk. A chunk equal to the one before it (a run of one character, padding, a
 * pattern whose period divides the chunk length) gets that chunk's count again: it is compared in place,
 * neither copied nor tokenized, so a long repetitive run costs a comparison per chunk instead of the
 * tokenizer's pieces, match arrays and cache updates. The counts are the same either way: a chunk's
 * count depends on its characters alone.
 */
export function* countSteps(text: string, count: ChunkCounter): Generator<number, number, undefined> {
  let tokens = 0;
  let start = 0;
  let last = '';
  let lastTokens = 0;
  while (start < text.length) {
    const end = chunkEnd(text, start);
    if (end - start !== last.length || !text.startsWith(last, start)) {
      last = ownChunk(text, start, end);
      lastTokens = count(last);
    }
    tokens += lastTokens;
    yield end - start;
    start = end;
  }
  return tokens;
}

/** Runs steps to the end at once (callers that must answer synchronously; the work stays linear). */
export function runToEnd<T>(steps: Steps<T>): T {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

// One budget per event-loop turn for every computation together: with a slice per computation and turn,
// a backlog of large estimates (many aborted streams at once) made each turn as long as the backlog.
const queue: Job[] = [];
let pumping = false;

interface Job {
  readonly steps: Steps<unknown>;
  readonly budget: SliceBudget;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** What is left of a slice's budget; one slice can be shared by several computations. */
interface Slice {
  chars: number;
  readonly deadline: number;
}

function sliceOf(budget: SliceBudget): Slice {
  return { chars: budget.chars, deadline: performance.now() + budget.ms };
}

function spent(slice: Slice): boolean {
  return slice.chars <= 0 || performance.now() >= slice.deadline;
}

/** Runs steps until they end or the slice is spent. */
function runSlice<T>(steps: Steps<T>, slice: Slice): IteratorResult<number, T> {
  for (;;) {
    const step = steps.next();
    if (step.done) return step;
    slice.chars -= step.value;
    if (spent(slice)) return step;
  }
}

/** One turn: the waiting computations in order, in one slice, then the rest in a later turn. */
function pump(): void {
  pumping = false;
  const slice = sliceOf(queue[0]!.budget);
  while (queue.length > 0 && !spent(slice)) {
    const job = queue.shift()!;
    try {
      const step = runSlice(job.steps, slice);
      if (step.done) job.resolve(step.value);
      else queue.push(job);
    } catch (err) {
      job.reject(err);
    }
  }
  schedule();
}

function schedule(): void {
  if (queue.length === 0 || pumping) return;
  pumping = true;
  setImmediate(pump);
}

/**
 * Runs steps in slices. With nothing waiting, the first slice runs now, so a small input gets its result
 * synchronously (each request brings at most one such slice); otherwise the result is a promise, and
 * every waiting computation shares one budget per event-loop turn (SLICE), in turn.
 */
export function runInSlices<T>(steps: Steps<T>, budget: SliceBudget = SLICE): T | Promise<T> {
  if (queue.length === 0) {
    const first = runSlice(steps, sliceOf(budget));
    if (first.done) return first.value;
  }
  return new Promise<T>((resolve, reject) => {
    queue.push({ steps, budget, resolve: resolve as (value: unknown) => void, reject });
    schedule();
  });
}
