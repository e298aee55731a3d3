// The request each peer gets for each scenario. Simulator knobs (delta count, pacing) travel in the
// model name ("gpt-5.4-mini-chunks-50-delay-10"), so they reach the simulator unchanged through every
// proxy: the gateway forwards no x-sim-* headers, and its registry routes "gpt-*" and "claude-*".

import type { HttpTarget } from './load.ts';
import { BENCH_ACCESS_KEY, type Peer, SIM_KEY } from './peers.ts';

export const CHAT_MODEL = 'gpt-5.4-mini';
export const TRANSLATE_MODEL = 'claude-sonnet-5';

export function pacedModel(base: string, chunks: number, delayMs: number): string {
  return `${base}-chunks-${chunks}-delay-${delayMs}`;
}

function authHeaders(
  peer: Peer,
  upstreamUrl: string,
  provider: 'openai' | 'anthropic',
): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  switch (peer.kind) {
    case 'gateway':
      headers.authorization = `Bearer ${BENCH_ACCESS_KEY}`;
      break;
    case 'portkey':
      headers.authorization = `Bearer ${SIM_KEY}`;
      headers['x-portkey-provider'] = provider;
      headers['x-portkey-custom-host'] = `${upstreamUrl}/v1`;
      break;
    default:
      if (provider === 'anthropic') {
        headers['x-api-key'] = SIM_KEY;
        headers['anthropic-version'] = '2023-06-01';
      } else headers.authorization = `Bearer ${SIM_KEY}`;
  }
  return headers;
}

/** A chat completion (OpenAI wire format) for every kind of peer. */
export function chatTarget(
  peer: Peer,
  upstreamUrl: string,
  opts: { model?: string; stream?: boolean; content?: string } = {},
): HttpTarget {
  const body: Record<string, unknown> = {
    model: opts.model ?? CHAT_MODEL,
    messages: [{ role: 'user', content: opts.content ?? 'Say hello to the benchmark.' }],
  };
  if (opts.stream) body.stream = true;
  return {
    origin: peer.origin,
    path: '/v1/chat/completions',
    method: 'POST',
    headers: authHeaders(peer, upstreamUrl, 'openai'),
    body: JSON.stringify(body),
  };
}

/**
 * Scenario 3: a completion-style stream answered by an Anthropic upstream. The gateway and Portkey
 * translate chat.completions -> Messages and the stream back; direct and nginx get the native Messages
 * stream, the baseline without translation.
 */
export function translateTarget(peer: Peer, upstreamUrl: string, model: string): HttpTarget {
  const content = 'Say hello to the benchmark.';
  if (peer.kind === 'direct' || peer.kind === 'nginx') {
    return {
      origin: peer.origin,
      path: '/v1/messages',
      method: 'POST',
      headers: authHeaders(peer, upstreamUrl, 'anthropic'),
      body: JSON.stringify({ model, max_tokens: 1024, stream: true, messages: [{ role: 'user', content }] }),
    };
  }
  return {
    origin: peer.origin,
    path: '/v1/chat/completions',
    method: 'POST',
    headers: authHeaders(peer, upstreamUrl, 'anthropic'),
    body: JSON.stringify({ model, max_tokens: 1024, stream: true, messages: [{ role: 'user', content }] }),
  };
}

/** The native Messages stream through the gateway: the same upstream stream as translateTarget, untranslated. */
export function nativeMessagesTarget(peer: Peer, upstreamUrl: string, model: string): HttpTarget {
  return {
    origin: peer.origin,
    path: '/v1/messages',
    method: 'POST',
    headers: { ...authHeaders(peer, upstreamUrl, 'anthropic'), 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({
      model,
      max_tokens: 1024,
      stream: true,
      messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    }),
  };
}

/** A prompt of about `bytes` bytes of plain words. */
export function promptOfSize(bytes: number): string {
  const word = 'benchmark ';
  return word.repeat(Math.ceil(bytes / word.length)).slice(0, bytes);
}
