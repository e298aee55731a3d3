// Test support for the shipped dashboard and alert rules: the /metrics pages of a real gateway and its
// billing sidecar (billing on, the billing simulator behind it) after plain and streamed requests, so
// the metrics those files query are checked against what the processes actually serve.

import assert from 'node:assert/strict';
import { startBillingStack } from './billing-stack.ts';
import { ACCESS_KEY } from './stack.ts';

export interface LiveMetrics {
  /** The gateway's /metrics text. */
  readonly gateway: string;
  /** The sidecar's /metrics text (its own port). */
  readonly sidecar: string;
}

export async function scrapeLiveMetrics(): Promise<LiveMetrics> {
  const stack = await startBillingStack();
  try {
    const post = async (path: string, body: Record<string, unknown>, id: string) => {
      const res = await fetch(`${stack.url}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          'content-type': 'application/json',
          'x-router-request-id': id,
        },
        body: JSON.stringify(body),
      });
      assert.equal(res.status, 200, `${path} ${id}`);
      await res.arrayBuffer();
    };
    const messages = [{ role: 'user', content: 'hello metrics' }];
    await post('/v1/chat/completions', { model: 'gpt-5.4-mini', messages }, 'live-metrics-plain');
    await post(
      '/v1/chat/completions',
      { model: 'gpt-5.4-mini', messages, stream: true, stream_options: { include_usage: true } },
      'live-metrics-stream',
    );
    await post(
      '/v1/messages',
      { model: 'claude-haiku-5-5', max_tokens: 64, messages, stream: true },
      'live-metrics-messages',
    );
    // Delivered: the sidecar's delivery counters have moved too.
    for (const id of ['live-metrics-plain', 'live-metrics-stream', 'live-metrics-messages'])
      await stack.eventFor(id);
    const sidecarUrl = stack.sidecar?.url;
    assert.ok(sidecarUrl !== undefined);
    const [gateway, sidecar] = await Promise.all(
      [`${stack.url}/metrics`, `${sidecarUrl}/metrics`].map(async (url) => {
        const res = await fetch(url);
        assert.equal(res.status, 200, url);
        return res.text();
      }),
    );
    return { gateway: gateway!, sidecar: sidecar! };
  } finally {
    await stack.close();
  }
}
