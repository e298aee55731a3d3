// Reading and checking request bodies: a size limit enforced while reading, JSON parsing, and the small
// JSON Schemas the wire families declare per api (compiled once with ajv) so that a wrong type is a 400
// that names the field. Only the fields the gateway itself relies on are checked; the upstream validates
// the rest.

import type { IncomingMessage } from 'node:http';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import busboy from 'busboy';
import { clip, GatewayError } from '../common/errors.ts';
import type { ApiName, JsonObject, WireFormat } from '../common/types.ts';
import { FAMILIES } from '../hooks/families/index.ts';
import { jsonDeeperThan } from './json-depth.ts';

/** Requests whose body stopped arriving for longer than the body timeout (readBody failed it with 408). */
const TIMED_OUT = new WeakSet<IncomingMessage>();

/** Whether readBody gave up on this request's body for silence: its connection cannot be reused. */
export function bodyTimedOut(req: IncomingMessage): boolean {
  return TIMED_OUT.has(req);
}

/** A body being read: its bytes once whole, and a way to stop reading (the request was refused). */
export interface BodyRead {
  readonly bytes: Promise<Buffer>;
  /** Stop reading; `bytes` then never settles (its reader has gone away). */
  cancel(): void;
}

/**
 * Read the whole body, refusing more than `limit` bytes (413) before buffering them, and giving up
 * (408) when no byte arrives for `idleTimeoutMs` (0: wait forever), also when the body is shorter than
 * its Content-Length.
 */
export function readBody(req: IncomingMessage, limit: number, idleTimeoutMs = 0): Promise<Buffer> {
  return startBodyRead(req, limit, idleTimeoutMs).bytes;
}

/**
 * readBody that can be stopped: the gateway reads a body while it checks the access key, and stops when
 * the key is refused (what the client still sends is then discarded by the lingering close).
 */
export function startBodyRead(req: IncomingMessage, limit: number, idleTimeoutMs = 0): BodyRead {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    const refused = Promise.reject(
      new GatewayError('request_too_large', `The request body exceeds ${limit} bytes`),
    );
    // Read only after the key is checked: not an unhandled rejection meanwhile.
    refused.catch(() => undefined);
    return { bytes: refused, cancel: () => undefined };
  }
  let stop: () => void = () => undefined;
  const bytes = new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer =
      idleTimeoutMs > 0
        ? setTimeout(() => {
            TIMED_OUT.add(req);
            req.off('data', onData);
            reject(
              new GatewayError('request_timeout', `No request body bytes arrived for ${idleTimeoutMs} ms`),
            );
          }, idleTimeoutMs)
        : undefined;
    const onData = (chunk: Buffer) => {
      timer?.refresh();
      size += chunk.length;
      if (size > limit) {
        stop();
        reject(new GatewayError('request_too_large', `The request body exceeds ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      // The listeners stay on the request object, which may outlive the request (proxy-request.ts):
      // they must not keep the chunks.
      stop();
      resolve(body);
    };
    const onError = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    stop = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      chunks.length = 0;
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
  bytes.catch(() => undefined);
  return { bytes, cancel: () => stop() };
}

const ajv = new Ajv({ allErrors: false, strict: false });
/** Each family's body validators by api, compiled once from the schemas the families declare. */
const VALIDATORS = new Map<WireFormat, ReadonlyMap<ApiName, ValidateFunction>>(
  FAMILIES.map((family) => [
    family.name,
    new Map(
      Object.entries(family.bodySchemas ?? {}).map(([api, schema]) => [api as ApiName, ajv.compile(schema)]),
    ),
  ]),
);

/** Parse and check a JSON body of a family's api; throws a 400 naming the field. */
export function parseJsonBody(format: WireFormat, api: ApiName, raw: Buffer, maxDepth: number): JsonObject {
  if (jsonDeeperThan(raw, maxDepth)) {
    throw new GatewayError(
      'json_too_deep',
      `The request body nests arrays and objects deeper than ${maxDepth} levels`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new GatewayError('invalid_json');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new GatewayError('invalid_json', 'The request body must be a JSON object');
  }
  const validate = VALIDATORS.get(format)?.get(api);
  if (validate !== undefined && !validate(value)) {
    const first = validate.errors?.[0];
    if (first !== undefined) throw schemaError(first);
  }
  return value as JsonObject;
}

function schemaError(err: ErrorObject): GatewayError {
  let field = err.instancePath
    .split('/')
    .slice(1)
    .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : `.${seg}`))
    .join('')
    .replace(/^\./, '');
  if (err.keyword === 'required') {
    const missing = (err.params as { missingProperty: string }).missingProperty;
    field = field === '' ? missing : `${field}.${missing}`;
    return new GatewayError('invalid_parameter', `Missing required parameter: '${field}'`, field);
  }
  const where = field === '' ? 'The request body' : `'${field}'`;
  return new GatewayError(
    'invalid_parameter',
    `Invalid value for ${where}: ${err.message ?? 'invalid'}`,
    field,
  );
}

/** Bounds on a multipart form's parts (its bytes are bounded by limits.max_body_bytes). */
const MULTIPART_LIMITS = { fieldSize: 1024, fields: 500, files: 100, parts: 600, headerPairs: 32 };

/**
 * The `model` (and `stream`) fields of a multipart form, read without copying files. A form that ends
 * early, breaks its framing or exceeds the bounds is a 400 naming the problem; every stream of the
 * parser has an error listener, since an unheard stream error would end the process.
 */
export function readMultipartFields(
  contentType: string,
  raw: Buffer,
): Promise<{ model: string | undefined; stream: boolean }> {
  return new Promise((resolve, reject) => {
    let model: string | undefined;
    let stream = false;
    let settled = false;
    const fail = (problem: string) => {
      if (settled) return;
      settled = true;
      reject(new GatewayError('invalid_parameter', `Malformed multipart/form-data body: ${problem}`));
    };
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: { 'content-type': contentType }, limits: MULTIPART_LIMITS });
    } catch {
      reject(
        new GatewayError('unsupported_media_type', 'Expected a multipart/form-data body with a boundary'),
      );
      return;
    }
    parser.on('field', (name, value, info) => {
      // Other fields are forwarded as sent; only those the gateway reads must be whole.
      if (name === 'model') {
        if (info.valueTruncated)
          return fail(`the field 'model' is longer than ${MULTIPART_LIMITS.fieldSize} bytes`);
        model = value;
      } else if (name === 'stream') stream = value === 'true';
    });
    parser.on('file', (_name, file) => {
      file.on('error', (err: Error) => fail(problemOf(err)));
      file.resume();
    });
    parser.on('partsLimit', () => fail(`more than ${MULTIPART_LIMITS.parts} parts`));
    parser.on('filesLimit', () => fail(`more than ${MULTIPART_LIMITS.files} files`));
    parser.on('fieldsLimit', () => fail(`more than ${MULTIPART_LIMITS.fields} fields`));
    parser.on('error', (err: Error) => fail(problemOf(err)));
    parser.on('close', () => {
      if (settled) return;
      settled = true;
      resolve({ model, stream });
    });
    parser.end(raw);
  });
}

/** busboy's own words for a broken form ("Unexpected end of form", "Malformed part header"). */
function problemOf(err: Error): string {
  const text = err.message.replace(/[.\s]+$/, '');
  return text === '' ? 'unreadable form' : clip(text.charAt(0).toLowerCase() + text.slice(1));
}
