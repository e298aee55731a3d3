// A client of a Node process's inspector (started with --inspect=127.0.0.1:<port>): forced collections,
// process.memoryUsage() and heap snapshots streamed to a file. One session is kept for the process's
// whole measurement, so that the ids of objects are the same in every snapshot it takes.

import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';

export interface MemoryUsage {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export class InspectorSession {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private chunkSink: ((chunk: string) => void) | undefined;

  private readonly socket: WebSocket;

  private constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('message', (data) => {
      const msg = JSON.parse(String(data)) as {
        id?: number;
        result?: unknown;
        error?: { message: string };
        method?: string;
        params?: { chunk?: string };
      };
      if (msg.id !== undefined) {
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.error) p?.reject(new Error(msg.error.message));
        else p?.resolve(msg.result);
      } else if (msg.method === 'HeapProfiler.addHeapSnapshotChunk' && msg.params?.chunk !== undefined) {
        this.chunkSink?.(msg.params.chunk);
      }
    });
    socket.on('close', () => {
      for (const p of this.pending.values()) p.reject(new Error('inspector session closed'));
      this.pending.clear();
    });
  }

  /** Connects to the first target of the inspector on `port` (retrying while the process starts). */
  static async connect(port: number, timeoutMs = 20_000): Promise<InspectorSession> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
          webSocketDebuggerUrl: string;
        }[];
        const url = list[0]?.webSocketDebuggerUrl;
        if (url === undefined) throw new Error('no inspector target');
        const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 0 });
        await new Promise<void>((resolve, reject) => {
          socket.once('open', resolve);
          socket.once('error', reject);
        });
        const session = new InspectorSession(socket);
        await session.call('HeapProfiler.enable');
        return session;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
  }

  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  async collectGarbage(): Promise<void> {
    await this.call('HeapProfiler.collectGarbage');
  }

  async memoryUsage(): Promise<MemoryUsage> {
    const r = (await this.call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    })) as { result: { value: string } };
    return JSON.parse(r.result.value) as MemoryUsage;
  }

  /** Writes a heap snapshot (V8 collects garbage before taking it) to `file`; resolves with its size. */
  async writeHeapSnapshot(file: string): Promise<number> {
    const out = createWriteStream(file);
    let bytes = 0;
    this.chunkSink = (chunk) => {
      bytes += chunk.length;
      out.write(chunk);
    };
    try {
      await this.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    } finally {
      this.chunkSink = undefined;
      out.end();
      await finished(out);
    }
    return bytes;
  }

  close(): void {
    this.socket.close();
  }
}
