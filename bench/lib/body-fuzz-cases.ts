// Truncated and corrupted request bodies on every model route, shared by test/proxy/body-fuzz.test.ts
// (a few thousand cases in `npm test`) and bench/fuzz.ts (the long run with a report). A case is a plain
// recipe (fast-check generates it from a seed) that buildCase turns into bytes the same way every time,
// so a failing recipe printed in a report can be replayed. The gateway runs as a child process, so a
// crash is seen as its exit; requests go over raw sockets, so framing can be cut short on purpose.

import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { LINGER_BYTES, LINGER_MS } from '../../proxy/lingering-close.ts';

export type Family = 'openai' | 'anthropic' | 'gemini';

export interface FuzzRoute {
  /** Path and model (and provider), e.g. `/v1/chat/completions claude-sonnet-5`. */
  readonly name: string;
  readonly family: Family;
  readonly path: string;
  readonly body: 'json' | 'multipart';
  /** JSON routes: the valid body. */
  readonly json?: Readonly<Record<string, unknown>>;
  /** Multipart routes: the valid form. */
  readonly form?: readonly Part[];
  readonly headers?: Readonly<Record<string, string>>;
}

export interface Part {
  readonly name: string;
  readonly filename?: string;
  readonly type?: string;
  readonly data: Buffer;
}

const MSG = [{ role: 'user', content: 'hi' }];
const CONTENTS = [{ role: 'user', parts: [{ text: 'hi' }] }];

/** A file that starts with its format's magic bytes, then noise. */
function fakeFile(magic: string, size: number, seed: number): Buffer {
  const buf = randomBytes(size, seed);
  buf.write(magic, 0, 'latin1');
  return buf;
}

const WAV = fakeFile('RIFF\x24\x08\x00\x00WAVEfmt ', 3000, 7);
const PNG = fakeFile('\x89PNG\r\n\x1a\n', 2500, 11);

function audioForm(model: string): Part[] {
  return [
    { name: 'model', data: Buffer.from(model) },
    { name: 'file', filename: 'a.wav', type: 'audio/wav', data: WAV },
    { name: 'response_format', data: Buffer.from('json') },
  ];
}

const json = (
  family: Family,
  path: string,
  body: Record<string, unknown>,
  headers?: Record<string, string>,
) => {
  const model = typeof body.model === 'string' ? body.model : (/models\/([^:]+):/.exec(path)?.[1] ?? '');
  const provider = headers?.['x-router-provider'];
  const name = `${path.replace(/models\/[^:]+:/, 'models/{m}:')} ${model}${body.stream === true ? ' stream' : ''}${provider ? ` via ${provider}` : ''}`;
  return { name, family, path, body: 'json', json: body, headers } satisfies FuzzRoute;
};
const multipart = (path: string, model: string, form: Part[]): FuzzRoute => ({
  name: `${path} ${model}`,
  family: 'openai',
  path,
  body: 'multipart',
  form,
});

/**
 * Every model route of the families (hooks/families/*: openai, responses, anthropic, gemini), with
 * models of each provider family, the translated cells and every shipped provider by x-router-provider.
 */
