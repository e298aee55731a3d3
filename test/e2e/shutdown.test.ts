// SIGTERM on a real gateway process (`node proxy/cli.ts`): readiness fails first while requests are
// still served (shutdown delay), then the listener closes and new connections are refused, a stream that
// was in flight completes, and the process exits 0.

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ACCESS_KEY, type GatewayFiles, spawnGateway, writeGatewayFiles } from '../deploy/support.ts';

let sim: UpstreamSim;
let files: GatewayFiles;

before(async () => {
  sim = await startUpstreamSim();
  files = await writeGatewayFiles({ simUrl: sim.url, logLevel: 'info' });
});

after(async () => {
  await sim?.close();
  await files?.remove();
});

const CHUNKS = 20;

/** Reads an OpenAI-style stream; `first` resolves at the first content delta. */
function consume(res: Response): {
  first: Promise<void>;
  done: Promise<{ deltas: number; ended: boolean }>;
  deltas(): number;
} {
  let deltas = 0;
  let markFirst: () => void = () => undefined;
  const first = new Promise<void>((resolve) => {
    markFirst = resolve;
  });
  const done = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    let ended = false;
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let sep = buffer.indexOf('\n\n');
      while (sep !== -1) {
        const data = buffer.slice(0, sep).replace(/^data: /, '');
        buffer = buffer.slice(sep + 2);
        sep = buffer.indexOf('\n\n');
        if (data === '[DONE]') ended = true;
        else if (
          (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content
        ) {
          deltas++;
          markFirst();
        }
      }
    }
    return { deltas, ended };
  })();
  return { first, done, deltas: () => deltas };
}

function connectError(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
  });
}

test('SIGTERM: readiness fails, the listener closes, the stream in flight completes, exit 0', async () => {
  const gw = await spawnGateway(files, ['--shutdown-delay-ms', '1000']);
  try {
    const port = Number(new URL(gw.url).port);
    const ready = await fetch(`${gw.url}/readyz`);
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();

    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-router-provider': 'openai',
      },
      body: JSON.stringify({
        model: `gpt-4o-mini-chunks-${CHUNKS}-delay-150`,
        stream: true,
        messages: [{ role: 'user', content: 'keep streaming through the shutdown' }],
      }),
    });
    assert.equal(res.status, 200);
    const stream = consume(res);
    await stream.first;

    gw.child.kill('SIGTERM');
    await gw.waitForLine((l) => l.msg === 'readiness failing; still serving until the shutdown delay ends');

    // Shutdown delay: readiness fails, but the listener is open and requests are still served.
    const notReady = await fetch(`${gw.url}/readyz`, { headers: { connection: 'close' } });
    assert.equal(notReady.status, 503);
    assert.equal(((await notReady.json()) as { draining: boolean }).draining, true);
    const served = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        connection: 'close',
      },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'late but welcome' }],
      }),
    });
    assert.equal(served.status, 200);
    await served.arrayBuffer();

    await gw.waitForLine((l) => l.msg === 'listener closed; waiting for requests in flight');
    assert.equal(await connectError(port), 'ECONNREFUSED');
    assert.ok(stream.deltas() < CHUNKS, 'the stream was still in flight when the listener closed');

    const result = await stream.done;
    assert.equal(result.deltas, CHUNKS);
    assert.equal(result.ended, true, 'the stream ended with [DONE]');
    assert.equal(await gw.exited, 0);
    assert.ok(gw.lines.some((l) => l.msg === 'stopped'));
    assert.ok(!gw.lines.some((l) => l.msg === 'drain timeout: closing the connections still open'));
  } finally {
    gw.kill();
  }
});

test('SIGTERM without a shutdown delay closes the listener at once and still lets the stream finish', async () => {
  const gw = await spawnGateway(files);
  try {
    const port = Number(new URL(gw.url).port);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-router-provider': 'openai',
      },
      body: JSON.stringify({
        model: 'gpt-4o-mini-chunks-8-delay-100',
        stream: true,
        messages: [{ role: 'user', content: 'short one' }],
      }),
    });
    const stream = consume(res);
    await stream.first;
    gw.child.kill('SIGTERM');
    await gw.waitForLine((l) => l.msg === 'listener closed; waiting for requests in flight');
    assert.equal(await connectError(port), 'ECONNREFUSED');
    const result = await stream.done;
    assert.deepEqual(result, { deltas: 8, ended: true });
    assert.equal(await gw.exited, 0);
  } finally {
    gw.kill();
  }
});
