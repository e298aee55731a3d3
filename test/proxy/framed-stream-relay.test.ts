// Binary event streams relayed as SSE: an upstream answering `application/vnd.amazon.eventstream`
// (recorded Bedrock frames, written in pieces cut anywhere, one byte at a time included) reaches the
// client as its family's SSE stream through the rule's translator; an exception frame ends it with an
// error event in the client's shape, and a corrupt frame ends it as a failed upstream stream.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import { ACCESS_KEY, ROOT, type Stack, startStack } from '../support/stack.ts';

const fixture = (name: string) => readFileSync(`${ROOT}/test/fixtures/bedrock/${name}`);

const PROVIDER = `syntax "next-router/0.1";
provider "framed" {
  defaults {
    upstream_config { base_url = "http://127.0.0.1:1"; }
    auth { auth_bearer; }
  }
  match api = "native.messages" stream = true {
    request { req_map anthropic_to_bedrock_invoke; }
    upstream { set_path template("/model/\${request.model_mapped}/invoke-with-response-stream"); }
    response { sse_parse anthropic_to_bedrock_invoke; }
    metrics { usage_extract bedrock_invoke; }
  }
  match api = "chat.completions" stream = true {
    request { req_map openai_to_bedrock_converse; }
    upstream { set_path template("/model/\${request.model_mapped}/converse-stream"); }
    response { sse_parse openai_to_bedrock_converse; }
    metrics { usage_extract bedrock_converse; }
  }
}
`;

/** What the upstream writes next: the bytes and the size of each write. */
let script: { bytes: Buffer; piece: number } = { bytes: Buffer.alloc(0), piece: 1 };
let upstream: Server;
let stack: Stack;

before(async () => {
  upstream = createServer(async (req, res) => {
    for await (const _ of req);
    const { bytes, piece } = script;
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
    for (let at = 0; at < bytes.length; at += piece) {
      // Each piece waits for the socket so that the gateway reads pieces, not one coalesced buffer.
      if (!res.write(bytes.subarray(at, at + piece))) await new Promise((r) => res.once('drain', r));
      await new Promise((r) => setImmediate(r));
    }
    res.end();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  stack = await startStack({
    providers: { framed: PROVIDER },
    baseUrls: { framed: url },
    modelsYaml: 'models:\n  "framed-*": { providers: [framed] }\n',
  });
});
after(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

interface Ev {
  event: string | undefined;
  data: string;
}

async function stream(path: string, body: object): Promise<{ type: string | null; events: Ev[] }> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
    },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200);
  const events: Ev[] = [];
  const parser = createParser({ onEvent: (ev) => events.push({ event: ev.event, data: ev.data }) });
  parser.feed(await res.text());
  return { type: res.headers.get('content-type'), events };
}

const messages = (bytes: Buffer, piece: number) => {
  script = { bytes, piece };
  return stream('/v1/messages', {
    model: 'framed-anthropic.claude',
    max_tokens: 64,
    messages: [{ role: 'user', content: 'hi' }],
  });
};
const chat = (bytes: Buffer, piece: number) => {
  script = { bytes, piece };
  return stream('/v1/chat/completions', {
    model: 'framed-other',
    messages: [{ role: 'user', content: 'hi' }],
    stream_options: { include_usage: true },
  });
};

test('InvokeModel frames cut anywhere reach an Anthropic client as the events they carry', async () => {
  const expected = JSON.parse(fixture('invoke-stream.events.json').toString('utf8')) as { type: string }[];
  for (const piece of [1, 7, 1 << 20]) {
    const { type, events } = await messages(fixture('invoke-stream.bin'), piece);
    assert.match(type ?? '', /^text\/event-stream/);
    assert.deepEqual(
      events.map((e) => ({ event: e.event, data: JSON.parse(e.data) })),
      expected.map((data) => ({ event: data.type, data })),
      `pieces of ${piece} bytes`,
    );
  }
});

test('ConverseStream frames reach a chat client as chunks, usage and [DONE]', async () => {
  const { events } = await chat(fixture('converse-stream.bin'), 5);
  assert.equal(events.at(-1)?.data, '[DONE]');
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
  assert.ok(chunks.at(-1).usage.prompt_tokens > 0);
  assert.ok(chunks.some((c) => typeof c.choices[0]?.delta?.content === 'string'));
});

test('an exception frame ends the stream with the client family error event', async () => {
  const anthropic = await messages(fixture('invoke-stream-throttled.bin'), 3);
  const last = anthropic.events.at(-1)!;
  assert.equal(last.event, 'error');
  assert.equal(JSON.parse(last.data).type, 'error');
  const openai = await chat(fixture('converse-stream-exception.bin'), 3);
  const error = JSON.parse(openai.events.at(-1)!.data);
  assert.match(error.error.message, /Model stream error/);
  assert.ok(!openai.events.some((e) => e.data === '[DONE]'));
});

test('a corrupt frame ends the stream with an error event, as a cut connection does', async () => {
  const bytes = Buffer.from(fixture('invoke-stream.bin'));
  // The third frame's last byte (its message CRC) flipped.
  let at = 0;
  for (let i = 0; i < 3; i++) at += bytes.readUInt32BE(at);
  bytes[at - 1]! ^= 0xff;
  const { events } = await messages(bytes, 64);
  const last = events.at(-1)!;
  assert.equal(last.event, 'error');
  assert.match(JSON.parse(last.data).error.message, /ended before the message was complete/);
  assert.equal(events.filter((e) => e.event === 'content_block_start').length, 1);
});