export const ROUTES: readonly FuzzRoute[] = [
  json('openai', '/v1/chat/completions', { model: 'gpt-5.4-mini', messages: MSG }),
  json('openai', '/v1/chat/completions', { model: 'gpt-5.4-mini', messages: MSG, stream: true }),
  json('openai', '/v1/chat/completions', { model: 'claude-sonnet-5', messages: MSG }),
  json('openai', '/v1/chat/completions', { model: 'gemini-3.8-flash', messages: MSG, stream: true }),
  ...['deepseek', 'groq', 'mistral', 'openrouter', 'together', 'xai', 'ollama', 'vllm', 'azure-openai'].map(
    (provider) =>
      json(
        'openai',
        '/v1/chat/completions',
        { model: 'llama-3.1-8b', messages: MSG },
        { 'x-router-provider': provider },
      ),
  ),
  json('openai', '/v1/completions', { model: 'gpt-3.5-turbo-instruct', prompt: 'hi' }),
  json('openai', '/v1/embeddings', { model: 'text-embedding-3-small', input: 'hi' }),
  json('openai', '/v1/embeddings', { model: 'gemini-embedding-001', input: ['hi', 'there'] }),
  json('openai', '/v1/images/generations', { model: 'gpt-image-1', prompt: 'a cat' }),
  json('openai', '/v1/audio/speech', { model: 'tts-1', input: 'hi', voice: 'alloy' }),
  multipart('/v1/images/edits', 'gpt-image-1', [
    { name: 'model', data: Buffer.from('gpt-image-1') },
    { name: 'prompt', data: Buffer.from('a cat in a hat') },
    { name: 'image', filename: 'a.png', type: 'image/png', data: PNG },
  ]),
  multipart('/v1/audio/transcriptions', 'whisper-1', audioForm('whisper-1')),
  multipart('/v1/audio/transcriptions', 'gpt-4o-transcribe', audioForm('gpt-4o-transcribe')),
  multipart('/v1/audio/translations', 'whisper-1', audioForm('whisper-1')),
  json('openai', '/v1/responses', { model: 'gpt-5.4-mini', input: 'hi' }),
  json('openai', '/v1/responses', { model: 'claude-sonnet-5', input: 'hi', stream: true }),
  json('openai', '/v1/responses', { model: 'gemini-3.8-flash', input: 'hi' }),
  json('openai', '/v1/responses/input_tokens', { model: 'gpt-5.4-mini', input: 'hi' }),
  json('openai', '/v1/responses/input_tokens', { model: 'gemini-3.8-flash', input: 'hi' }),
  json('anthropic', '/v1/messages', { model: 'claude-sonnet-5', max_tokens: 8, messages: MSG }),
  json('anthropic', '/v1/messages', { model: 'claude-sonnet-5', max_tokens: 8, messages: MSG, stream: true }),
  json('anthropic', '/v1/messages', { model: 'gpt-5.4-mini', max_tokens: 8, messages: MSG }),
  json('anthropic', '/v1/messages', { model: 'gemini-3.8-flash', max_tokens: 8, messages: MSG }),
  json('anthropic', '/v1/messages/count_tokens', { model: 'claude-sonnet-5', messages: MSG }),
  json('anthropic', '/v1/messages/count_tokens', { model: 'gpt-5.4-mini', messages: MSG }),
  json('gemini', '/v1beta/models/gemini-3.8-flash:generateContent', { contents: CONTENTS }),
  json('gemini', '/v1beta/models/gemini-3.8-flash:streamGenerateContent', { contents: CONTENTS }),
  json('gemini', '/v1beta/models/gemini-3.8-flash:countTokens', { contents: CONTENTS }),
  json('gemini', '/v1/models/gemini-3.8-pro:generateContent', { contents: CONTENTS }),
  json('gemini', '/v1beta/models/claude-sonnet-5:generateContent', { contents: CONTENTS }),
  json('gemini', '/v1beta/models/gpt-5.4-mini:streamGenerateContent', { contents: CONTENTS }),
  json('gemini', '/v1beta/models/claude-sonnet-5:countTokens', { contents: CONTENTS }),
];

/** How the client presents its key: a valid one on some carrier, none, or a wrong or malformed one. */
export type AuthMode = 'bearer' | 'carrier' | 'none' | 'wrong' | 'malformed';

/**
 * How the bytes go out. exact: Content-Length of what is sent; chunked: whole, chunked; short-*:
 * Content-Length declares more than is sent (chunked-*: no last chunk), then the client waits (stall)
 * or half-closes its side (halfclose).
 */
export type Delivery =
  | 'exact'
  | 'chunked'
  | 'short-stall'
  | 'short-halfclose'
  | 'chunked-stall'
  | 'chunked-halfclose';

/** A case as data: buildCase turns it into the same bytes every time. */
export interface Recipe {
  readonly route: number;
  readonly auth: AuthMode;
  readonly delivery: Delivery;
  readonly mutation: string;
  readonly a: number;
  readonly b: number;
  readonly seed: number;
}

export interface BuiltCase {
  readonly recipe: Recipe;
  readonly route: FuzzRoute;
  /** The path with its query. */
  readonly target: string;
  /** Header lines besides host, framing and connection, in order (duplicates allowed). */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer;
  /** Bytes Content-Length declares beyond the body (short-* deliveries). */
  readonly missing: number;
  /** The mutation with its parameters, for reports. */
  readonly label: string;
}

/** Each name `weight` times: a recipe's mutation number indexes the list. */
function byWeight(weights: Readonly<Record<string, number>>): string[] {
  return Object.entries(weights).flatMap(([name, n]) => Array.from({ length: n }, () => name));
}

const COMMON_MUTATIONS = { valid: 2, truncate: 4, flip: 3, insert: 1, delete: 1, garbage: 2, empty: 1 };
const HEADER_MUTATIONS = { 'content-type': 2, 'dup-content-type': 1 };
const JSON_MUTATIONS = byWeight({
  ...COMMON_MUTATIONS,
  ...HEADER_MUTATIONS,
  'huge-field': 2,
  deep: 1,
  'wrong-type': 2,
  'invalid-utf8': 1,
  'not-an-object': 1,
});
const MULTIPART_MUTATIONS = byWeight({
  ...COMMON_MUTATIONS,
  ...HEADER_MUTATIONS,
  repro: 1,
  'truncate-in-file': 2,
  'no-close-delimiter': 1,
  'damage-delimiter': 1,
  'delimiter-no-crlf': 1,
  'boundary-param': 2,
  'drop-disposition': 1,
  'dup-disposition': 1,
  'no-name': 1,
  'bad-header-line': 1,
  'many-headers': 1,
  'long-header': 1,
  'many-parts': 1,
  'many-files': 1,
  'huge-model': 1,
  'huge-file': 1,
  'missing-model': 1,
  'dup-model': 1,
  'model-as-file': 1,
  'bad-model-name': 1,
});

