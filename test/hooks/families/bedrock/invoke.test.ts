import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import test from 'node:test';
import { GatewayError } from '../../../../common/errors.ts';
import type { JsonObject, SseOut } from '../../../../common/types.ts';
import { bedrockEventStream } from '../../../../hooks/families/bedrock/event-stream.ts';
import {
  bedrockApiFor,
  bedrockBaseModelId,
  bedrockModelSegment,
  bedrockPath,
  cloudAnthropicBody,
} from '../../../../hooks/families/bedrock/index.ts';
import { TRANSLATORS, USAGE_PRESETS } from '../../../../hooks/families/index.ts';
import type { TranslatorInit } from '../../../../hooks/translators/types.ts';

const fixtureBytes = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url)));
const fixtureJson = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url), 'utf8'));

const init = (over: Partial<TranslatorInit> = {}): TranslatorInit => ({
  requestId: 'req_2',
  model: 'claude-sonnet-4',
  upstreamModel: 'us.anthropic.claude-sonnet-4-20250514-v1:0',
  stream: true,
  createdAt: 1760000000,
  ...over,
});

function parts(bin: string): { event: string | undefined; data: string }[] {
  const out: { event: string | undefined; data: string }[] = [];
  const decoder = bedrockEventStream.create();
  for (const part of decoder.decode(fixtureBytes(bin)))
    if (part.type === 'event') out.push({ event: part.event, data: part.data });
  return out;
}

test('InvokeModel for Anthropic base ids (after an inference-profile prefix or in an ARN), Converse otherwise', () => {
  assert.equal(bedrockApiFor('anthropic.claude-3-5-haiku-20241022-v1:0'), 'invoke');
  for (const prefix of ['us.', 'eu.', 'apac.', 'global.']) {
    assert.equal(bedrockApiFor(`${prefix}anthropic.claude-sonnet-4-20250514-v1:0`), 'invoke', prefix);
  }
  assert.equal(
    bedrockApiFor(
      'arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0',
    ),
    'invoke',
  );
  assert.equal(bedrockBaseModelId('apac.amazon.nova-pro-v1:0'), 'amazon.nova-pro-v1:0');
  for (const id of [
    'amazon.nova-pro-v1:0',
    'us.meta.llama3-3-70b-instruct-v1:0',
    'mistral.mistral-large-2407-v1:0',
    'xanthropic.x',
  ]) {
    assert.equal(bedrockApiFor(id), 'converse', id);
  }
});

test('a model id or ARN is one path segment, encoded as the AWS SDK encodes its modelId label', () => {
  assert.equal(bedrockModelSegment('amazon.nova-pro-v1'), 'amazon.nova-pro-v1');
  assert.equal(
    bedrockModelSegment('us.anthropic.claude-sonnet-4-20250514-v1:0'),
    'us.anthropic.claude-sonnet-4-20250514-v1%3A0',
  );
  const arn = 'arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3d4e5';
  assert.equal(
    bedrockModelSegment(arn),
    'arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4e5',
  );
  assert.equal(bedrockModelSegment("odd (name)*!'"), 'odd%20%28name%29%2A%21%27');
  assert.equal(bedrockPath(arn, 'converse-stream'), `/model/${bedrockModelSegment(arn)}/converse-stream`);
});

test('the Anthropic body for Bedrock and Vertex: model out, version in, betas into the body on Bedrock only', () => {
  const body = {
    model: 'claude-sonnet-4',
    max_tokens: 10,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
  };
  const headers = { 'anthropic-beta': 'context-1m-2025-08-07, interleaved-thinking-2025-05-14' };
  assert.deepEqual(cloudAnthropicBody(body, 'bedrock', headers), {
    max_tokens: 10,
    messages: [{ role: 'user', content: 'hi' }],
    anthropic_version: 'bedrock-2023-05-31',
    anthropic_beta: ['context-1m-2025-08-07', 'interleaved-thinking-2025-05-14'],
  });
  assert.deepEqual(cloudAnthropicBody(body, 'vertex', headers), {
    max_tokens: 10,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
    anthropic_version: 'vertex-2023-10-16',
  });
  // The client's own fields win; the client's body is not changed.
  const own = cloudAnthropicBody(
    { ...body, anthropic_version: 'bedrock-2023-05-31', anthropic_beta: ['x'] },
    'bedrock',
    headers,
  );
  assert.deepEqual(own.anthropic_beta, ['x']);
  assert.equal(body.model, 'claude-sonnet-4');
});

