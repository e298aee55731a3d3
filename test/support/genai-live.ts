// Test support: one text turn through the official @google/genai live client (ai.live.connect) against a
// gateway, then the SDK's own close. Returns what the assertions read; the caller checks them.

import { GoogleGenAI, type LiveConnectConfig, type LiveServerMessage } from '@google/genai';
import { ACCESS_KEY } from './stack.ts';

export interface LiveTextTurn {
  /** The text of every modelTurn part, joined. */
  readonly said: string;
  /** The message that completed the turn (its usageMetadata). */
  readonly last: LiveServerMessage;
  /** The close code the SDK saw after its own close(). */
  readonly closedWith: number;
  readonly errors: readonly unknown[];
}

export async function liveTextTurn(
  gatewayUrl: string,
  rid: string,
  model: string,
  config: LiveConnectConfig,
  prompt: string,
): Promise<LiveTextTurn> {
  const ai = new GoogleGenAI({
    apiKey: ACCESS_KEY,
    httpOptions: { baseUrl: gatewayUrl, headers: { 'x-router-request-id': rid } },
  });
  let said = '';
  let turnDone!: (m: LiveServerMessage) => void;
  const complete = new Promise<LiveServerMessage>((resolve) => {
    turnDone = resolve;
  });
  let closedWith!: (code: number) => void;
  const closed = new Promise<number>((resolve) => {
    closedWith = resolve;
  });
  const errors: unknown[] = [];
  const session = await ai.live.connect({
    model,
    config,
    callbacks: {
      onmessage: (m) => {
        for (const part of m.serverContent?.modelTurn?.parts ?? []) said += part.text ?? '';
        if (m.serverContent?.turnComplete) turnDone(m);
      },
      onerror: (e) => errors.push(e),
      onclose: (e) => closedWith(e.code),
    },
  });
  session.sendClientContent({ turns: [{ role: 'user', parts: [{ text: prompt }] }] });
  const last = await complete;
  session.close();
  return { said, last, closedWith: await closed, errors };
}