const DELIVERIES: readonly [Delivery, number][] = [
  ['exact', 70],
  ['chunked', 10],
  ['short-stall', 7],
  ['short-halfclose', 6],
  ['chunked-stall', 3],
  ['chunked-halfclose', 4],
];
const AUTHS: readonly [AuthMode, number][] = [
  ['bearer', 40],
  ['carrier', 25],
  ['none', 15],
  ['wrong', 12],
  ['malformed', 8],
];

function weighted<T>(items: readonly [T, number][]): fc.Arbitrary<T> {
  return fc.oneof(...items.map(([value, weight]) => ({ arbitrary: fc.constant(value), weight })));
}

/** The multipart routes are 4 of 40, and the forms' framing has the most ways to break. */
const MULTIPART_WEIGHT = 6;

/** Recipes; the mutation is picked from the route's list by `mutation` modulo its length. */
export const recipeArb: fc.Arbitrary<Recipe> = fc
  .record({
    route: weighted(
      ROUTES.map((r, i) => [i, r.body === 'multipart' ? MULTIPART_WEIGHT : 1] as [number, number]),
    ),
    auth: weighted(AUTHS),
    delivery: weighted(DELIVERIES),
    pick: fc.nat(),
    a: fc.nat(),
    b: fc.nat(),
    seed: fc.integer(),
  })
  .map(({ pick, ...r }) => {
    const list = ROUTES[r.route]!.body === 'json' ? JSON_MUTATIONS : MULTIPART_MUTATIONS;
    return { ...r, mutation: list[pick % list.length]! };
  });

/** `count` recipes from `seed`, the same ones every time. */
export function sampleRecipes(seed: number, count: number): Recipe[] {
  return count <= 0 ? [] : fc.sample(recipeArb, { seed, numRuns: count });
}

/** mulberry32: bulk bytes from a recipe's seed (fast-check sizes would keep generated arrays small). */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomBytes(size: number, seed: number): Buffer {
  const next = prng(seed);
  const buf = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) buf[i] = Math.floor(next() * 256);
  return buf;
}

/** The body of the issue's reproduction: a form ending inside its file part. */
export const REPRO_BODY = Buffer.from(
  '--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF',
  'latin1',
);
export const REPRO_CONTENT_TYPE = 'multipart/form-data; boundary=b';

// The last has characters a header token may not hold: the content-type quotes it.
const BOUNDARIES = ['b', '----WebKitFormBoundary7MA4YWxkTrZu0gW', "'()+_,-./:=? 0"];

function boundaryParam(boundary: string): string {
  return /^[A-Za-z0-9'+_.-]+$/.test(boundary) ? boundary : `"${boundary}"`;
}
const SIZES = [1_000, 20_000, 300_000, 1_100_000];
const JSON_TYPES = [
  'text/plain',
  'application/json; charset=utf-16',
  'multipart/form-data; boundary=b',
  'application/x-www-form-urlencoded',
  '',
  '\u00ff/\u00fe',
];
const FORM_TYPES = [
  'application/json',
  'text/plain',
  'multipart/mixed; boundary=',
  'multipart/form-data',
  '',
  'multipart/form-data; boundary=""',
];
const WRONG_VALUES: readonly unknown[] = [
  null,
  42,
  -1,
  true,
  'x',
  [],
  {},
  [[[]]],
  { role: 7 },
  [{ role: null }],
  1e308,
  '\u0000',
];
const FIELDS = [
  'model',
  'messages',
  'input',
  'contents',
  'stream',
  'max_tokens',
  'prompt',
  'tools',
  'system',
];

interface FormOptions {
  readonly boundary: string;
  readonly close?: boolean;
  /** Extra header lines of part i. */
  readonly extraHeaders?: ReadonlyMap<number, readonly string[]>;
  /** Part i without its Content-Disposition line. */
  readonly noDisposition?: number;
}

function disposition(p: Part): string {
  const file = p.filename === undefined ? '' : `; filename="${p.filename}"`;
  return `Content-Disposition: form-data; name="${p.name}"${file}`;
}

export function buildForm(parts: readonly Part[], opts: FormOptions): Buffer {
  const chunks: Buffer[] = [];
  parts.forEach((p, i) => {
    const lines = [`--${opts.boundary}`];
    if (opts.noDisposition !== i) lines.push(disposition(p));
    if (p.type !== undefined) lines.push(`Content-Type: ${p.type}`);
    lines.push(...(opts.extraHeaders?.get(i) ?? []));
    chunks.push(Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), p.data, Buffer.from('\r\n'));
  });
  if (opts.close !== false) chunks.push(Buffer.from(`--${opts.boundary}--\r\n`, 'latin1'));
  return Buffer.concat(chunks);
}

/** Byte offsets of every occurrence of `needle` in `buf`. */
function offsetsOf(buf: Buffer, needle: string): number[] {
  const found: number[] = [];
  for (let at = buf.indexOf(needle); at >= 0; at = buf.indexOf(needle, at + 1)) found.push(at);
  return found;
}