test('anthropic_to_bedrock_invoke: the header reaches the body, replies and events pass, Bedrock errors become Anthropic errors', () => {
  const t = TRANSLATORS.get('anthropic_to_bedrock_invoke')!.create(
    init({ headers: { 'anthropic-beta': 'token-efficient-tools-2025-02-19' } }),
  );
  const body = t.request({
    model: 'claude-sonnet-4',
    max_tokens: 5,
    stream: true,
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.deepEqual(body.anthropic_beta, ['token-efficient-tools-2025-02-19']);
  assert.equal(body.model, undefined);
  const events = parts('invoke-stream.bin');
  const out: SseOut[] = [];
  for (const ev of events) out.push(...t.streamEvent(ev.event, ev.data));
  out.push(...t.streamEnd(true));
  assert.deepEqual(out, events);
  assert.deepEqual(t.error(404, { message: 'The provided model identifier is invalid.' }), {
    type: 'error',
    error: { type: 'not_found_error', message: 'The provided model identifier is invalid.' },
  });
});

test('a throttled InvokeModel stream reaches an Anthropic client as its error event', () => {
  const t = TRANSLATORS.get('anthropic_to_bedrock_invoke')!.create(init());
  const out: SseOut[] = [];
  for (const ev of parts('invoke-stream-throttled.bin')) out.push(...t.streamEvent(ev.event, ev.data));
  out.push(...t.streamEnd(true));
  const last = out.at(-1)!;
  assert.equal(last.event, 'error');
  assert.equal(JSON.parse(last.data).error.type, 'rate_limit_error');
  // A stream cut without message_stop or an error gets one.
  const cut = TRANSLATORS.get('anthropic_to_bedrock_invoke')!.create(init());
  const events = parts('invoke-stream.bin');
  for (const ev of events.slice(0, 3)) cut.streamEvent(ev.event, ev.data);
  assert.equal(cut.streamEnd(false)[0]!.event, 'error');
});

test('openai_to_bedrock_invoke: the chat translation to Anthropic, then the Bedrock body; the stream back as chat chunks', () => {
  const t = TRANSLATORS.get('openai_to_bedrock_invoke')!.create(init());
  const body = t.request({
    model: 'claude-sonnet-4',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  assert.equal(body.model, undefined);
  assert.equal(body.stream, undefined);
  assert.equal(body.anthropic_version, 'bedrock-2023-05-31');
  const out: SseOut[] = [];
  for (const ev of parts('invoke-stream.bin')) out.push(...t.streamEvent(ev.event, ev.data));
  out.push(...t.streamEnd(true));
  assert.equal(out.at(-1)!.data, '[DONE]');
  const text = out
    .slice(0, -1)
    .map((ev) => JSON.parse(ev.data))
    .flatMap((c) => c.choices.map((ch: { delta: { content?: string } }) => ch.delta.content ?? ''))
    .join('');
  assert.equal(text, 'Hello! How can I help?');
  assert.equal(JSON.parse(out.at(-2)!.data).usage.prompt_tokens, 18);
  // Bedrock's error body reaches the chat client with its message.
  assert.deepEqual(t.error(400, { message: 'messages: field required' }), {
    error: {
      message: 'messages: field required',
      type: 'invalid_request_error',
      code: 'invalid_request_error',
    },
  });
  const gemini = TRANSLATORS.get('gemini_to_bedrock_invoke')!.create(init());
  const gbody = gemini.request({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] });
  assert.equal(gbody.anthropic_version, 'bedrock-2023-05-31');
  assert.equal(gbody.model, undefined);
});

test('Vertex Claude: anthropic_to_vertex_anthropic keeps the stream flag and the beta header, and maps Google errors', () => {
  const t = TRANSLATORS.get('anthropic_to_vertex_anthropic')!.create(
    init({ headers: { 'anthropic-beta': 'x' } }),
  );
  const body = t.request({ model: 'claude-sonnet-4@20250514', max_tokens: 5, stream: true, messages: [] });
  assert.deepEqual(body, {
    max_tokens: 5,
    stream: true,
    messages: [],
    anthropic_version: 'vertex-2023-10-16',
  });
  assert.deepEqual(t.error(503, { error: { code: 503, message: 'Overloaded', status: 'UNAVAILABLE' } }), {
    type: 'error',
    error: { type: 'overloaded_error', message: 'Overloaded' },
  });
  // Vertex's throttling is the gateway's upstream_rate_limited, in the client's shape.
  assert.throws(
    () => t.error(429, { error: { code: 429, message: 'Quota exceeded', status: 'RESOURCE_EXHAUSTED' } }),
    (err: unknown) =>
      err instanceof GatewayError &&
      err.code === 'upstream_rate_limited' &&
      /Quota exceeded/.test(err.message),
  );
  assert.ok(TRANSLATORS.has('openai_to_vertex_anthropic'));
});

function sniff(name: string, events: readonly { event: string | undefined; data: string }[]) {
  const sniffer = USAGE_PRESETS.get(name)!.createSniffer();
  for (const ev of events) sniffer.event(ev.event, ev.data);
  return { usage: sniffer.result(), final: sniffer.final() };
}

test('bedrock_converse reads Converse usage, whole and streamed, with cache reads and writes', () => {
  const preset = USAGE_PRESETS.get('bedrock_converse')!;
  assert.deepEqual(preset.fromJson(fixtureJson('converse-reply.json')), {
    inputTokens: 2460,
    outputTokens: 58,
    totalTokens: 2518,
    cacheReadTokens: 2048,
    cacheCreationTokens: 0,
  });
  const streamed = sniff('bedrock_converse', parts('converse-stream.bin'));
  assert.deepEqual(streamed, {
    usage: {
      inputTokens: 1416,
      outputTokens: 71,
      totalTokens: 1487,
      cacheReadTokens: 1024,
      cacheCreationTokens: 0,
    },
    final: true,
  });
  const cut = sniff('bedrock_converse', parts('converse-stream-exception.bin'));
  assert.deepEqual(cut, { usage: undefined, final: false });
  assert.deepEqual(
    preset.fromJson({ usage: { inputTokens: 10, outputTokens: 2, cacheWriteInputTokens: 300 } }),
    {
      inputTokens: 310,
      outputTokens: 2,
      totalTokens: 312,
      cacheCreationTokens: 300,
    },
  );
});

test('bedrock_invoke reads the Anthropic body and, streamed, Bedrock invocation metrics', () => {
  const preset = USAGE_PRESETS.get('bedrock_invoke')!;
  const reply: JsonObject = {
    id: 'msg_bdrk_1',
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: 'Hi' }],
    stop_reason: 'end_turn',
    usage: {
      input_tokens: 12,
      output_tokens: 3,
      cache_read_input_tokens: 100,
      cache_creation_input_tokens: 0,
    },
  };
  assert.deepEqual(preset.fromJson(reply), {
    inputTokens: 112,
    outputTokens: 3,
    totalTokens: 115,
    cacheReadTokens: 100,
    cacheCreationTokens: 0,
  });
  const streamed = sniff('bedrock_invoke', parts('invoke-stream.bin'));
  assert.deepEqual(streamed, {
    usage: { inputTokens: 18, outputTokens: 12, totalTokens: 30, cacheReadTokens: 0, cacheCreationTokens: 0 },
    final: true,
  });
  // The metrics win over the Anthropic events' counts when they differ.
  const events = parts('invoke-stream.bin');
  const last = JSON.parse(events.at(-1)!.data);
  last['amazon-bedrock-invocationMetrics'] = {
    inputTokenCount: 20,
    outputTokenCount: 13,
    cacheWriteInputTokenCount: 4,
  };
  const metered = sniff('bedrock_invoke', [
    ...events.slice(0, -1),
    { event: 'message_stop', data: JSON.stringify(last) },
  ]);
  assert.deepEqual(metered.usage, {
    inputTokens: 24,
    outputTokens: 13,
    totalTokens: 37,
    cacheCreationTokens: 4,
  });
  // Throttled mid-stream: the running count, not final.
  const throttled = sniff('bedrock_invoke', parts('invoke-stream-throttled.bin'));
  assert.equal(throttled.final, false);
  assert.equal(throttled.usage?.inputTokens, 18);
});
