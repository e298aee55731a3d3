// The running sidecar's replay endpoint, POST /dead-letter/replay {"ids": [...] | absent for all,
// "dry_run": bool}: `router-admin dead-letter replay` in file mode, since only the holder of the outbox's
// reader.lock may change dead-letter.jsonl (sidecar/dead-letter-file.ts). Loopback peers only: the
// listener also takes the billing service's webhooks from outside.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLoopback } from '../common/internal-notify.ts';
import type { DeliveryWorker } from './delivery-worker.ts';

export const REPLAY_PATH = '/dead-letter/replay';
const MAX_BODY = 256 * 1024;

export function createReplayRoute(
  worker: Pick<DeliveryWorker, 'replayDeadLetters'>,
): [string, (req: IncomingMessage, res: ServerResponse) => Promise<void>] {
  return [
    `POST ${REPLAY_PATH}`,
    async (req, res) => {
      if (!isLoopback(req.socket.remoteAddress)) {
        req.resume();
        send(res, 403, { error: { message: 'dead-letter replay is accepted from loopback only' } });
        return;
      }
      let body: { ids?: unknown; dry_run?: unknown };
      try {
        body = JSON.parse((await readBody(req)).toString('utf8')) as typeof body;
      } catch {
        send(res, 400, { error: { message: 'body must be JSON {"ids": [...], "dry_run": bool}' } });
        return;
      }
      const ids = body?.ids;
      if (ids !== undefined && !(Array.isArray(ids) && ids.every((x) => typeof x === 'string'))) {
        send(res, 400, { error: { message: 'ids must be an array of strings' } });
        return;
      }
      send(res, 200, await worker.replayDeadLetters(ids, body.dry_run === true));
    },
  ];
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new Error('body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