function flip(body: Buffer, count: number, seed: number): Buffer {
  const out = Buffer.from(body);
  if (out.length === 0) return out;
  const next = prng(seed);
  for (let i = 0; i < count; i++) {
    const at = Math.floor(next() * out.length);
    out[at] = (out[at]! ^ (1 + Math.floor(next() * 255))) & 0xff;
  }
  return out;
}

interface Mutated {
  body: Buffer;
  contentType?: string;
  /** Send Content-Type twice (the first is what Node keeps). */
  secondContentType?: string;
  label: string;
}

function commonMutation(r: Recipe, valid: Buffer, validType: string, wrongTypes: readonly string[]): Mutated {
  const len = valid.length;
  switch (r.mutation) {
    case 'truncate': {
      const at = r.a % Math.max(1, len);
      return { body: valid.subarray(0, at), label: `truncate at ${at}/${len}` };
    }
    case 'flip': {
      const count = 1 + (r.a % 8);
      return { body: flip(valid, count, r.seed), label: `flip ${count} bytes` };
    }
    case 'insert': {
      const at = r.a % (len + 1);
      const size = 1 + (r.b % 64);
      const bytes = randomBytes(size, r.seed);
      return {
        body: Buffer.concat([valid.subarray(0, at), bytes, valid.subarray(at)]),
        label: `insert ${size} bytes at ${at}`,
      };
    }
    case 'delete': {
      const at = r.a % Math.max(1, len);
      const size = 1 + (r.b % 200);
      return {
        body: Buffer.concat([valid.subarray(0, at), valid.subarray(at + size)]),
        label: `delete ${size} bytes at ${at}`,
      };
    }
    case 'garbage': {
      const size = r.a % 4000;
      return { body: randomBytes(size, r.seed), label: `${size} random bytes` };
    }
    case 'empty':
      return { body: Buffer.alloc(0), label: 'empty body' };
    case 'content-type': {
      const type = wrongTypes[r.a % wrongTypes.length]!;
      return { body: valid, contentType: type, label: `content-type ${JSON.stringify(type)}` };
    }
    case 'dup-content-type': {
      const type = wrongTypes[r.a % wrongTypes.length]!;
      const first = r.b % 2 === 0;
      return {
        body: valid,
        contentType: first ? validType : type,
        secondContentType: first ? type : validType,
        label: `content-type twice (${first ? 'right first' : 'wrong first'})`,
      };
    }
    default:
      return { body: valid, label: 'valid' };
  }
}

function jsonMutation(r: Recipe, route: FuzzRoute): Mutated {
  const base = route.json ?? {};
  const valid = Buffer.from(JSON.stringify(base));
  switch (r.mutation) {
    case 'huge-field': {
      const size = SIZES[r.a % SIZES.length]!;
      const field = r.b % 2 === 0 ? 'metadata_note' : (FIELDS[r.b % FIELDS.length] ?? 'x');
      return {
        body: Buffer.from(JSON.stringify({ ...base, [field]: 'a'.repeat(size) })),
        label: `field ${field} of ${size} bytes`,
      };
    }
    case 'deep': {
      const depth = [50, 200, 2_000, 100_000][r.a % 4]!;
      const open = r.b % 2 === 0 ? '[' : '{"a":';
      const close = r.b % 2 === 0 ? ']' : '}';
      const nested = `${open.repeat(depth)}1${close.repeat(depth)}`;
      return {
        body: Buffer.from(`${JSON.stringify(base).slice(0, -1)},"deep":${nested}}`),
        label: `nested ${depth} deep`,
      };
    }
    case 'wrong-type': {
      const field = FIELDS[r.a % FIELDS.length]!;
      const value = WRONG_VALUES[r.b % WRONG_VALUES.length];
      return {
        body: Buffer.from(JSON.stringify({ ...base, [field]: value })),
        label: `${field}: ${JSON.stringify(value)}`,
      };
    }
    case 'invalid-utf8': {
      const at = valid.indexOf('hi');
      const body = Buffer.from(valid);
      if (at >= 0) body.set([0xff, 0xc0], at);
      return { body, label: 'invalid UTF-8 in a string' };
    }
    case 'not-an-object': {
      const values = ['[]', '"x"', 'null', '1', '[{"model":"gpt-5.4-mini"}]', 'true'];
      const text = values[r.a % values.length]!;
      return { body: Buffer.from(text), label: `body ${text}` };
    }
    default:
      return commonMutation(r, valid, 'application/json', JSON_TYPES);
  }
}

function withPart(parts: readonly Part[], name: string, data: Buffer): Part[] {
  return parts.map((p) => (p.name === name ? { ...p, data } : p));
}

