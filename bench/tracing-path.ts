// `node bench/tracing-path.ts [--requests 100000] [--rounds 7]`: the tracing work of one sampled chat
// request, in isolation: the request's trace (proxy/request-trace.ts) started, its attempt span, the
// reply's facts read, both spans ended, encoded to OTLP protobuf and exported to a sink in a child
// process (bench/lib/otlp-sink.ts), at sampling 1.0. Prints the median CPU time of this process (not the
// sink's) per request over the rounds, and the bytes exported per span. It answers "did this change make tracing cheaper" in seconds, where
// `bench/ab.ts --modes off,traced` needs minutes and moves by more than such a change; what tracing costs
// a whole request is section 10 of docs/benchmarks.md.

import { fork } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { openTracing } from '../common/tracing.ts';
import type { JsonValue, RequestContext, UpstreamRequest } from '../common/types.ts';
import { RequestTrace } from '../proxy/request-trace.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';

interface SinkMessage {
  readonly url?: string;
  readonly bytes?: number;
}

async function sinkProcess(): Promise<void> {
  const sink = await startOtlpSink();
  process.send?.({ url: sink.url } satisfies SinkMessage);
  process.on('message', () => process.send?.({ bytes: sink.exportedBytes() } satisfies SinkMessage));
}

const BODY = {
  model: 'gpt-5.4-mini',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 64,
  temperature: 0.5,
};
const REPLY: JsonValue = {
  id: 'chatcmpl-bench-0001',
  object: 'chat.completion',
  model: 'gpt-5.4-mini-2026-01-01',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 3 },
};
const REQ = {
  headers: { host: 'gateway', 'content-type': 'application/json' },
} as unknown as IncomingMessage;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { requests: { type: 'string', default: '100000' }, rounds: { type: 'string', default: '7' } },
  });
  const requests = Number(values.requests);
  const child = fork(fileURLToPath(import.meta.url), ['--sink'], { stdio: 'inherit' });
  const ask = () =>
    new Promise<SinkMessage>((resolve) => child.once('message', (m) => resolve(m as SinkMessage)));
  const { url } = await ask();
  const tracing = openTracing({
    url: `${url}/v1/traces`,
    protocol: 'http/protobuf',
    headers: {},
    sampler: 'always_on',
    samplerArg: 1,
    exportDelayMs: 1000,
    serviceName: 'bench',
    resourceAttributes: {},
  });
  const one = (i: number): void => {
    const ctx = {
      startedAt: performance.now(),
      method: 'POST',
      api: 'chat',
      path: '/v1/chat/completions',
      id: `req-${i}`,
      clientFormat: 'openai',
      model: 'gpt-5.4-mini',
      stream: false,
      status: 0,
      clientAborted: false,
    } as unknown as RequestContext & Record<string, unknown>;
    const trace = new RequestTrace(tracing, ctx, REQ, '/v1/chat/completions');
    const upstream = {
      method: 'POST',
      origin: 'http://127.0.0.1:8080',
      headers: { 'content-type': 'application/json' },
    } as unknown as UpstreamRequest;
    trace.attempt(ctx, 'openai', upstream, performance.now());
    trace.reply('openai', REPLY);
    Object.assign(ctx, {
      provider: 'openai',
      status: 200,
      body: BODY,
      usage: { inputTokens: 12 + (i & 7), outputTokens: 3 },
      usageStage: 'upstream',
      principal: { subjectId: 'subject-1' },
      firstTokenMs: 1.25 + (i & 3),
    });
    trace.finish(ctx, performance.now());
  };
  const perRequest: number[] = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < requests; i++) {
      one(i);
      // A turn of the event loop now and then, as a server has: the exports go out in them.
      if ((i & 15) === 15) await new Promise((r) => setImmediate(r));
    }
    const used = process.cpuUsage(t0);
    perRequest.push(((used.user + used.system) * 1000) / requests);
  }
  await tracing.shutdown();
  child.send('bytes');
  const { bytes = 0 } = await ask();
  child.kill();
  const sorted = [...perRequest].sort((a, b) => a - b);
  console.log(`rounds (CPU ns per request): ${perRequest.map((n) => n.toFixed(0)).join(', ')}`);
  console.log(
    `median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ns of CPU per request; ${(bytes / (2 * requests * perRequest.length)).toFixed(0)} bytes exported per span (fewer when the exporter dropped spans: at most 2,048 wait)`,
  );
}

if (process.argv.includes('--sink')) await sinkProcess();
else await main();
