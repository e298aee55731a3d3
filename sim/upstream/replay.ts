// Verbatim replay of recorded wire fixtures (test/fixtures/upstream/<provider>/<name>.sse|.json), the
// simulator's "cassettes". A fixture named "<name>.<status>.json" replays with that HTTP status.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SimReply } from './types.ts';

export const DEFAULT_FIXTURES_DIR = fileURLToPath(new URL('../../test/fixtures/upstream/', import.meta.url));

const SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const PROVIDERS = new Set(['openai', 'anthropic', 'gemini']);

/** Splits an SSE file into events, each keeping its blank-line terminator (LF or CRLF). */
export function splitSseEvents(text: string): string[] {
  const events: string[] = [];
  const re = /\r\n\r\n|\n\n|\r\r/g;
  let start = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    events.push(text.slice(start, m.index + m[0].length));
    start = m.index + m[0].length;
  }
  if (start < text.length) events.push(text.slice(start));
  return events;
}

export class FixtureLibrary {
  readonly dir: string;
  readonly #cache = new Map<string, SimReply | undefined>();

  constructor(dir: string = DEFAULT_FIXTURES_DIR) {
    this.dir = dir;
  }

  /** The reply for "<provider>/<name>" (name with or without extension), or undefined if none exists. */
  async load(ref: string): Promise<SimReply | undefined> {
    if (this.#cache.has(ref)) return this.#cache.get(ref);
    const reply = await this.#read(ref);
    this.#cache.set(ref, reply);
    return reply;
  }

  async #read(ref: string): Promise<SimReply | undefined> {
    const slash = ref.indexOf('/');
    const provider = ref.slice(0, slash);
    const name = ref.slice(slash + 1);
    if (slash < 0 || !PROVIDERS.has(provider) || !SAFE_NAME.test(name)) return undefined;
    let files: string[];
    try {
      files = await readdir(join(this.dir, provider));
    } catch {
      return undefined;
    }
    const file = files.find((f) => f === name) ?? files.find((f) => f.startsWith(`${name}.`));
    if (file === undefined) return undefined;
    const text = await readFile(join(this.dir, provider, file), 'utf8');
    if (file.endsWith('.sse')) {
      return {
        kind: 'stream',
        contentType: 'text/event-stream; charset=utf-8',
        frames: splitSseEvents(text),
        errorFrame: '',
      };
    }
    const status = /\.(\d{3})\.json$/.exec(file);
    return { kind: 'json', status: status ? Number(status[1]) : 200, body: text };
  }
}