function multipartMutation(r: Recipe, route: FuzzRoute): Mutated {
  const boundary = BOUNDARIES[(r.seed >>> 0) % BOUNDARIES.length]!;
  const type = `multipart/form-data; boundary=${boundaryParam(boundary)}`;
  const parts = route.form ?? [];
  const valid = buildForm(parts, { boundary });
  const fileIndex = parts.findIndex((p) => p.filename !== undefined);
  const pick = (n: number) => n % parts.length;
  const form = (ps: readonly Part[], opts: Partial<FormOptions> = {}) => buildForm(ps, { boundary, ...opts });
  switch (r.mutation) {
    case 'repro':
      return { body: REPRO_BODY, contentType: REPRO_CONTENT_TYPE, label: 'the issue reproduction' };
    case 'truncate-in-file': {
      const head = offsetsOf(valid, '\r\n\r\n')[fileIndex] ?? 0;
      const size = parts[fileIndex]?.data.length ?? 0;
      const at = head + 4 + (r.a % Math.max(1, size));
      return { body: valid.subarray(0, at), contentType: type, label: `truncate in the file part at ${at}` };
    }
    case 'no-close-delimiter':
      return { body: form(parts, { close: false }), contentType: type, label: 'no closing delimiter' };
    case 'damage-delimiter': {
      const offsets = offsetsOf(valid, `--${boundary}`);
      const at = offsets[r.a % offsets.length]!;
      const body = Buffer.from(valid);
      const i = at + 2 + (r.b % boundary.length);
      body[i] = body[i]! ^ 0x20;
      return { body, contentType: type, label: `delimiter ${r.a % offsets.length} damaged` };
    }
    case 'delimiter-no-crlf': {
      const offsets = offsetsOf(valid, `--${boundary}\r\n`);
      const at = offsets[r.a % offsets.length]! + 2 + boundary.length;
      return {
        body: Buffer.concat([valid.subarray(0, at), valid.subarray(at + 2)]),
        contentType: type,
        label: `delimiter ${r.a % offsets.length} without CRLF`,
      };
    }
    case 'boundary-param': {
      const params = [
        'multipart/form-data',
        'multipart/form-data; boundary=',
        'multipart/form-data; boundary=other',
        `multipart/form-data; boundary="${boundary}"`,
        `multipart/form-data;boundary=${boundary}`,
        `multipart/form-data; boundary=${'z'.repeat(200)}`,
        `multipart/form-data; boundary=${boundary}; boundary=other`,
        `multipart/form-data; charset=utf-8; boundary=${boundary}`,
        `MULTIPART/FORM-DATA; BOUNDARY=${boundary}`,
      ];
      const ct = params[r.b % params.length]!;
      return { body: valid, contentType: ct, label: `content-type ${JSON.stringify(ct)}` };
    }
    case 'drop-disposition': {
      const i = pick(r.a);
      return {
        body: form(parts, { noDisposition: i }),
        contentType: type,
        label: `part ${i} without disposition`,
      };
    }
    case 'dup-disposition': {
      const i = pick(r.a);
      const extra = new Map([[i, ['Content-Disposition: form-data; name="other"']]]);
      return {
        body: form(parts, { extraHeaders: extra }),
        contentType: type,
        label: `part ${i}: disposition twice`,
      };
    }
    case 'no-name': {
      const i = pick(r.a);
      const body = form(parts, {
        noDisposition: i,
        extraHeaders: new Map([[i, ['Content-Disposition: form-data']]]),
      });
      return { body, contentType: type, label: `part ${i} without a name` };
    }
    case 'bad-header-line': {
      const i = pick(r.a);
      const lines = ['no colon here', ': empty name', 'X-\u00ff: \u0000', 'Content-Type', ' folded'];
      const line = lines[r.b % lines.length]!;
      const extra = new Map([[i, [line]]]);
      return {
        body: form(parts, { extraHeaders: extra }),
        contentType: type,
        label: `part ${i}: header ${JSON.stringify(line)}`,
      };
    }
    case 'many-headers': {
      const i = pick(r.a);
      const count = 10 + (r.b % 90);
      const extra = new Map([[i, Array.from({ length: count }, (_, k) => `X-H-${k}: v`)]]);
      return {
        body: form(parts, { extraHeaders: extra }),
        contentType: type,
        label: `part ${i}: ${count} headers`,
      };
    }
    case 'long-header': {
      const i = pick(r.a);
      const size = [200, 10_000, 100_000][r.b % 3]!;
      const extra = new Map([[i, [`X-Long: ${'v'.repeat(size)}`]]]);
      return {
        body: form(parts, { extraHeaders: extra }),
        contentType: type,
        label: `part ${i}: header of ${size} bytes`,
      };
    }
    case 'many-parts': {
      const count = [50, 499, 501, 601, 2_000][r.a % 5]!;
      const more = Array.from({ length: count }, (_, k) => ({ name: `f${k}`, data: Buffer.from('v') }));
      return { body: form([...parts, ...more]), contentType: type, label: `${count} more fields` };
    }
    case 'many-files': {
      const count = [20, 99, 101, 300][r.a % 4]!;
      const more = Array.from({ length: count }, (_, k) => ({
        name: `file${k}`,
        filename: `${k}.bin`,
        type: 'application/octet-stream',
        data: Buffer.from('x'),
      }));
      return { body: form([...parts, ...more]), contentType: type, label: `${count} more files` };
    }
    case 'huge-model': {
      const size = [1_000, 1_024, 1_025, 5_000, 200_000][r.a % 5]!;
      return {
        body: form(withPart(parts, 'model', Buffer.from(`gpt-${'x'.repeat(size - 4)}`))),
        contentType: type,
        label: `model of ${size} bytes`,
      };
    }
    case 'huge-file': {
      const size = SIZES[r.a % SIZES.length]!;
      const name = parts[fileIndex]?.name ?? 'file';
      return {
        body: form(withPart(parts, name, randomBytes(size, r.seed))),
        contentType: type,
        label: `file of ${size} bytes`,
      };
    }
    case 'missing-model':
      return {
        body: form(parts.filter((p) => p.name !== 'model')),
        contentType: type,
        label: 'no model field',
      };
    case 'dup-model': {
      const other = { name: 'model', data: Buffer.from(r.a % 2 === 0 ? 'claude-sonnet-5' : '') };
      return { body: form([...parts, other]), contentType: type, label: 'model twice' };
    }
    case 'model-as-file': {
      const moved = parts.map((p) =>
        p.name === 'model' ? { ...p, filename: 'model.txt', type: 'text/plain' } : p,
      );
      return { body: form(moved), contentType: type, label: 'model sent as a file' };
    }
    case 'bad-model-name': {
      const names = ['../x', 'gpt 4', '', 'a/b?c#d', '\u0000', 'é'.repeat(40), 'whisper-1\r\nx: y'];
      const name = names[r.b % names.length]!;
      return {
        body: form(withPart(parts, 'model', Buffer.from(name))),
        contentType: type,
        label: `model ${JSON.stringify(name)}`,
      };
    }
    default: {
      const m = commonMutation(r, valid, type, FORM_TYPES);
      return { ...m, contentType: m.contentType ?? type };
    }
  }
}

