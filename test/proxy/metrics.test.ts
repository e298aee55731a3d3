// GET /metrics of the gateway after known traffic: requests by provider / api / status / stream, the
// latency and upstream time-to-first-byte histograms, tokens metered (equal to what the upstream
// reported), active streams while one is in flight, usage events queued.

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
  assert.ok(m.includes('router_process_resident_memory_bytes'));
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
