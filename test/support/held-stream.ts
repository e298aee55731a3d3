// A completion-style upstream whose streams the test holds open: each stream sends its first deltas at
// once and the rest (then the usage chunk and [DONE]) only when the test calls release(). A test can
// then keep a stream in flight across any number of steps without guessing a duration.

import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HeldStreamUpstream {
  readonly url: string;
  /** Resolves once `n` streams have sent their first deltas and are held. */
  held(n: number): Promise<void>;
  /** Lets every held stream (and any later one) finish. */
  release(): void;
  close(): Promise<void>;
}

function event(res: ServerResponse, data: unknown): void {
  res.write(`data: ${JSON.stringify(data)}\n\n`);
}

function delta(content: string): unknown {
  return {
    id: 'chatcmpl-held',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'held',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  };
}

/** `before` deltas are sent at once, `after` deltas once released. */
export async function startHeldStreamUpstream(before: number, after: number): Promise<HeldStreamUpstream> {
  let releaseAll: () => void = () => {};
  const releasedP = new Promise<void>((resolve) => {
    releaseAll = resolve;
  });
  let heldCount = 0;
  const waiters: { n: number; resolve: () => void }[] = [];

  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (let i = 0; i < before; i++) event(res, delta(`w${i} `));
      heldCount++;
      for (const w of waiters.filter((w) => heldCount >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      void releasedP.then(() => {
        for (let i = before; i < before + after; i++) event(res, delta(`w${i} `));
        event(res, {
          id: 'chatcmpl-held',
          object: 'chat.completion.chunk',
          created: 0,
          model: 'held',
          choices: [],
          usage: { prompt_tokens: 5, completion_tokens: before + after, total_tokens: 5 + before + after },
        });
        res.end('data: [DONE]\n\n');
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held(n) {
      if (heldCount >= n) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    release() {
      releaseAll();
    },
    async close() {
      releaseAll();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