/** The bytes and headers of a recipe. `key` is the gateway's access key. */
export function buildCase(recipe: Recipe, key: string): BuiltCase {
  const route = ROUTES[recipe.route]!;
  const mutated = route.body === 'json' ? jsonMutation(recipe, route) : multipartMutation(recipe, route);
  const headers: [string, string][] = [];
  let target = route.path;
  const contentType = mutated.contentType ?? 'application/json';
  if (contentType !== '') headers.push(['content-type', contentType]);
  if (mutated.secondContentType !== undefined) headers.push(['content-type', mutated.secondContentType]);
  for (const [k, v] of Object.entries(route.headers ?? {})) headers.push([k, v]);
  switch (recipe.auth) {
    case 'bearer':
      headers.push(['authorization', `Bearer ${key}`]);
      break;
    case 'carrier':
      if (route.family === 'anthropic') headers.push(['x-api-key', key]);
      else if (route.family === 'gemini' && recipe.seed % 2 === 0) headers.push(['x-goog-api-key', key]);
      else if (route.family === 'gemini') target = `${route.path}?key=${encodeURIComponent(key)}`;
      else headers.push(['authorization', `bearer  ${key}`]);
      break;
    case 'wrong':
      if (route.family === 'anthropic') headers.push(['x-api-key', `${key}x`]);
      else headers.push(['authorization', `Bearer ${key.slice(0, -1)}`]);
      break;
    case 'malformed': {
      const values = ['Basic Zm9vOmJhcg==', 'Bearer', key, `Bearer ${key} extra`, 'Bearer \u00ff'];
      headers.push(['authorization', values[recipe.a % values.length]!]);
      break;
    }
    case 'none':
      break;
  }
  const missing = recipe.delivery.startsWith('short') ? 1 + (recipe.b % 5000) : 0;
  return { recipe, route, target, headers, body: mutated.body, missing, label: mutated.label };
}

export function hasValidKey(c: BuiltCase): boolean {
  return c.recipe.auth === 'bearer' || c.recipe.auth === 'carrier';
}

export interface Outcome {
  /** Undefined: the connection closed (or reset) before a whole status line. */
  readonly status: number | undefined;
  readonly body: Buffer;
  readonly ms: number;
  /** The client gave up waiting (`timeoutMs`). */
  readonly timedOut: boolean;
  /** A socket error the client saw (ECONNRESET, EPIPE, ECONNREFUSED). */
  readonly error: string | undefined;
}

/** Split a whole chunked body; undefined while incomplete. */
function dechunk(raw: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    if (eol < 0) return undefined;
    const size = Number.parseInt(raw.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) return Buffer.concat(parts);
    if (size === 0) return raw.indexOf('\r\n\r\n', eol - 2) >= 0 ? Buffer.concat(parts) : undefined;
    if (raw.length < eol + 2 + size + 2) return undefined;
    parts.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** The status and body of a whole response in `raw`; undefined while more is to come. */
function parseResponse(raw: Buffer, closed: boolean): { status: number; body: Buffer } | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = raw.subarray(0, end).toString('latin1');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  if (!Number.isInteger(status)) return undefined;
  const rest = raw.subarray(end + 4);
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
  if (length !== undefined) {
    return rest.length >= Number(length) ? { status, body: rest.subarray(0, Number(length)) } : undefined;
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const body = dechunk(rest);
    return body === undefined ? undefined : { status, body };
  }
  return closed ? { status, body: rest } : undefined;
}

