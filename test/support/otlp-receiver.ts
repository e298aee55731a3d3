// Test support: an OTLP/HTTP trace receiver on loopback, as an OpenTelemetry Collector's otlphttp receiver
// answers (POST /v1/traces, 200 with an empty export response). Exports in either encoding (http/json,
// http/protobuf) are decoded into spans; the raw bodies are kept too.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeTraceRequest } from './otlp-protobuf.ts';

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};
type KeyValue = { key: string; value: AnyValue };

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client (OTLP SpanKind). */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  /** 0 unset, 1 ok, 2 error. */
  readonly status: number;
  readonly resource: Readonly<Record<string, unknown>>;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Raw bodies with their content type, every export. */
  readonly exports: { contentType: string; body: Buffer }[];
  /** Resolves once `predicate` holds over the spans received so far (checked on every export). */
  waitFor(predicate: (spans: readonly ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function decodeValue(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(decodeValue);
  return undefined;
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = decodeValue(kv.value);
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const exports: { contentType: string; body: Buffer }[] = [];
  let waiters: (() => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = req.headers['content-type'] ?? '';
      exports.push({ contentType, body });
      const isJson = contentType.includes('json');
      if (req.url === '/v1/traces') {
        const parsed = (isJson ? JSON.parse(body.toString('utf8')) : decodeTraceRequest(body)) as {
          resourceSpans?: {
            resource?: { attributes?: KeyValue[] };
            scopeSpans?: {
              spans?: {
                traceId: string;
                spanId: string;
                parentSpanId?: string;
                name: string;
                kind: number;
                attributes?: KeyValue[];
                status?: { code?: number };
              }[];
            }[];
          }[];
        };
        for (const rs of parsed.resourceSpans ?? []) {
          const resource = attributesOf(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                attributes: attributesOf(s.attributes),
                status: s.status?.code ?? 0,
                resource,
              });
        }
      }
      if (isJson) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      } else {
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
        res.end();
      }
      const wake = waiters;
      waiters = [];
      for (const w of wake) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    exports,
    async waitFor(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`OTLP receiver: timed out; ${spans.length} spans received`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
