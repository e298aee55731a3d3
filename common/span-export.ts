// Batches ended spans and sends them to an OTLP/HTTP endpoint (docs/operations.md "Tracing"), as the
// SDK's BatchSpanProcessor would: a batch goes when 512 spans are waiting or `delayMs` after the first,
// at most 2048 spans wait (the rest are dropped and counted), one export at a time, retried on
// 429/502/503/504 and connection failures. A collector that is away costs dropped spans, never a request.

import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import { backoffDelay } from './backoff.ts';
import { errorText } from './errors.ts';
import type { OtlpBatch, OtlpEncoder } from './otlp-encoding.ts';
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

/** The counters of a process without a tracer. */
export const NO_SPANS: Readonly<SpanExportCounters> = { exported: 0, dropped: 0, failedExports: 0 };

export class SpanExport {
  readonly counters: SpanExportCounters = { exported: 0, dropped: 0, failedExports: 0 };
  readonly #opts: SpanExportOptions;
  readonly #agent = new Agent({ connections: 2 });
  /** The batch spans are encoded into as they end; then sealed batches, oldest first. */
  #open: OtlpBatch | undefined;
  #sealed: { batch: OtlpBatch; body: Uint8Array | string; count: number }[] = [];
  /** Spans in the open and the sealed batches. */
  #waiting = 0;
  #timer: NodeJS.Timeout | undefined;
  #soon = false;
  #running: Promise<void> | undefined;
  #failing = false;
  #closed = false;

  constructor(opts: SpanExportOptions) {
    this.#opts = opts;
  }

  /**
   * An ended span: encoded now, so that nothing of it outlives the request (a span kept until its
   * export would live through garbage collections and be promoted), exported later.
   */
  add(span: RecordedSpan): void {
    if (this.#closed || this.#waiting >= MAX_QUEUE) {
      this.counters.dropped++;
      return;
    }
    this.#open ??= this.#opts.encoder.open();
    this.#open.add(span);
    this.#waiting++;
    if (this.#open.count >= BATCH) {
      this.#seal();
      if (!this.#soon) {
        this.#soon = true;
        setImmediate(() => {
          this.#soon = false;
          this.#start(false);
        });
      }
    } else if (this.#timer === undefined) {
      this.#timer = setTimeout(() => this.#start(true), this.#opts.delayMs);
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
    while (this.#running !== undefined || this.#waiting > 0) {
      this.#start(true);
      await this.#running;
    }
  }

  #seal(): void {
    const open = this.#open;
    if (open === undefined || open.count === 0) return;
    this.#open = undefined;
    this.#sealed.push({ batch: open, body: open.finish(), count: open.count });
  }

  /** `all`: the open batch goes too (its delay is up, or the process stops). */
  #start(all: boolean): void {
    if (all) {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#seal();
    }
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
      if (this.#sealed.length > 0) this.#start(false);
      else if (this.#open !== undefined && this.#timer === undefined && !this.#closed) {
        this.#timer = setTimeout(() => this.#start(true), this.#opts.delayMs);
        this.#timer.unref();
      }
    });
  }

  async #run(): Promise<void> {
    for (let batch = this.#sealed.shift(); batch !== undefined; batch = this.#sealed.shift()) {
      if (await this.#send(batch.body)) this.counters.exported += batch.count;
      else {
        this.counters.failedExports++;
        this.counters.dropped += batch.count;
      }
      this.#waiting -= batch.count;
      batch.batch.release();
    }
  }

  async #send(body: Uint8Array | string): Promise<boolean> {
    const { url, headers, encoder, logger } = this.#opts;
    let problem = '';
    for (let attempt = 0; attempt <= RETRIES; attempt++) {
      if (attempt > 0) {
        const delay = backoffDelay(
          attempt,
          this.#opts.retryDelayMs ?? RETRY_DELAY_MS,
          Number.POSITIVE_INFINITY,
        );
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
        problem = errorText(err);
      }
    }
    if (!this.#failing)
      logger?.warn({ err: problem }, 'trace export failed; spans dropped until it recovers');
    this.#failing = true;
    return false;
  }
}
