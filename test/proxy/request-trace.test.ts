// Traces, end to end: the gateway (OTEL_* variables only) exports to a real OTLP/HTTP receiver on
// loopback, in front of the upstream simulator. An incoming traceparent is continued, each upstream
// attempt is a CLIENT span under the request's SERVER span and its traceparent reaches the upstream, the
// GenAI attributes are set, and nothing of the prompt, the completion or a key is exported.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

const MODELS = `
models:
  gpt-5.4-mini: { providers: [openai] }
  claude-sonnet-5: { providers: [anthropic] }
  gemini-3.8-flash: { providers: [gemini] }
  gpt-fail-429: { providers: [openai] }
  # The first provider answers 429 (the simulator reads it from the model name), the second serves.
  retried: { providers: [{ provider: openai, model: gpt-fail-429 }, { provider: deepseek, model: deepseek-chat }] }
`;
const PROMPT = 'tell me the secret plan zebra-7731';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';

let receiver: OtlpReceiver;
let stack: Stack;

before(async () => {
  receiver = await startOtlpReceiver();
  stack = await startStack({
    modelsYaml: MODELS,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_SERVICE_NAME: 'router-under-test',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    },
  });
});

after(async () => {
  await stack?.close();
  await receiver?.close();
});

/** The spans of the request with this id: its server span and its client spans, in start order. */
async function spansOf(requestId: string): Promise<{ server: ReceivedSpan; clients: ReceivedSpan[] }> {
  const server = () =>
    receiver.spans.find((s) => s.kind === 2 && s.attributes['router.request_id'] === requestId);
  await receiver.waitFor(() => server() !== undefined);
  const s = server()!;
  const clients = receiver.spans.filter((c) => c.kind === 3 && c.parentSpanId === s.spanId);
  return { server: s, clients };
}

function upstreamTraceparent(requestIndexFromEnd = 1): string | undefined {
  const req = stack.sim.requests.at(-requestIndexFromEnd);
  const value = req?.headers.traceparent;
  return Array.isArray(value) ? value[0] : value;
}

function assertNoSecrets(): void {
  for (const e of receiver.exports) {
    const text = e.body.toString('utf8');
    assert.ok(!text.includes('zebra-7731'), 'no prompt text exported');
    assert.ok(!text.includes(ACCESS_KEY), 'no access key exported');
    assert.ok(!text.includes('sim-openai-key'), 'no upstream key exported');
  }
}

