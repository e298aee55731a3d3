// The OpenTelemetry GenAI semantic conventions' metrics (gen_ai.client.token.usage and the three
// gen_ai.server.* histograms) in their Prometheus form, with the conventions' bucket boundaries. Label
// values stay bounded: provider names and model ids come from the configuration (a model the registry
// does not list by its exact id is `other`), operations from hooks/families/operations.ts.

import type client from 'prom-client';
import { ERROR_CATALOGUE } from '../common/errors.ts';
import type { ApiName, RequestContext } from '../common/types.ts';
import { operationName } from '../hooks/families/index.ts';
import { FastHistogram } from './fast-metrics.ts';

export const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
export const TIME_TO_FIRST_TOKEN_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
export const TIME_PER_OUTPUT_TOKEN_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
];
export const REQUEST_DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/** The model label for everything the registry does not name exactly (patterns, unknown ids). */
export const OTHER_MODEL = 'other';

const LABELS = ['gen_ai_provider_name', 'gen_ai_request_model', 'gen_ai_operation_name'] as const;

interface Observer {
  observe(v: number): void;
}

/** The GenAI series of one provider, model, operation and error type. */
export interface GenAiSeries {
  readonly inputTokens: Observer;
  readonly outputTokens: Observer;
  readonly timeToFirstToken: Observer;
  readonly timePerOutputToken: Observer;
  readonly duration: Observer;
}

/** A series made on its first observation, so label sets that never see one print nothing. */
function lazy(make: () => Observer): Observer {
  let series: Observer | undefined;
  return {
    observe(v) {
      series ??= make();
      series.observe(v);
    },
  };
}

export interface GenAiMetrics {
  series(provider: string, api: ApiName, model: string, errorType: string): GenAiSeries;
}

export function createGenAiMetrics(registry: client.Registry): GenAiMetrics {
  const tokens = new FastHistogram(
    registry,
    'gen_ai_client_token_usage',
    'Tokens per request (gen_ai.client.token.usage), by token type (input/output)',
    [...LABELS, 'gen_ai_token_type'],
    TOKEN_BUCKETS,
  );
  const ttft = new FastHistogram(
    registry,
    'gen_ai_server_time_to_first_token_seconds',
    'Time from request arrival to the first generated text relayed to the client, successful streams',
    LABELS,
    TIME_TO_FIRST_TOKEN_BUCKETS,
  );
  const tpot = new FastHistogram(
    registry,
    'gen_ai_server_time_per_output_token_seconds',
    'Time per output token after the first, successful streams with more than one output token',
    LABELS,
    TIME_PER_OUTPUT_TOKEN_BUCKETS,
  );
  const duration = new FastHistogram(
    registry,
    'gen_ai_server_request_duration_seconds',
    'Time from request arrival to the end of the reply, by error type (empty when it succeeded)',
    [...LABELS, 'error_type'],
    REQUEST_DURATION_BUCKETS,
  );
  return {
    series(provider, api, model, errorType) {
      const operation = operationName(api);
      return {
        inputTokens: lazy(() => tokens.series(provider, model, operation, 'input')),
        outputTokens: lazy(() => tokens.series(provider, model, operation, 'output')),
        timeToFirstToken: lazy(() => ttft.series(provider, model, operation)),
        timePerOutputToken: lazy(() => tpot.series(provider, model, operation)),
        duration: duration.series(provider, model, operation, errorType),
      };
    },
  };
}

/** The model label: the requested id when the registry lists it exactly, `other` otherwise. */
export function modelLabel(model: string | undefined, known: ReadonlySet<string>): string {
  return model !== undefined && known.has(model) ? model : OTHER_MODEL;
}

/**
 * error.type of a finished request: '' when it succeeded, else the HTTP status (4xx/5xx), the gateway's
 * error code of a stream that failed after its head, or `client_aborted`.
 */
export function errorTypeOf(ctx: RequestContext): string {
  if (ctx.status >= 400) return String(ctx.status);
  if (ctx.error !== undefined)
    return Object.hasOwn(ERROR_CATALOGUE, ctx.error.code) ? ctx.error.code : '_OTHER';
  if (ctx.clientAborted) return 'client_aborted';
  return ctx.status === 0 ? '_OTHER' : '';
}

/** Records one finished request into its series (`errorType` from errorTypeOf). */
export function observeGenAi(
  s: GenAiSeries,
  ctx: RequestContext,
  durationMs: number,
  errorType: string,
): void {
  s.duration.observe(durationMs / 1000);
  const usage = ctx.usage;
  // A zero count is no observation: embeddings have no output tokens, audio may have none at all.
  if (usage !== undefined) {
    if (usage.inputTokens > 0) s.inputTokens.observe(usage.inputTokens);
    if (usage.outputTokens > 0) s.outputTokens.observe(usage.outputTokens);
  }
  const first = ctx.firstTokenMs;
  if (errorType !== '' || !ctx.stream || first === undefined) return;
  s.timeToFirstToken.observe(first / 1000);
  const output = usage?.outputTokens ?? 0;
  if (output > 1) s.timePerOutputToken.observe((durationMs - first) / (output - 1) / 1000);
}
