// The simulator's Bedrock routes, driven by the official AWS SDK (its SigV4 signer and event-stream
// decoder against the simulator's verifier and frames) and by raw HTTP.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  BedrockRuntimeClient,
  type BedrockRuntimeClientConfig,
  ConverseCommand,
  ConverseStreamCommand,
  CountTokensCommand,
  InvokeModelCommand,
  InvokeModelWithResponseStreamCommand,
  type ServiceInputTypes,
  type ServiceOutputTypes,
} from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { FinalizeHandler, FinalizeHandlerArguments } from '@smithy/types';
import { decodeFrames } from '../../../sim/upstream/eventstream.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';

const CREDS = { accessKeyId: 'AKIDSIMEXAMPLE', secretAccessKey: 'sim-secret-key/with+chars' };
const CLAUDE = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
const PROFILE_ARN = `arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.${CLAUDE}`;
const API_KEY = 'ABSKsimulatedbedrockapikey';

let sim: UpstreamSim;

// biome-ignore lint/suspicious/noExplicitAny: the simulator's JSON answers, read field by field
type Json = Record<string, any>;
interface SdkError {
  name: string;
  message: string;
  $metadata: { httpStatusCode?: number };
}

/** An assert.rejects validator: the SDK's exception of that name (and status). */
function sdkError(name: string, status?: number, message?: RegExp) {
  return (err: unknown): boolean => {
    const e = err as SdkError;
    return (
      e.name === name &&
      (status === undefined || e.$metadata?.httpStatusCode === status) &&
      (message === undefined || message.test(e.message))
    );
  };
}

function client(extra: Partial<BedrockRuntimeClientConfig> = {}, headers: Record<string, string> = {}) {
  const c = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: sim.url,
    credentials: CREDS,
    maxAttempts: 1,
    // The simulator speaks HTTP/1.1 in clear text; the client's default handler would try HTTP/2.
    requestHandler: new NodeHttpHandler(),
    ...extra,
  });
  if (Object.keys(headers).length > 0)
    c.middlewareStack.add(
      (next) => (args) => {
        Object.assign((args.request as { headers: Record<string, string> }).headers, headers);
        return next(args);
      },
      { step: 'build' },
    );
  return c;
}

function messagesBody(text: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    anthropic_version: 'bedrock-2023-05-31',
    max_tokens: 256,
    messages: [{ role: 'user', content: text }],
    ...extra,
  };
}

const weather = {
  toolSpec: {
    name: 'get_weather',
    description: 'Weather for a place',
    inputSchema: { json: { type: 'object', properties: { location: { type: 'string' } } } },
  },
};

before(async () => {
  sim = await startUpstreamSim({ aws: { ...CREDS, region: 'us-east-1' }, bedrockApiKey: API_KEY });
});

after(async () => {
  await sim.close();
});