describe('completion-style client', () => {
  test('non-streaming: the incoming trace is continued, the upstream gets the client span as parent', async () => {
    const res = await postJson(
      `${stack.url}/v1/chat/completions`,
      {
        model: 'gpt-5.4-mini',
        max_tokens: 64,
        temperature: 0.2,
        messages: [{ role: 'user', content: PROMPT }],
      },
      { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, 'x-router-request-id': 'tr-chat-1' },
    );
    assert.equal(res.status, 200);
    const { server, clients } = await spansOf('tr-chat-1');
    assert.equal(server.traceId, TRACE_ID);
    assert.equal(server.parentSpanId, PARENT_ID);
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.resource['service.name'], 'router-under-test');
    assert.equal(server.resource['deployment.environment.name'], 'test');
    assert.equal(clients.length, 1);
    const [client] = clients;
    assert.equal(client!.traceId, TRACE_ID);
    assert.equal(client!.name, 'chat gpt-5.4-mini');
    assert.equal(upstreamTraceparent(), `00-${TRACE_ID}-${client!.spanId}-01`);
    const body = res.json as {
      id: string;
      model: string;
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    // The inference span (the attempt that served) has the request parameters and the reply's facts.
    const c = client!.attributes;
    assert.equal(c['gen_ai.operation.name'], 'chat');
    assert.equal(c['gen_ai.provider.name'], 'openai');
    assert.equal(c['gen_ai.request.model'], 'gpt-5.4-mini');
    assert.equal(c['gen_ai.request.max_tokens'], 64);
    assert.equal(c['gen_ai.request.temperature'], 0.2);
    assert.equal(c['gen_ai.response.id'], body.id);
    assert.equal(c['gen_ai.response.model'], body.model);
    assert.deepEqual(c['gen_ai.response.finish_reasons'], ['stop']);
    // Both have the outcome.
    for (const span of [server, client!]) {
      const a = span.attributes;
      assert.equal(a['gen_ai.usage.input_tokens'], body.usage.prompt_tokens);
      assert.equal(a['gen_ai.usage.output_tokens'], body.usage.completion_tokens);
      assert.equal(a['http.response.status_code'], 200);
      assert.equal(span.status, 0);
    }
    const a = server.attributes;
    assert.equal(a['gen_ai.operation.name'], 'chat');
    assert.equal(a['gen_ai.provider.name'], 'openai');
    assert.equal(a['gen_ai.request.model'], 'gpt-5.4-mini');
    assert.equal(server.attributes['router.subject_id'], 'client_a');
    assertNoSecrets();
  });

  test('streaming, no incoming trace: a new trace; time to first token and the facts of the stream', async () => {
    const res = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model: 'gpt-5.4-mini', stream: true, messages: [{ role: 'user', content: PROMPT }] },
      { 'x-router-request-id': 'tr-chat-stream' },
    );
    assert.equal(res.status, 200);
    const { server, clients } = await spansOf('tr-chat-stream');
    assert.equal(server.parentSpanId, '');
    assert.notEqual(server.traceId, TRACE_ID);
    assert.equal(clients.length, 1);
    assert.equal(upstreamTraceparent(), `00-${server.traceId}-${clients[0]!.spanId}-01`);
    const a = server.attributes;
    assert.equal(a['router.stream'], true);
    assert.equal(typeof a['router.time_to_first_token_ms'], 'number');
    assert.ok(Number(a['gen_ai.usage.output_tokens']) > 0);
    const c = clients[0]!.attributes;
    assert.match(String(c['gen_ai.response.id']), /./);
    assert.deepEqual(c['gen_ai.response.finish_reasons'], ['stop']);
    assertNoSecrets();
  });

  test('a retried request: two client spans under one server span, the refused one an error', async () => {
    const res = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model: 'retried', messages: [{ role: 'user', content: PROMPT }] },
      { 'x-router-request-id': 'tr-retry' },
    );
    assert.equal(res.status, 200);
    const { server, clients } = await spansOf('tr-retry');
    assert.equal(clients.length, 2);
    const [first, second] = clients;
    assert.equal(first!.attributes['gen_ai.provider.name'], 'openai');
    assert.equal(first!.attributes['error.type'], '429');
    assert.equal(first!.attributes['http.response.status_code'], 429);
    assert.equal(first!.status, 2);
    assert.equal(second!.attributes['gen_ai.provider.name'], 'deepseek');
    assert.equal(second!.attributes['router.attempt'], 2);
    assert.equal(second!.status, 0);
    assert.equal(server.status, 0);
    assert.equal(server.attributes['gen_ai.provider.name'], 'deepseek');
  });

  test('an upstream 429 answered to the client: the server span is an error with error.type', async () => {
    const res = await postJson(
      `${stack.url}/v1/chat/completions`,
      { model: 'gpt-fail-429', messages: [{ role: 'user', content: PROMPT }] },
      { 'x-router-request-id': 'tr-429' },
    );
    assert.equal(res.status, 429);
    const { server, clients } = await spansOf('tr-429');
    assert.equal(server.status, 2);
    assert.equal(server.attributes['error.type'], '429');
    assert.equal(clients.length, 1);
    assert.equal(clients[0]!.status, 2);
  });
});

