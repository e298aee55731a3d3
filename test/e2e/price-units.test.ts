// Endpoints that are not billed by tokens carry their own price units (docs/billing.md "Price units"):
// images by count, size and quality; speech by input characters; transcription and translation by
// seconds of audio (from the reply, else judged from the uploaded file), tokens where the upstream
// reports them. Real gateway + sidecar + upstream and billing simulators, prices from the shipped
// deploy/config/pricing.yaml; each event's items, pricing_hints and the wallet debit are checked.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Decimal } from 'decimal.js';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

let stack: BillingStack;
before(async () => {
  stack = await startBillingStack();
});
after(() => stack.close());

let seq = 0;

async function send(
  path: string,
  body: Record<string, unknown> | FormData,
): Promise<{ rid: string; status: number; event: UsageEvent; debit: string }> {
  const rid = `units-${++seq}`;
  const before = new Decimal(stack.debited());
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'x-router-request-id': rid,
      ...(body instanceof FormData ? {} : { 'content-type': 'application/json' }),
    },
    body: body instanceof FormData ? body : JSON.stringify(body),
  });
  await res.arrayBuffer();
  assert.equal(res.status, 200, path);
  const event = structuredClone(await stack.eventFor(rid));
  // Every event names its price table; the checks below are of the items and their hints.
  const xb = event['x-billing'];
  assert.match(event.raw_json.meta.price_version ?? '', /^sha256:[0-9a-f]{16}$/);
  assert.equal(xb?.price_version, event.raw_json.meta.price_version);
  delete xb?.price_version;
  return { rid, status: res.status, event, debit: new Decimal(stack.debited()).minus(before).toFixed() };
}

/** sum(quantity / pricing_unit * unit_price) over the priced items, exactly. */
function expectedAmount(event: UsageEvent): string {
  const billing = event['x-billing'];
  let total = new Decimal(0);
  for (const item of billing?.items ?? []) {
    const hint = billing?.pricing_hints?.[item.metric];
    if (hint)
      total = total.plus(new Decimal(item.quantity).times(hint.unit_price).dividedBy(hint.pricing_unit));
  }
  return total.toFixed();
}

/** A PCM WAV of exactly `seconds` (16 kHz, mono, 16-bit). */
function wav(seconds: number): Blob {
  const byteRate = 16_000 * 2;
  const dataBytes = seconds * byteRate;
  const buf = Buffer.alloc(44 + dataBytes);
  buf.write('RIFF', 0, 'latin1');
  buf.writeUInt32LE(36 + dataBytes, 4);
  buf.write('WAVEfmt ', 8, 'latin1');
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20);
  buf.writeUInt16LE(1, 22);
  buf.writeUInt32LE(16_000, 24);
  buf.writeUInt32LE(byteRate, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36, 'latin1');
  buf.writeUInt32LE(dataBytes, 40);
  for (let i = 44; i < buf.length; i++) buf[i] = (i * 7) & 0xff;
  return new Blob([buf], { type: 'audio/wav' });
}

function audioForm(
  model: string,
  file: Blob,
  filename: string,
  extra: Record<string, string> = {},
): FormData {
  const form = new FormData();
  form.set('model', model);
  form.set('file', file, filename);
  for (const [k, v] of Object.entries(extra)) form.set(k, v);
  return form;
}

test('dall-e-3: images priced per image by size and quality', async () => {
  const { event, debit } = await send('/v1/images/generations', {
    model: 'dall-e-3',
    prompt: 'a lighthouse at dusk',
    n: 2,
    size: '1792x1024',
    quality: 'hd',
  });
  assert.equal(event.raw_json.api, 'images.generations');
  assert.equal(event.raw_json.usage_stage, 'upstream');
  assert.equal(event.raw_json.usage.images, 2);
  assert.deepEqual(event['x-billing'], {
    items: [{ metric: 'images', quantity: 2, unit: 'image' }],
    pricing_hints: { images: { unit_price: 0.12, pricing_unit: 1, currency: 'USD' } },
  });
  assert.equal(debit, '0.24');
});

test('dall-e-2 without a size: the default price; images.edits reads size and n from the form', async () => {
  const plain = await send('/v1/images/generations', { model: 'dall-e-2', prompt: 'a cat' });
  assert.deepEqual(plain.event['x-billing'], {
    items: [{ metric: 'images', quantity: 1, unit: 'image' }],
    pricing_hints: { images: { unit_price: 0.02, pricing_unit: 1, currency: 'USD' } },
  });
  assert.equal(plain.debit, '0.02');

  const form = new FormData();
  form.set('model', 'dall-e-2');
  form.set('prompt', 'add a hat');
  form.set('n', '3');
  form.set('size', '512x512');
  form.set('image', new Blob([Buffer.from('89504e470d0a1a0a', 'hex')], { type: 'image/png' }), 'in.png');
  const edit = await send('/v1/images/edits', form);
  assert.equal(edit.event.raw_json.api, 'images.edits');
  assert.deepEqual(edit.event['x-billing'], {
    items: [{ metric: 'images', quantity: 3, unit: 'image' }],
    pricing_hints: { images: { unit_price: 0.018, pricing_unit: 1, currency: 'USD' } },
  });
  assert.equal(edit.debit, '0.054');
});

