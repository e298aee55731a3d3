// The simulator's streams that a test holds (x-sim-hold-after, model token hold-N) and the stream that
// simply stops (x-sim-fail: midstream-end), driven over raw HTTP.

import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { readKnobs } from '../../../sim/upstream/knobs.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';

let sim: UpstreamSim;

before(async () => {
  sim = await startUpstreamSim();
});

after(async () => {
  await sim.close();
});

beforeEach(() => {
  sim.reset();
});

const HEADERS = { authorization: 'Bearer sk-test', 'content-type': 'application/json' };

function chat(model: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...HEADERS, ...headers },
    body: JSON.stringify({
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hold on' }],
    }),
  });
}

/** The data lines of the SSE text. */
function events(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice(6));
}

test('hold-N and x-sim-hold-after are read, the header winning', () => {
  assert.equal(readKnobs({}, 'gpt-4o-hold-3', 0).holdAfter, 3);
  assert.equal(readKnobs({ 'x-sim-hold-after': '1' }, 'gpt-4o-hold-3', 0).holdAfter, 1);
  assert.equal(readKnobs({}, 'gpt-4o-threshold-3', 0).holdAfter, undefined);
  assert.equal(readKnobs({}, 'gpt-4o-fail-midstream-end', 0).fail, 'midstream-end');
});

test('a held stream sends its first frames, waits for release(), then the rest', async () => {
  const res = await chat('gpt-4o-hold-2');
  assert.equal(res.status, 200);
  await sim.waitFor((s) => s.stats.held === 1);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (events(text).length < 2) {
    const { value } = await reader.read();
    text += decoder.decode(value, { stream: true });
  }
  assert.equal(events(text).length, 2, 'nothing past the hold point');
  assert.equal(sim.stats.served, 0);
  assert.equal(sim.release(), 1);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const all = events(text);
  assert.equal(all.at(-1), '[DONE]');
  assert.ok(
    all.some((data) => data.includes('"usage":{')),
    'the usage chunk came after the release',
  );
  await sim.waitFor((s) => s.stats.served === 1);
  assert.equal(sim.release(), 0, 'nothing held any more');
});

test('a client that leaves a held stream counts as aborted; POST /_sim/release answers the count', async () => {
  const controller = new AbortController();
  const res = await fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...HEADERS, 'x-sim-hold-after': '1' },
    body: JSON.stringify({ model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    signal: controller.signal,
  });
  await sim.waitFor((s) => s.stats.held === 1);
  controller.abort();
  await res.body?.cancel().catch(() => undefined);
  await sim.waitFor((s) => s.stats.aborted === 1);
  const released = await fetch(`${sim.url}/_sim/release`, { method: 'POST' });
  assert.deepEqual(await released.json(), { released: 1 });
  assert.equal(sim.stats.served, 0);
});

test('midstream-end: half the stream, then a clean end with no error event, no usage and no [DONE]', async () => {
  const res = await chat('gpt-4o-fail-midstream-end');
  const all = events(await res.text());
  assert.ok(all.length > 1);
  assert.ok(!all.includes('[DONE]'));
  assert.ok(!all.some((data) => data.includes('"error"') || data.includes('"usage":{')));
  assert.equal(sim.stats.injected, 1);
});