describe('Anthropic Messages client', () => {
  for (const stream of [false, true]) {
    test(`stream=${stream}: chat spans with the Messages reply's id, model and stop reason`, async () => {
      const rid = `tr-anthropic-${stream}`;
      const res = await postJson(
        `${stack.url}/v1/messages`,
        {
          model: 'claude-sonnet-5',
          max_tokens: 100,
          top_k: 5,
          stream,
          messages: [{ role: 'user', content: PROMPT }],
        },
        { 'anthropic-version': '2023-06-01', 'x-router-request-id': rid },
      );
      assert.equal(res.status, 200);
      const { server, clients } = await spansOf(rid);
      assert.equal(clients.length, 1);
      assert.equal(server.attributes['gen_ai.operation.name'], 'chat');
      const a = clients[0]!.attributes;
      assert.equal(a['gen_ai.provider.name'], 'anthropic');
      assert.equal(a['gen_ai.request.max_tokens'], 100);
      assert.equal(a['gen_ai.request.top_k'], 5);
      assert.match(String(a['gen_ai.response.id']), /^msg_/);
      assert.match(String(a['gen_ai.response.model']), /claude/);
      assert.deepEqual(a['gen_ai.response.finish_reasons'], ['end_turn']);
      assert.ok(Number(a['gen_ai.usage.input_tokens']) > 0);
      assert.equal(upstreamTraceparent(), `00-${server.traceId}-${clients[0]!.spanId}-01`);
      assertNoSecrets();
    });
  }
});

describe('Gemini client', () => {
  for (const action of ['generateContent', 'streamGenerateContent']) {
    test(`${action}: generate_content spans, the path's model as {model} in the route`, async () => {
      const rid = `tr-gemini-${action}`;
      const res = await postJson(
        `${stack.url}/v1beta/models/gemini-3.8-flash:${action}`,
        {
          contents: [{ role: 'user', parts: [{ text: PROMPT }] }],
          generationConfig: { maxOutputTokens: 50, topP: 0.9 },
        },
        { 'x-router-request-id': rid },
      );
      assert.equal(res.status, 200);
      const { server, clients } = await spansOf(rid);
      assert.equal(server.name, `POST /v1beta/models/{model}:${action}`);
      assert.equal(clients.length, 1);
      assert.equal(clients[0]!.name, 'generate_content gemini-3.8-flash');
      const a = clients[0]!.attributes;
      assert.equal(a['gen_ai.operation.name'], 'generate_content');
      assert.equal(a['gen_ai.request.max_tokens'], 50);
      assert.equal(a['gen_ai.request.top_p'], 0.9);
      assert.deepEqual(a['gen_ai.response.finish_reasons'], ['STOP']);
      assert.ok(Number(a['gen_ai.usage.output_tokens']) > 0);
      assertNoSecrets();
    });
  }
});

describe('Responses API client', () => {
  for (const stream of [false, true]) {
    test(`stream=${stream}: chat spans with the response's id and model`, async () => {
      const rid = `tr-responses-${stream}`;
      const res = await postJson(
        `${stack.url}/v1/responses`,
        { model: 'gpt-5.4-mini', input: PROMPT, max_output_tokens: 80, stream },
        { 'x-router-request-id': rid },
      );
      assert.equal(res.status, 200);
      const { server, clients } = await spansOf(rid);
      assert.equal(server.name, 'POST /v1/responses');
      assert.equal(clients.length, 1);
      const a = clients[0]!.attributes;
      assert.equal(a['gen_ai.operation.name'], 'chat');
      assert.equal(a['gen_ai.request.max_tokens'], 80);
      assert.match(String(a['gen_ai.response.id']), /^resp_/);
      assert.deepEqual(a['gen_ai.response.finish_reasons'], ['stop']);
      assert.ok(Number(a['gen_ai.usage.input_tokens']) > 0);
      assertNoSecrets();
    });
  }
});