describe('InvokeModel (Anthropic)', () => {
  test('SDK InvokeModel with an inference-profile ARN: signed path verifies, usage equals CountTokens', async () => {
    const c = client();
    const body = messagesBody('Hello from Bedrock today');
    const out = await c.send(
      new InvokeModelCommand({
        modelId: PROFILE_ARN,
        contentType: 'application/json',
        body: JSON.stringify(body),
      }),
    );
    const msg: Json = JSON.parse(Buffer.from(out.body).toString('utf8'));
    assert.equal(msg.type, 'message');
    assert.equal(msg.model, 'claude-sonnet-4-5-20250929');
    assert.match(msg.content[0].text, /^Echo: Hello from Bedrock today\./);
    const path = sim.requests.at(-1)!.path;
    assert.ok(path.includes('arn%3Aaws%3Abedrock'), path);
    assert.ok(path.includes('inference-profile%2Fus.anthropic'), path);
    const counted = await c.send(
      new CountTokensCommand({
        modelId: CLAUDE,
        input: { invokeModel: { body: new TextEncoder().encode(JSON.stringify(body)) } },
      }),
    );
    assert.equal(counted.inputTokens, msg.usage.input_tokens);
    const raw = await fetch(`${sim.url}/_sim/requests`).then((r) => r.json());
    assert.ok(Array.isArray(raw));
  });

  test('SDK InvokeModelWithResponseStream: chunk events carry the Anthropic stream, metrics at the end', async () => {
    const c = client();
    const body = messagesBody('Stream me something');
    const plain: Json = JSON.parse(
      Buffer.from(
        (await c.send(new InvokeModelCommand({ modelId: `us.${CLAUDE}`, body: JSON.stringify(body) }))).body,
      ).toString('utf8'),
    );
    const out = await c.send(
      new InvokeModelWithResponseStreamCommand({ modelId: `us.${CLAUDE}`, body: JSON.stringify(body) }),
    );
    const events: Json[] = [];
    for await (const part of out.body!) {
      assert.ok(part.chunk, 'only chunk events');
      events.push(JSON.parse(Buffer.from(part.chunk.bytes!).toString('utf8')));
    }
    assert.equal(events[0]!.type, 'message_start');
    const text = events
      .filter((e) => e.type === 'content_block_delta')
      .map((e) => e.delta.text)
      .join('');
    assert.equal(text, plain.content[0].text);
    const last = events.at(-1)!;
    assert.equal(last.type, 'message_stop');
    const metrics = last['amazon-bedrock-invocationMetrics'];
    assert.equal(metrics.inputTokenCount, plain.usage.input_tokens);
    assert.equal(metrics.outputTokenCount, plain.usage.output_tokens);
    assert.equal(typeof metrics.invocationLatency, 'number');
    assert.equal(typeof metrics.firstByteLatency, 'number');
  });

  test('raw frames: prelude, headers and base64 payloads as AWS frames them', async () => {
    // Bedrock API key instead of SigV4
    const res = await fetch(`${sim.url}/model/${encodeURIComponent(CLAUDE)}/invoke-with-response-stream`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${API_KEY}`,
        'content-type': 'application/json',
        'x-sim-chunks': '3',
      },
      body: JSON.stringify(messagesBody('Frames please')),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/vnd.amazon.eventstream');
    const frames = decodeFrames(new Uint8Array(await res.arrayBuffer()));
    for (const f of frames) {
      assert.equal(f.headers[':event-type'], 'chunk');
      assert.equal(f.headers[':message-type'], 'event');
      assert.equal(f.headers[':content-type'], 'application/json');
    }
    const decoded = frames.map((f) =>
      JSON.parse(Buffer.from((f.json as Json).bytes, 'base64').toString('utf8')),
    );
    assert.equal(decoded.filter((e) => e.type === 'content_block_delta').length, 3);
  });

  test('a body Bedrock refuses: model or stream field, missing or wrong anthropic_version', async () => {
    const post = (body: unknown, model = CLAUDE) =>
      fetch(`${sim.url}/model/${encodeURIComponent(model)}/invoke`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const body of [
      messagesBody('x', { model: 'claude' }),
      messagesBody('x', { stream: true }),
      { max_tokens: 5, messages: [] },
      messagesBody('x', { anthropic_version: '2023-06-01' }),
    ]) {
      const res = await post(body);
      assert.equal(res.status, 400);
      assert.match(res.headers.get('x-amzn-errortype') ?? '', /^ValidationException:/);
      assert.equal(typeof ((await res.json()) as Json).message, 'string');
    }
    const other = await post(messagesBody('x'), 'amazon.nova-pro-v1:0');
    assert.equal(other.status, 400);
  });
});

describe('Converse', () => {
  test('SDK Converse: tool call, usage with cache reads and writes', async () => {
    const c = client({}, { 'x-sim-cached-tokens': '4', 'x-sim-cache-write-tokens': '2' });
    const out = await c.send(
      new ConverseCommand({
        modelId: 'amazon.nova-pro-v1:0',
        system: [{ text: 'Be brief.' }],
        messages: [{ role: 'user', content: [{ text: 'What is the weather in Kyoto?' }] }],
        toolConfig: { tools: [weather] },
      }),
    );
    assert.equal(out.stopReason, 'tool_use');
    const use = out.output!.message!.content!.find((b) => b.toolUse)!.toolUse!;
    assert.equal(use.name, 'get_weather');
    assert.deepEqual(use.input, { location: 'Kyoto', unit: 'celsius' });
    const u = out.usage!;
    assert.equal(u.cacheReadInputTokens, 4);
    assert.equal(u.cacheWriteInputTokens, 2);
    assert.equal(u.totalTokens, u.inputTokens! + u.outputTokens! + 6);
    const counted = await client().send(
      new CountTokensCommand({
        modelId: CLAUDE,
        input: {
          converse: {
            system: [{ text: 'Be brief.' }],
            messages: [{ role: 'user', content: [{ text: 'What is the weather in Kyoto?' }] }],
          },
        },
      }),
    );
    assert.ok(counted.inputTokens! > 0);
  });

  test('SDK ConverseStream: events and metadata usage equal Converse', async () => {
    const c = client();
    const input = {
      modelId: `eu.${CLAUDE}`,
      messages: [{ role: 'user' as const, content: [{ text: 'Tell me a streamed story' }] }],
    };
    const plain = await c.send(new ConverseCommand(input));
    const out = await c.send(new ConverseStreamCommand(input));
    const kinds: string[] = [];
    let text = '';
    let usage: unknown;
    for await (const ev of out.stream!) {
      kinds.push(Object.entries(ev).find(([, v]) => v !== undefined)![0]);
      if (ev.contentBlockDelta?.delta?.text) text += ev.contentBlockDelta.delta.text;
      if (ev.metadata) usage = ev.metadata.usage;
    }
    assert.equal(kinds[0], 'messageStart');
    assert.deepEqual(kinds.slice(-3), ['contentBlockStop', 'messageStop', 'metadata']);
    assert.equal(text, (plain.output!.message!.content![0] as { text: string }).text);
    assert.deepEqual(usage, plain.usage);
  });

  test('SDK ConverseStream tool call streams toolUse input fragments', async () => {
    const out = await client().send(
      new ConverseStreamCommand({
        modelId: 'meta.llama3-70b-instruct-v1:0',
        messages: [{ role: 'user', content: [{ text: 'weather in Paris please' }] }],
        toolConfig: { tools: [weather], toolChoice: { any: {} } },
      }),
    );
    let input = '';
    let name = '';
    let stop = '';
    for await (const ev of out.stream!) {
      if (ev.contentBlockStart?.start?.toolUse) name = ev.contentBlockStart.start.toolUse.name!;
      if (ev.contentBlockDelta?.delta?.toolUse) input += ev.contentBlockDelta.delta.toolUse.input;
      if (ev.messageStop) stop = ev.messageStop.stopReason!;
    }
    assert.equal(name, 'get_weather');
    assert.deepEqual(JSON.parse(input), { location: 'Paris', unit: 'celsius' });
    assert.equal(stop, 'tool_use');
  });
});

describe('errors', () => {
  test('injected statuses come back as the SDK exceptions', async () => {
    const cases: [Record<string, string>, string, number][] = [
      [{ 'x-sim-fail': '429' }, 'ThrottlingException', 429],
      [{ 'x-sim-fail': '429', 'x-sim-error-type': 'ModelNotReadyException' }, 'ModelNotReadyException', 429],
      [{ 'x-sim-fail': '503' }, 'ServiceUnavailableException', 503],
      [{ 'x-sim-fail': '408' }, 'ModelTimeoutException', 408],
      [{ 'x-sim-fail': '403' }, 'AccessDeniedException', 403],
      [{ 'x-sim-fail': '404' }, 'ResourceNotFoundException', 404],
    ];
    for (const [headers, name, status] of cases) {
      await assert.rejects(
        client({}, headers).send(
          new InvokeModelCommand({ modelId: CLAUDE, body: JSON.stringify(messagesBody('x')) }),
        ),
        sdkError(name, status),
        name,
      );
    }
  });

  test('mid-stream exception frames end the SDK stream with the exception', async () => {
    const drain = async (headers: Record<string, string>) => {
      const out = await client({}, headers).send(
        new InvokeModelWithResponseStreamCommand({
          modelId: CLAUDE,
          body: JSON.stringify(messagesBody('x')),
        }),
      );
      let chunks = 0;
      for await (const p of out.body!) if (p.chunk) chunks++;
      return chunks;
    };
    await assert.rejects(drain({ 'x-sim-fail': 'midstream' }), sdkError('ModelStreamErrorException'));
    await assert.rejects(
      drain({ 'x-sim-fail': 'midstream', 'x-sim-stream-exception': 'throttlingException' }),
      sdkError('ThrottlingException'),
    );
    const out = await client({}, { 'x-sim-fail': 'midstream' }).send(
      new ConverseStreamCommand({ modelId: CLAUDE, messages: [{ role: 'user', content: [{ text: 'x' }] }] }),
    );
    await assert.rejects(async () => {
      for await (const _ of out.stream!);
    }, sdkError('ModelStreamErrorException'));
    await assert.rejects(drain({ 'x-sim-fail': 'midstream-429' }), sdkError('ThrottlingException'));
    const throttled = await client({}, { 'x-sim-fail': 'midstream-429' }).send(
      new ConverseStreamCommand({ modelId: CLAUDE, messages: [{ role: 'user', content: [{ text: 'x' }] }] }),
    );
    await assert.rejects(async () => {
      for await (const _ of throttled.stream!);
    }, sdkError('ThrottlingException'));
  });
});

describe('SigV4 verification', () => {
  const send = (c: BedrockRuntimeClient) =>
    c.send(new InvokeModelCommand({ modelId: CLAUDE, body: JSON.stringify(messagesBody('x')) }));

  test('a wrong secret, an unknown key, a session token not issued: 403 in Bedrock shape', async () => {
    await assert.rejects(
      send(client({ credentials: { ...CREDS, secretAccessKey: 'wrong' } })),
      sdkError('InvalidSignatureException', 403),
    );
    await assert.rejects(
      send(client({ credentials: { ...CREDS, accessKeyId: 'AKIDUNKNOWN' } })),
      sdkError('UnrecognizedClientException', 403),
    );
    await assert.rejects(
      send(client({ credentials: { ...CREDS, sessionToken: 'tok' } })),
      sdkError('UnrecognizedClientException'),
    );
  });

  test('a stale date and a wrong region are refused', async () => {
    await assert.rejects(
      send(client({ systemClockOffset: -20 * 60_000 })),
      sdkError('InvalidSignatureException', 403, /Signature expired/),
    );
    await assert.rejects(send(client({ region: 'eu-west-1' })), sdkError('InvalidSignatureException'));
  });

  test('a body changed after signing fails the payload hash', async () => {
    const c = client();
    c.middlewareStack.addRelativeTo(
      (next: FinalizeHandler<ServiceInputTypes, ServiceOutputTypes>) =>
        (args: FinalizeHandlerArguments<ServiceInputTypes>) => {
          (args.request as { body: string }).body = JSON.stringify(messagesBody('y'));
          return next(args);
        },
      { relation: 'after', toMiddleware: 'httpSigningMiddleware' },
    );
    await assert.rejects(send(c), sdkError('InvalidSignatureException'));
  });

  test('no credentials, a wrong API key', async () => {
    const url = `${sim.url}/model/${encodeURIComponent(CLAUDE)}/invoke`;
    const body = JSON.stringify(messagesBody('x'));
    const none = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    assert.equal(none.status, 403);
    assert.match(none.headers.get('x-amzn-errortype') ?? '', /^MissingAuthenticationTokenException/);
    const bad = await fetch(url, { method: 'POST', body, headers: { authorization: 'Bearer nope' } });
    assert.equal(bad.status, 403);
    assert.match(bad.headers.get('x-amzn-errortype') ?? '', /^AccessDeniedException/);
  });
});
