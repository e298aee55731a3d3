// The end of one request as one object, created with the request: it settles usage, writes the access
// log line, observes the metrics and runs the onComplete hooks exactly once, however the request ends
// (served, refused, failed or abandoned by the client).

import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { endOfTurn } from '../common/turn-batch.ts';
import { runOnComplete } from './pipeline.ts';
import type { Context } from './request-context.ts';
import type { RuleHooks, Runtime } from './runtime.ts';

export class RequestCompletion {
  readonly #rt: Runtime;
  readonly #ctx: Context;
  #hooks: RuleHooks | undefined = undefined;
  #done: Promise<void> | undefined = undefined;

  constructor(rt: Runtime, ctx: Context) {
    this.#rt = rt;
    this.#ctx = ctx;
  }

  /** The rule chosen for the request: its onComplete hooks run instead of the gateway's own list. */
  useRule(hooks: RuleHooks): void {
    this.#hooks = hooks;
  }

  /**
   * billing.interrupted_stream: finish_upstream: how long a stream whose client left is read on for its
   * final usage; undefined when it stops at once.
   */
  get readOnMs(): number | undefined {
    const billing = this.#rt.config.billing;
    return billing.enabled && billing.interruptedStream === 'finish_upstream'
      ? billing.interruptedStreamMaxMs
      : undefined;
  }

  /** Keeps how to stop a stream read on after its client left, for a shutdown (UpstreamClient.adopt). */
  adoptOrphan(stop: () => void): () => void {
    return this.#rt.upstream.adopt(stop);
  }

  /** Whether the request has completed (or begun to). */
  get started(): boolean {
    return this.#done !== undefined;
  }

  /**
   * Completes the request unless that happened already. Returns the promise that its usage event is on
   * record when the queue batches its writes (the outbox writes once per event-loop turn): the reply's
   * last byte must wait for it.
   */
  complete(): Promise<void> | undefined {
    this.#done ??= finish(this.#rt, this.#ctx, this.#hooks);
    return this.#rt.recorded();
  }

  /**
   * Sends the reply's last bytes once the request is complete and its usage event on record, and no
   * sooner than the event-loop turn's check phase: the replies completed in one turn end together, which
   * under load costs less CPU per request than ending each inside its upstream reply's callback
   * (docs/benchmarks.md section 10).
   */
  async endReply(res: ServerResponse, last?: string | Buffer): Promise<void> {
    await (this.complete() ?? endOfTurn());
    const hold = this.#ctx.replyHold;
    if (hold !== undefined) await hold;
    res.end(last);
  }

  /** Completes the request if nothing did, and waits for its onComplete hooks. */
  async settled(): Promise<void> {
    this.complete();
    await this.#done;
  }
}

async function finish(rt: Runtime, ctx: Context, hooks: RuleHooks | undefined): Promise<void> {
  const endedAt = performance.now();
  const durationMs = endedAt - ctx.startedAt;
  // Not awaited when settled at once: the usage event must be queued before recorded() is asked.
  const settling = rt.settle(ctx);
  if (settling !== undefined) await settling;
  if (rt.log.isLevelEnabled('info')) {
    ctx.log.info(
      {
        api: ctx.api,
        provider: ctx.provider,
        model: ctx.model,
        stream: ctx.stream,
        status: ctx.status,
        durationMs: Math.round(durationMs * 1000) / 1000,
        upstreamTtfbMs:
          ctx.upstreamTtfbMs === undefined ? undefined : Math.round(ctx.upstreamTtfbMs * 1000) / 1000,
        aborted: ctx.clientAborted || undefined,
        endReason: ctx.endReason,
        error: ctx.error?.code,
      },
      'request',
    );
  }
  rt.observe(ctx, durationMs);
  ctx.trace?.finish(ctx, endedAt);
  await runOnComplete(hooks === undefined ? rt.completeHooks : hooks.complete, ctx);
}