test('with a protobuf exporter the same spans go out as application/x-protobuf', async () => {
  const protoStack = await startStack({
    env: {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_SERVICE_NAME: 'router-protobuf',
    },
  });
  const traceId = TRACE_ID.replace('4bf9', 'aaaa');
  try {
    const before = receiver.exports.length;
    const res = await postJson(
      `${protoStack.url}/v1/chat/completions`,
      { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: PROMPT }] },
      { traceparent: `00-${traceId}-${PARENT_ID}-01` },
    );
    assert.equal(res.status, 200);
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.kind === 3));
    assert.ok(
      receiver.exports.slice(before).every((e) => e.contentType === 'application/x-protobuf'),
      'protobuf is the default protocol',
    );
    const server = receiver.spans.find((s) => s.traceId === traceId && s.kind === 2)!;
    const client = receiver.spans.find((s) => s.traceId === traceId && s.kind === 3)!;
    assert.equal(server.parentSpanId, PARENT_ID);
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.resource['service.name'], 'router-protobuf');
    assert.equal(client.parentSpanId, server.spanId);
    assert.equal(client.attributes['gen_ai.request.model'], 'gpt-5.4-mini');
    assert.ok(Number(client.attributes['gen_ai.usage.output_tokens']) > 0);
  } finally {
    await protoStack.close();
  }
  assertNoSecrets();
});

test('sampled out (always_off): the upstream still gets a traceparent, unsampled; no span is exported', async () => {
  const sampledOut = await startStack({
    env: {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'always_off',
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_SERVICE_NAME: 'router-sampled-out',
    },
  });
  try {
    const res = await postJson(`${sampledOut.url}/v1/chat/completions`, {
      model: 'gpt-5.4-mini',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    const sent = sampledOut.sim.requests.at(-1)?.headers.traceparent;
    assert.match(String(sent), /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    // An incoming trace is continued, unsampled, under a span id of the gateway's.
    const incoming = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const again = await postJson(
      `${sampledOut.url}/v1/chat/completions`,
      { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] },
      { traceparent: incoming },
    );
    assert.equal(again.status, 200);
    const continued = String(sampledOut.sim.requests.at(-1)?.headers.traceparent);
    assert.match(continued, /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-00$/);
    assert.notEqual(continued.split('-')[2], 'b7ad6b7169203331');
  } finally {
    await sampledOut.close(); // exports whatever was buffered
  }
  assert.equal(receiver.spans.filter((s) => s.resource['service.name'] === 'router-sampled-out').length, 0);
});

test('tracing off (no endpoint): no traceparent reaches the upstream', async () => {
  const plain = await startStack();
  try {
    const res = await postJson(`${plain.url}/v1/chat/completions`, {
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    assert.equal(plain.sim.requests.at(-1)?.headers.traceparent, undefined);
  } finally {
    await plain.close();
  }
});

/** A sample of the gateway's /metrics, by its name and labels as printed (0 when absent). */
async function metric(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

test('/metrics counts the spans exported, and those a collector refused as dropped', async () => {
  assert.ok((await metric(stack.url, 'router_trace_spans_total{result="exported"}')) > 0);
  assert.equal(await metric(stack.url, 'router_trace_spans_total{result="dropped"}'), 0);
  let refusedOne!: () => void;
  const refusedExport = new Promise<void>((resolve) => {
    refusedOne = resolve;
  });
  const collector = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(400);
      res.end();
      refusedOne();
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  const { port } = collector.address() as AddressInfo;
  const refused = await startStack({
    env: {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '20',
    },
  });
  try {
    const res = await postJson(`${refused.url}/v1/chat/completions`, {
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200, 'a collector that refuses spans never fails a request');
    await refusedExport;
    // The exporter counts the batch once the refusal reaches it, a turn or two after the reply.
    let failed = 0;
    for (let i = 0; i < 100 && failed === 0; i++) {
      failed = await metric(refused.url, 'router_trace_exports_failed_total');
    }
    assert.equal(failed, 1);
    assert.equal(await metric(refused.url, 'router_trace_spans_total{result="dropped"}'), 2, 'its two spans');
    assert.equal(await metric(refused.url, 'router_trace_spans_total{result="exported"}'), 0);
  } finally {
    await refused.close();
    collector.close();
  }
});
