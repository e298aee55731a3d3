// GET /metrics of the gateway after known traffic: requests by provider / api / status / stream, the
// latency and upstream time-to-first-byte histograms, tokens metered (equal to what the upstream
// reported), active streams while one is in flight, usage events queued; the GenAI semantic-convention
// histograms with their buckets, labels and model rule.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

let stack: Stack;

before(async () => {
  stack = await startStack({
    providers: { pacer: simProvider('pacer') },
    extraYaml: `billing:
  enabled: true
  base_url: http://127.0.0.1:9
  project_id: p
  api_key: billing-secret
  extractor_rule_set_id: r
  outbox_dir: ./outbox
`,
  });
});

after(() => stack?.close());

async function scrape(): Promise<string> {
  const res = await fetch(`${stack.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** Value of one series (`name{labels}` exactly as prom-client prints it), or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

function chat(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'count my tokens please' }], ...body }),
  });
}

test('counters and histograms after known traffic', async () => {
  const usage = { input: 0, output: 0 };
  for (let i = 0; i < 2; i++) {
    const res = await chat({ model: 'gpt-4o-mini' });
    assert.equal(res.status, 200);
    const u = ((await res.json()) as { usage: Usage }).usage;
    usage.input += u.prompt_tokens;
    usage.output += u.completion_tokens;
  }
  const refused = await chat({ model: 'sim-fail-429' }, { 'x-router-provider': 'openai' });
  assert.equal(refused.status, 429);
  await refused.arrayBuffer();

  // A paced stream: the active-streams gauge is 1 while it is in flight, 0 after.
  const stream = await chat(
    { model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true } },
    { 'x-router-provider': 'pacer', 'x-sim-chunks': '4', 'x-sim-chunk-delay-ms': '50' },
  );
  assert.equal(stream.status, 200);
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  assert.equal(sample(await scrape(), 'router_active_streams'), 1);
  for (let next = await reader.read(); !next.done; next = await reader.read())
    text += new TextDecoder().decode(next.value);
  const usageChunk = text
    .split('\n\n')
    .map((e) => e.replace(/^data: /, ''))
    .filter((e) => e.startsWith('{'))
    .map((e) => JSON.parse(e) as { usage?: Usage | null })
    .find((c) => c.usage);
  assert.ok(usageChunk?.usage);
  const streamUsage = usageChunk.usage;

  const m = await scrape();
  assert.equal(sample(m, 'router_active_streams'), 0);
  assert.equal(
    sample(m, 'router_requests_total{provider="openai",api="chat.completions",status="200",stream="false"}'),
    2,
  );
  assert.equal(
    sample(m, 'router_requests_total{provider="openai",api="chat.completions",status="429",stream="false"}'),
    1,
  );
  assert.equal(
    sample(m, 'router_requests_total{provider="pacer",api="chat.completions",status="200",stream="true"}'),
    1,
  );
  assert.equal(sample(m, 'router_request_duration_seconds_count{api="chat.completions",stream="false"}'), 3);
  assert.equal(sample(m, 'router_request_duration_seconds_count{api="chat.completions",stream="true"}'), 1);
  // The stream lasted at least its three pauses.
  assert.ok(
    (sample(m, 'router_request_duration_seconds_sum{api="chat.completions",stream="true"}') ?? 0) >= 0.15,
  );
  assert.equal(
    sample(m, 'router_request_duration_seconds_bucket{le="+Inf",api="chat.completions",stream="false"}'),
    3,
  );
  assert.equal(sample(m, 'router_upstream_ttfb_seconds_count{provider="openai"}'), 3);
  assert.equal(sample(m, 'router_upstream_ttfb_seconds_count{provider="pacer"}'), 1);
  assert.equal(
    sample(m, 'router_tokens_total{provider="openai",direction="input",stage="upstream"}'),
    usage.input,
  );
  assert.equal(
    sample(m, 'router_tokens_total{provider="openai",direction="output",stage="upstream"}'),
    usage.output,
  );
  assert.equal(
    sample(m, 'router_tokens_total{provider="pacer",direction="input",stage="upstream"}'),
    streamUsage.prompt_tokens,
  );
  assert.equal(
    sample(m, 'router_tokens_total{provider="pacer",direction="output",stage="upstream"}'),
    streamUsage.completion_tokens,
  );
  assert.ok((sample(m, 'router_billing_events_total{result="queued"}') ?? 0) >= 3);
  for (const name of ['router_balance_checks_total', 'router_store_errors_total']) {
    assert.ok(m.includes(`# TYPE ${name} counter`), `${name} is declared`);
  }
  // The default process metrics under their standard names (stock Node.js dashboards).
  for (const name of [
    'process_cpu_seconds_total',
    'process_resident_memory_bytes',
    'nodejs_eventloop_lag_seconds',
  ])
    assert.ok(m.includes(`\n${name} `), `${name} is served`);
  assert.ok(!m.includes('router_process_') && !m.includes('router_nodejs_'));
  // Nothing secret or client-chosen leaks into label values.
  assert.ok(!m.includes(ACCESS_KEY) && !m.includes('billing-secret') && !m.includes('count my tokens'));
});

test('unknown endpoints and health probes are not counted as proxied requests', async () => {
  const before = await scrape();
  await (await fetch(`${stack.url}/healthz`)).arrayBuffer();
  await (await fetch(`${stack.url}/nope`)).arrayBuffer();
  const after = await scrape();
  const total = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith('router_requests_total{'))
      .reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
  assert.equal(total(after), total(before));
});