test('gpt-image-1: the tokens its reply reports are billed; the image count is recorded', async () => {
  const { event, debit } = await send('/v1/images/generations', {
    model: 'gpt-image-1',
    prompt: 'a red fox',
  });
  const items = event['x-billing']?.items ?? [];
  const prompt = items.find((i) => i.metric === 'prompt_tokens');
  const completion = items.find((i) => i.metric === 'completion_tokens');
  assert.ok(prompt && prompt.quantity > 0);
  assert.equal(completion?.quantity, 272, 'the simulator reports 272 output tokens per image');
  assert.deepEqual(
    items.find((i) => i.metric === 'images'),
    { metric: 'images', quantity: 1, unit: 'image' },
  );
  assert.deepEqual(event['x-billing']?.pricing_hints, {
    prompt_tokens: { unit_price: 5, pricing_unit: 1_000_000, currency: 'USD' },
    completion_tokens: { unit_price: 40, pricing_unit: 1_000_000, currency: 'USD' },
  });
  assert.equal(debit, expectedAmount(event));
  assert.notEqual(debit, '0');
});

test('tts-1: speech billed by the input characters (code points), not estimated tokens', async () => {
  const input = 'Hello, wörld 👋 — ready?';
  const { event, debit } = await send('/v1/audio/speech', { model: 'tts-1', input, voice: 'alloy' });
  const characters = [...input].length;
  assert.equal(event.raw_json.api, 'audio.speech');
  assert.equal(event.raw_json.usage_stage, 'upstream');
  assert.equal(event.raw_json.usage.input_characters, characters);
  assert.equal(event.raw_json.usage.input_tokens, 0);
  assert.deepEqual(event['x-billing'], {
    items: [{ metric: 'input_characters', quantity: characters, unit: 'character' }],
    pricing_hints: { input_characters: { unit_price: 15, pricing_unit: 1_000_000, currency: 'USD' } },
  });
  assert.equal(debit, new Decimal(characters).times(15).dividedBy(1_000_000).toFixed());
});

test('whisper-1 transcription, json: the seconds the reply reports, priced per minute', async () => {
  // The simulator reports max(1, round(bytes / 16000)) seconds.
  const file = new Blob([Buffer.alloc(160_000, 1)], { type: 'audio/mpeg' });
  const { event, debit } = await send('/v1/audio/transcriptions', audioForm('whisper-1', file, 'a.mp3'));
  assert.equal(event.raw_json.usage_stage, 'upstream');
  assert.equal(event.raw_json.usage.audio_seconds, 10);
  assert.deepEqual(event['x-billing'], {
    items: [{ metric: 'audio_seconds', quantity: 10, unit: 'second' }],
    pricing_hints: { audio_seconds: { unit_price: 0.006, pricing_unit: 60, currency: 'USD' } },
  });
  assert.equal(debit, '0.001');
});

test('whisper-1 translation, verbose_json: the duration of the reply', async () => {
  const file = new Blob([Buffer.alloc(480_000, 2)], { type: 'audio/mpeg' });
  const { event, debit } = await send(
    '/v1/audio/translations',
    audioForm('whisper-1', file, 'b.mp3', { response_format: 'verbose_json' }),
  );
  assert.equal(event.raw_json.api, 'audio.translations');
  assert.equal(event.raw_json.usage.audio_seconds, 30);
  assert.deepEqual(event['x-billing']?.items, [{ metric: 'audio_seconds', quantity: 30, unit: 'second' }]);
  assert.equal(debit, '0.003');
});

test('whisper-1, response_format text: the length of the uploaded WAV, marked estimated', async () => {
  const { event, debit } = await send(
    '/v1/audio/transcriptions',
    audioForm('whisper-1', wav(90), 'speech.wav', { response_format: 'text' }),
  );
  assert.equal(event.raw_json.usage_stage, 'estimated');
  assert.equal(event.raw_json.usage.audio_seconds, 90);
  assert.equal(event.raw_json.usage.input_tokens, 0, 'not estimated as tokens');
  assert.deepEqual(event['x-billing'], {
    items: [{ metric: 'audio_seconds', quantity: 90, unit: 'second' }],
    pricing_hints: { audio_seconds: { unit_price: 0.006, pricing_unit: 60, currency: 'USD' } },
  });
  assert.equal(debit, '0.009');
});

test('gpt-4o-transcribe, json: the tokens it reports replace the file estimate', async () => {
  const { event, debit } = await send(
    '/v1/audio/transcriptions',
    audioForm('gpt-4o-transcribe', wav(4), 'short.wav'),
  );
  assert.equal(event.raw_json.usage_stage, 'upstream');
  const metrics = (event['x-billing']?.items ?? []).map((i) => i.metric);
  assert.deepEqual(metrics, ['prompt_tokens', 'completion_tokens']);
  assert.deepEqual(event['x-billing']?.pricing_hints, {
    prompt_tokens: { unit_price: 6, pricing_unit: 1_000_000, currency: 'USD' },
    completion_tokens: { unit_price: 10, pricing_unit: 1_000_000, currency: 'USD' },
  });
  assert.equal(debit, expectedAmount(event));
});

test('start-up: the reference-price notice is logged and every served model has a price', async () => {
  const notices = stack.logs.filter((l) => l.level === 40 && /holds reference prices/.test(l.msg));
  assert.equal(notices.length, 1, JSON.stringify(stack.logs.map((l) => l.msg)));
  assert.equal(stack.logs.filter((l) => /served models? ha(s|ve) no price/.test(l.msg)).length, 0);
  const metrics = await (await fetch(`${stack.url}/metrics`)).text();
  assert.match(metrics, /^router_unpriced_models 0$/m);
});