/**
 * One case over a raw socket (`connection: close`): resolves once a whole response arrived, the
 * connection closed, or `timeoutMs` passed.
 */
export function sendCase(port: number, c: BuiltCase, timeoutMs: number): Promise<Outcome> {
  const started = performance.now();
  const chunked = c.recipe.delivery.startsWith('chunked');
  const lines = [`POST ${c.target} HTTP/1.1`, 'host: 127.0.0.1'];
  for (const [k, v] of c.headers) lines.push(`${k}: ${v}`);
  if (chunked) lines.push('transfer-encoding: chunked');
  else lines.push(`content-length: ${c.body.length + c.missing}`);
  lines.push('connection: close', '', '');
  const head = Buffer.from(lines.join('\r\n'), 'latin1');
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let raw = Buffer.alloc(0);
    let error: string | undefined;
    let done = false;
    const finish = (timedOut: boolean, closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const parsed = parseResponse(raw, closed || timedOut);
      resolve({
        status: parsed?.status,
        body: parsed?.body ?? Buffer.alloc(0),
        ms: performance.now() - started,
        timedOut,
        error,
      });
    };
    const timer = setTimeout(() => finish(true, false), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      raw = Buffer.concat([raw, chunk]);
      if (parseResponse(raw, false) !== undefined) finish(false, false);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.on('close', () => finish(false, true));
    socket.write(head);
    if (chunked) {
      // Two chunks, split where the seed says, so a chunk boundary falls anywhere in the body.
      const cut = c.body.length === 0 ? 0 : (c.recipe.seed >>> 0) % c.body.length;
      for (const piece of [c.body.subarray(0, cut), c.body.subarray(cut)]) {
        if (piece.length > 0)
          socket.write(
            Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]),
          );
      }
      if (c.recipe.delivery === 'chunked') socket.write('0\r\n\r\n');
    } else if (c.body.length > 0) {
      socket.write(c.body);
    }
    if (c.recipe.delivery.endsWith('halfclose')) socket.end();
  });
}

/** What is wrong with an error body in the family's shape, or undefined (test/proxy/hostile-fuzz.test.ts). */
export function familyErrorProblem(family: Family, status: number, body: Buffer): string | undefined {
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return `error body is not JSON: ${preview(body, 200)}`;
  }
  const error = json.error as Record<string, unknown> | undefined;
  if (typeof error !== 'object' || error === null) return `no error object: ${preview(body, 200)}`;
  if (typeof error.message !== 'string') return `error.message is not a string: ${preview(body, 200)}`;
  if (family === 'anthropic') {
    if (json.type !== 'error' || typeof error.type !== 'string')
      return `not Anthropic's shape: ${preview(body, 200)}`;
  } else if (family === 'gemini') {
    if (error.code !== status || typeof error.status !== 'string')
      return `not Gemini's shape: ${preview(body, 200)}`;
  } else if ((typeof error.code !== 'string' && error.code !== null) || typeof error.type !== 'string') {
    return `not OpenAI's shape: ${preview(body, 200)}`;
  }
  return undefined;
}

/** Whether the case asked the simulator to fail (a knob in the model name): only then may it be 502-504. */
function asksSimulatorToFail(c: BuiltCase): boolean {
  return /fail-(?:[45]\d\d|reset|hang|midstream)/i.test(c.body.toString('latin1'));
}

/** What is wrong with the gateway's answer to a case, or undefined when it is acceptable. */
export function judge(c: BuiltCase, o: Outcome): string | undefined {
  if (o.timedOut) return `no answer within ${Math.round(o.ms)} ms`;
  const halfClosed = c.recipe.delivery.endsWith('halfclose');
  const stalled = c.recipe.delivery.endsWith('stall');
  if (o.status === undefined) {
    // A client that half-closes inside a declared body is gone as far as HTTP goes: no answer is due.
    if (halfClosed) return undefined;
    // A refused body is discarded for up to LINGER_BYTES or LINGER_MS, then the connection is reset: a
    // client still writing may read the reset before the reply.
    const lingerSpent = c.body.length > LINGER_BYTES || o.ms >= LINGER_MS;
    if (lingerSpent && (o.error === 'EPIPE' || o.error === 'ECONNRESET')) return undefined;
    return `connection closed without an answer after ${Math.round(o.ms)} ms (${o.error ?? 'closed'})`;
  }
  if (o.status >= 500) {
    if ([502, 503, 504].includes(o.status) && asksSimulatorToFail(c)) return undefined;
    return `answered ${o.status}: ${preview(o.body, 300)}`;
  }
  // Node's parser reports a body cut short by the client's FIN as a parser error, which
  // proxy/client-errors.ts answers in the default family's shape, key or no key.
  if (halfClosed && o.status === 400 && o.body.includes('"malformed_request"')) {
    return familyErrorProblem('openai', o.status, o.body);
  }
  if (!hasValidKey(c)) {
    if (o.status !== 401) return `without a valid key answered ${o.status}: ${preview(o.body, 300)}`;
  } else if (stalled && o.status !== 408 && o.status !== 413) {
    return `a stalled body answered ${o.status}, not 408 or 413: ${preview(o.body, 300)}`;
  }
  return o.status >= 400 ? familyErrorProblem(c.route.family, o.status, o.body) : undefined;
}