/** Series text of a GenAI histogram's _count/_sum (labels in prom-client's order). */
function genai(name: string, labels: Record<string, string>): string {
  return `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')}}`;
}

test('GenAI metrics: conventions buckets, model label only for registry ids, TTFT and TPOT of streams', async () => {
  const before = await scrape();
  const chatLabels = (model: string) => ({
    gen_ai_provider_name: 'openai',
    gen_ai_request_model: model,
    gen_ai_operation_name: 'chat',
  });
  const delta = (after: string, series: string) =>
    (sample(after, series) ?? 0) - (sample(before, series) ?? 0);

  const known = await chat({ model: 'gpt-5.4-mini' });
  assert.equal(known.status, 200);
  const knownUsage = ((await known.json()) as { usage: Usage }).usage;
  // A pattern route (gpt-*) and a made-up id the client chose: both are `other`.
  const pattern = await chat({ model: 'gpt-4o-mini' });
  assert.equal(pattern.status, 200);
  await pattern.arrayBuffer();
  const madeUp = await chat({ model: 'client-chosen-zz9' }, { 'x-router-provider': 'openai' });
  assert.equal(madeUp.status, 200);
  await madeUp.arrayBuffer();
  const failed = await chat({ model: 'sim-fail-503' }, { 'x-router-provider': 'openai' });
  assert.equal(failed.status, 503);
  await failed.arrayBuffer();
  const stream = await chat(
    { model: 'gpt-5.4-mini', stream: true, stream_options: { include_usage: true } },
    { 'x-router-provider': 'pacer', 'x-sim-chunks': '4', 'x-sim-chunk-delay-ms': '30' },
  );
  assert.equal(stream.status, 200);
  const streamText = await stream.text();
  const streamUsage = streamText
    .split('\n\n')
    .map((e) => e.replace(/^data: /, ''))
    .filter((e) => e.startsWith('{'))
    .map((e) => JSON.parse(e) as { usage?: Usage | null })
    .find((c) => c.usage)?.usage;
  assert.ok(streamUsage && streamUsage.completion_tokens > 1);

  const m = await scrape();
  const duration = 'gen_ai_server_request_duration_seconds_count';
  assert.equal(delta(m, genai(duration, { ...chatLabels('gpt-5.4-mini'), error_type: '' })), 1);
  assert.equal(delta(m, genai(duration, { ...chatLabels('other'), error_type: '' })), 2);
  assert.equal(delta(m, genai(duration, { ...chatLabels('other'), error_type: '503' })), 1);
  assert.ok(!m.includes('client-chosen-zz9') && !m.includes('gpt-4o-mini'));

  const tokens = (model: string, type: string) =>
    genai('gen_ai_client_token_usage_sum', { ...chatLabels(model), gen_ai_token_type: type });
  assert.equal(delta(m, tokens('gpt-5.4-mini', 'input')), knownUsage.prompt_tokens);
  assert.equal(delta(m, tokens('gpt-5.4-mini', 'output')), knownUsage.completion_tokens);

  const pacer = {
    gen_ai_provider_name: 'pacer',
    gen_ai_request_model: 'gpt-5.4-mini',
    gen_ai_operation_name: 'chat',
  };
  const ttft = sample(m, genai('gen_ai_server_time_to_first_token_seconds_sum', pacer));
  const tpot = sample(m, genai('gen_ai_server_time_per_output_token_seconds_sum', pacer));
  const total = sample(m, genai('gen_ai_server_request_duration_seconds_sum', { ...pacer, error_type: '' }));
  assert.equal(sample(m, genai('gen_ai_server_time_to_first_token_seconds_count', pacer)), 1);
  assert.equal(sample(m, genai('gen_ai_server_time_per_output_token_seconds_count', pacer)), 1);
  assert.ok(ttft !== undefined && tpot !== undefined && total !== undefined);
  // The simulator pauses 30 ms between its events: its first one (a role-only delta) is no token, the
  // text starts after one pause, and six more pauses follow.
  assert.ok(ttft >= 0.025 && ttft < total - 0.15, `ttft ${ttft} within the stream of ${total} s`);
  const expected = (total - ttft) / (streamUsage.completion_tokens - 1);
  assert.ok(Math.abs(tpot - expected) < 0.005, `tpot ${tpot}, expected about ${expected}`);
  // Non-streamed and failed requests have no time to first token.
  assert.equal(
    sample(m, genai('gen_ai_server_time_to_first_token_seconds_count', chatLabels('other'))),
    undefined,
  );

  // The conventions' explicit bucket boundaries, largest included.
  const le = (name: string, bound: string) => new RegExp(`^${name}_bucket\\{le="${bound}",`, 'm');
  assert.match(m, le('gen_ai_client_token_usage', '67108864'));
  assert.match(m, le('gen_ai_client_token_usage', '1'));
  assert.match(m, le('gen_ai_server_time_to_first_token_seconds', '0.001'));
  assert.match(m, le('gen_ai_server_time_to_first_token_seconds', '10'));
  assert.match(m, le('gen_ai_server_time_per_output_token_seconds', '2.5'));
  assert.match(m, le('gen_ai_server_request_duration_seconds', '81.92'));
});
