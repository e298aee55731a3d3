// Test support: a realtime (WebSocket) client whose messages are read in order (next/until, no timing
// assumptions), keeping every frame's text and opcode, the upgrade's response headers, and an HTTP
// refusal's status, headers and body as the rejection.

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { type ClientOptions, type RawData, WebSocket } from 'ws';

// biome-ignore lint/suspicious/noExplicitAny: wire messages are read loosely; the assertions check their shape
export type Json = Record<string, any>;

/** A client whose messages are read in order; every frame's text and opcode are kept. */
export class RealtimeClient {
  readonly ws: WebSocket;
  readonly texts: string[] = [];
  readonly binary: boolean[] = [];
  /** Headers of the 101 (set before open). */
  upgradeHeaders: IncomingHttpHeaders = {};
  private readonly queue: Json[] = [];
  private readonly waiting: ((m: Json) => void)[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('upgrade', (res: IncomingMessage) => {
      this.upgradeHeaders = res.headers;
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const text = String(data);
      this.texts.push(text);
      this.binary.push(isBinary);
      const msg = JSON.parse(text) as Json;
      const w = this.waiting.shift();
      if (w) w(msg);
      else this.queue.push(msg);
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  static open(url: string, opts: ClientOptions = {}, protocols: string[] = []): Promise<RealtimeClient> {
    const ws = new WebSocket(url, protocols, opts);
    const client = new RealtimeClient(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () =>
          reject(
            Object.assign(new Error(`HTTP ${res.statusCode}`), {
              status: res.statusCode,
              headers: res.headers,
              body,
            }),
          ),
        );
      });
      ws.once('error', reject);
    });
  }

  get requestId(): string {
    return String(this.upgradeHeaders['x-router-request-id']);
  }

  next(): Promise<Json> {
    const m = this.queue.shift();
    if (m !== undefined) return Promise.resolve(m);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  async until(match: (m: Json) => boolean): Promise<Json> {
    for (;;) {
      const m = await this.next();
      if (match(m)) return m;
    }
  }

  /** Sends a JSON message as a text frame; returns the exact text. */
  send(message: Json): string {
    const text = JSON.stringify(message);
    this.ws.send(text);
    return text;
  }

  /**
   * OpenAI Realtime: switches the session to text output (waiting for session.updated) and adds one user
   * message; returns the texts sent, in order.
   */
  async textConversation(userText: string): Promise<string[]> {
    const sent = [
      this.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'] } }),
    ];
    await this.until((m) => m.type === 'session.updated');
    sent.push(
      this.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: userText }] },
      }),
    );
    return sent;
  }
}
