// Streams relayed through a transforming response rule (OpenAI chat: openai_usage_strip): a scripted
// upstream writes chosen chunks, and each chunk whose events all pass the hooks unchanged and that starts
// and ends at an event boundary reaches the client as the bytes sent (comment lines included); chunks
// split mid-event, or with an event dropped, are serialized from the parsed events. The upstream writes
// its next chunk only once the client has what the last one produced, so the gateway reads the chunks
// as written.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createParser } from 'eventsource-parser';
import { ACCESS_KEY, ROOT, type Stack, startStack } from '../support/stack.ts';

/** One upstream write; `until` holds the next write back until the client's text includes it. */
interface Step {
  readonly write: string;
  readonly until?: string;
}

/** The text a client has received so far, with waits for what it should receive next. */
class Received {
  text = '';
  #waiters: { needle: string; resolve: () => void }[] = [];

  add(text: string): void {
    this.text += text;
    this.#waiters = this.#waiters.filter((w) => {
      if (!this.text.includes(w.needle)) return true;
      w.resolve();
      return false;
    });
  }

  until(needle: string): Promise<void> {
    if (this.text.includes(needle)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ needle, resolve }));
  }
}

let upstream: Server;
let stack: Stack;
let script: { steps: readonly Step[]; received: Received } | undefined;
const upstreamBodies: Record<string, unknown>[] = [];

before(async () => {
  upstream = createServer(async (req, res) => {
    let body = '';
    for await (const part of req) body += part;
    upstreamBodies.push(JSON.parse(body) as Record<string, unknown>);
    const current = script;
    assert.ok(current, 'a script for this request');
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const step of current.steps) {
      res.write(step.write);
      if (step.until !== undefined) await current.received.until(step.until);
    }
    res.end();
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  stack = await startStack({ baseUrls: { openai: url } });
});
after(async () => {
  await stack.close();
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

/** Stream a chat completion through the gateway against `steps`; the client's whole reply text. */
async function relay(steps: readonly Step[], extra: Record<string, unknown> = {}): Promise<string> {
  const received = new Received();
  script = { steps, received };
  const res = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'gpt-5.4-mini',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      ...extra,
    }),
  });
  assert.equal(res.status, 200);
  assert.ok(res.body);
  const decoder = new TextDecoder();
  for await (const bytes of res.body) received.add(decoder.decode(bytes, { stream: true }));
  received.add(decoder.decode());
  return received.text;
}

/** The data of every event in an SSE text. */
function eventData(text: string): string[] {
  const data: string[] = [];
  const parser = createParser({ onEvent: (ev) => data.push(ev.data) });
  parser.feed(text);
  parser.feed('\n\n');
  return data;
}

const chunk = (id: string, content: string) =>
  JSON.stringify({
    id,
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-5.4-mini',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
    usage: null,
  });
const USAGE = JSON.stringify({
  id: 'u',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'gpt-5.4-mini',
  choices: [],
  usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
});

/** The recorded OpenAI stream, one event per write, with a keep-alive comment after the first event. */
function recordedSteps(): { steps: Step[]; usageEvent: string } {
  const sse = readFileSync(`${ROOT}/test/fixtures/upstream/openai/chat-stream-text.sse`, 'utf8');
  const events = sse.split(/(?<=\n\n)/);
  const usageIndex = events.findIndex((e) => e.includes('"choices":[]'));
  assert.ok(usageIndex > 0 && events.at(-1) === 'data: [DONE]\n\n', 'fixture shape');
  const steps: Step[] = events.map((write, i) => ({
    write,
    // Hold the usage event back until all before it arrived: only it is serialized rather than passed on.
    until: i === usageIndex - 1 ? write : undefined,
  }));
  steps.splice(1, 0, { write: ': keep-alive\n\n' });
  return { steps, usageEvent: events[usageIndex]! };
}

test('OpenAI chat stream, one event per chunk: the client gets the upstream bytes but the usage chunk', async () => {
  const { steps, usageEvent } = recordedSteps();
  const sent = steps.map((s) => s.write).join('');
  const text = await relay(steps);
  assert.equal(text, sent.replace(usageEvent, ''));
  assert.ok(text.includes(': keep-alive\n\n'), 'the comment line passed through');
  const data = eventData(text);
  assert.equal(data.at(-1), '[DONE]');
  assert.ok(!data.some((d) => d.includes('"choices":[]')), 'no usage-only chunk');
  assert.deepEqual(upstreamBodies.at(-1)?.stream_options, { include_usage: true });
});

test('a client that asked for usage gets the upstream stream byte for byte', async () => {
  const { steps } = recordedSteps();
  const text = await relay(steps, { stream_options: { include_usage: true } });
  assert.equal(text, steps.map((s) => s.write).join(''));
});

test('chunks split mid-event or changed by a hook are serialized, whole-event ones pass as sent', async () => {
  const c = [1, 2, 3, 4, 5, 6].map((n) => chunk(`c${n}`, `part ${n}`));
  const c2 = `data: ${c[1]}\n\n`;
  const c5 = `data: ${c[4]}\n\n`;
  const steps: Step[] = [
    // Ends mid-event: c1 is serialized (the comment dropped), c2's first half is held back.
    { write: `: ping-1\n\ndata: ${c[0]}\n\n${c2.slice(0, 30)}`, until: c[0] },
    // Starts mid-event: c2 whole, serialized.
    { write: c2.slice(30), until: c[1] },
    // Two events (one without the space after `data:`) and a comment, at boundaries: as sent.
    { write: `: ping-2\n\ndata: ${c[2]}\n\ndata:${c[3]}\n\n`, until: c[3] },
    // An event split across two writes with nothing before it.
    { write: c5.slice(0, 40) },
    { write: c5.slice(40), until: c[4] },
    // The usage chunk dropped from a chunk with another event: serialized, comment dropped.
    { write: `data: ${c[5]}\n\ndata: ${USAGE}\n\n: ping-3\n\n`, until: c[5] },
    { write: 'data: [DONE]\n\n' },
  ];
  const text = await relay(steps);
  assert.deepEqual(eventData(text), [...c, '[DONE]']);
  assert.equal(
    text,
    `data: ${c[0]}\n\n${c2}: ping-2\n\ndata: ${c[2]}\n\ndata:${c[3]}\n\n${c5}data: ${c[5]}\n\ndata: [DONE]\n\n`,
  );
});

test('CRLF and CR framed events pass as sent; the chunks after them still parse', async () => {
  const c = [1, 2, 3, 4].map((n) => chunk(`r${n}`, `framed ${n}`));
  const steps: Step[] = [
    { write: `data: ${c[0]}\r\n\r\n`, until: c[0] },
    { write: `data: ${c[1]}\r\r`, until: c[1] },
    // Starts with a `\n` that may complete the `\r` before it (either way it ends no event), ends
    // mid-event: serialized.
    { write: `\ndata: ${c[2]}\n\ndata: ${c[3]!.slice(0, 20)}`, until: c[2] },
    { write: `${c[3]!.slice(20)}\r\n\r\n`, until: c[3] },
    { write: `data: ${USAGE}\r\n\r\n` },
    { write: 'data: [DONE]\n\n' },
  ];
  const text = await relay(steps);
  assert.deepEqual(eventData(text), [...c, '[DONE]']);
  assert.equal(
    text,
    `data: ${c[0]}\r\n\r\ndata: ${c[1]}\r\rdata: ${c[2]}\n\ndata: ${c[3]}\n\ndata: [DONE]\n\n`,
  );
});
