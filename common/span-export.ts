// Batches ended spans and sends them to an OTLP/HTTP endpoint (docs/operations.md "Tracing"), as the
// SDK's BatchSpanProcessor would: a batch goes when 512 spans are waiting or `delayMs` after the first,
// encoding runs off the call that ended the span, at most 2048 spans wait (the rest are dropped and
// counted), one export at a time, retried on 429/502/503/504 and connection failures. A collector that
// is away costs dropped spans, never a request.

import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { OtlpEncoder } from './otlp-encoding.ts';
import type { RecordedSpan } from './trace-span.ts';

const BATCH = 512;
const MAX_QUEUE = 2048;
const TIMEOUT_MS = 10_000;
const RETRIES = 2;
const RETRY_DELAY_MS = 1000;

export interface SpanExportOptions {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly encoder: OtlpEncoder;
  readonly delayMs: number;
  readonly logger?: Logger;
  /** Wait before the first retry, doubled for the next (default 1000 ms). */
  readonly retryDelayMs?: number;
}

export interface SpanExportCounters {
  exported: number;
  dropped: number;
  failedExports: number;
}

export class SpanExport {
  readonly counters: SpanExportCounters = { exported: 0, dropped: 0, failedExports: 0 };
  readonly #opts: SpanExportOptions;
  readonly #agent = new Agent({ connections: 2 });
  #queue: RecordedSpan[] = [];
  #timer: NodeJS.Timeout | undefined;
  #soon = false;
  #running: Promise<void> | undefined;
  #failing = false;
  #closed = false;

  constructor(opts: SpanExportOptions) {
    this.#opts = opts;
  }

  /** An ended span; exported later. */
  add(span: RecordedSpan): void {
    if (this.#closed || this.#queue.length >= MAX_QUEUE) {
      this.counters.dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= BATCH) {
      if (!this.#soon) {
        this.#soon = true;
        setImmediate(() => {
          this.#soon = false;
          this.#start();
        });
      }
    } else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.#start(), this.#opts.delayMs);
      this.#timer.unref();
    }
  }

  /** Exports everything waiting (within `boundMs`), then closes the connections. */
  async shutdown(boundMs = 5000): Promise<void> {
    this.#closed = true;
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#drain(),
      new Promise<void>((resolve) => {
        bound = setTimeout(resolve, boundMs);
      }),
    ]);
    clearTimeout(bound);
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#agent.destroy().catch(() => undefined);
  }

  async #drain(): Promise<void> {
    while (this.#running !== undefined || this.#queue.length > 0) {
      this.#start();
      await this.#running;
    }
  }

  #start(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
      if (this.#queue.length >= BATCH) this.#start();
      else if (this.#queue.length > 0 && this.#timer === undefined && !this.#closed) {
        this.#timer = setTimeout(() => this.#start(), this.#opts.delayMs);
        this.#timer.unref();
      }
    });
  }

  async #run(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.length <= BATCH ? this.#queue : this.#queue.slice(0, BATCH);
      this.#queue = this.#queue.length <= BATCH ? [] : this.#queue.slice(BATCH);
      const body = this.#opts.encoder.encode(batch);
      if (await this.#send(body)) this.counters.exported += batch.length;
      else {
        this.counters.failedExports++;
        this.counters.dropped += batch.length;
      }
      if (this.#queue.length < BATCH) return;
    }
  }

  async #send(body: Uint8Array | string): Promise<boolean> {
    const { url, headers, encoder, logger } = this.#opts;
    let problem = '';
    for (let attempt = 0; attempt <= RETRIES; attempt++) {
      if (attempt > 0) {
        const delay = (this.#opts.retryDelayMs ?? RETRY_DELAY_MS) * 2 ** (attempt - 1);
        await new Promise((r) => setTimeout(r, delay).unref());
      }
      try {
        const res = await request(url, {
          method: 'POST',
          headers: { ...headers, 'content-type': encoder.contentType },
          body,
          dispatcher: this.#agent,
          headersTimeout: TIMEOUT_MS,
          bodyTimeout: TIMEOUT_MS,
        });
        await res.body.dump();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          if (this.#failing) logger?.info('trace export recovered');
          this.#failing = false;
          return true;
        }
        problem = `HTTP ${res.statusCode}`;
        if (![429, 502, 503, 504].includes(res.statusCode)) break;
      } catch (err) {
        problem = err instanceof Error ? err.message : String(err);
      }
    }
    if (!this.#failing)
      logger?.warn({ err: problem }, 'trace export failed; spans dropped until it recovers');
    this.#failing = true;
    return false;
  }
}