export function preview(bytes: Buffer, max: number): string {
  const text = JSON.stringify(bytes.subarray(0, max).toString('latin1'));
  return bytes.length > max ? `${text}... (${bytes.length} bytes)` : text;
}

export interface CaseResult {
  readonly case: BuiltCase;
  readonly outcome: Outcome;
  readonly problem: string | undefined;
}

/** Runs recipes `concurrency` at a time; `onResult` sees each as it completes. */
export async function runRecipes(
  port: number,
  recipes: readonly Recipe[],
  key: string,
  opts: {
    concurrency: number;
    timeoutMs: number;
    onStart?: (c: BuiltCase) => void;
    onResult?: (r: CaseResult) => void;
  },
): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < recipes.length) {
      const c = buildCase(recipes[next++]!, key);
      opts.onStart?.(c);
      const outcome = await sendCase(port, c, opts.timeoutMs);
      const result = { case: c, outcome, problem: judge(c, outcome) };
      results.push(result);
      opts.onResult?.(result);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return results;
}

/** A case for a report: the recipe (replayable with buildCase) and the first bytes. */
export function describeCase(c: BuiltCase): string {
  const auth = hasValidKey(c) ? `key (${c.recipe.auth})` : `${c.recipe.auth} key`;
  const declared = c.missing > 0 ? `, ${c.missing} bytes declared but not sent` : '';
  return (
    `${c.route.name} [${auth}, ${c.recipe.delivery}${declared}] ${c.label}; recipe ${JSON.stringify(c.recipe)}; ` +
    `headers ${JSON.stringify(c.headers)}; body ${preview(c.body, 240)}`
  );
}

export interface FuzzGateway {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  /** Set once the process exits: its code and signal. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** Resolves once the process has exited. */
  readonly exited: Promise<void>;
  /** The last stderr bytes and the error-level log lines (pino JSON on stdout). */
  stderr(): string;
  errorLogs(): readonly string[];
  stop(): Promise<void>;
}

/** The `limits:` of the fuzzed gateway: bodies of 1 MiB, a stalled body given up after 200 ms. */
export const FUZZ_LIMITS =
  'limits: { max_body_bytes: 1048576, client_body_timeout_ms: 200, client_header_timeout_ms: 2000 }';

/**
 * `node proxy/cli.ts -c <dir>/router.yaml --no-sidecar` with the project's node and `env` (provider
 * base URLs and keys, the access key); resolves once it logs the address it listens on.
 */
export async function startFuzzGateway(
  repo: string,
  dir: string,
  env: Record<string, string>,
): Promise<FuzzGateway> {
  const config = join(dir, 'router.yaml');
  await writeFile(
    config,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${join(repo, 'deploy/config/providers')}`,
      `models: ${join(repo, 'deploy/config/models.yaml')}`,
      `pricing: ${join(repo, 'deploy/config/pricing.yaml')}`,
      'log: { level: info }',
      FUZZ_LIMITS,
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [join(repo, 'proxy/cli.ts'), '-c', config, '--no-sidecar'], {
    cwd: repo,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  const errors: string[] = [];
  let pending = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-16_000);
  });
  return new Promise((resolve, reject) => {
    let gateway: FuzzGateway | undefined;
    child.once('exit', (code, signal) => {
      if (gateway !== undefined) gateway.exit = { code, signal };
      else
        reject(new Error(`the gateway exited (${code ?? signal}) before listening: ${stderr.slice(-2000)}`));
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      let nl = pending.indexOf('\n');
      while (nl >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        nl = pending.indexOf('\n');
        // Only error and fatal lines (50, 60) are kept; access lines are many.
        if (/"level":[56]0/.test(line) && errors.length < 200) errors.push(line.slice(0, 4000));
        if (gateway === undefined && line.includes('"router listening"')) {
          const url = (JSON.parse(line) as { url: string }).url;
          gateway = {
            child,
            pid: child.pid ?? -1,
            port: Number(new URL(url).port),
            url,
            exit: undefined,
            exited,
            stderr: () => stderr,
            errorLogs: () => errors,
            async stop() {
              if (gateway?.exit !== undefined) return;
              child.kill('SIGTERM');
              await exited;
            },
          };
          resolve(gateway);
        }
      }
    });
  });
}

/** VmRSS of a process in KiB, from /proc (undefined once it is gone). */
export async function rssKb(pid: number): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  } catch {
    return undefined;
  }
}
