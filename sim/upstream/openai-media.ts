// OpenAI images and audio: generations, edits, speech, transcriptions and translations.

import { describeMultipart, isMultipart, parseMultipart } from './multipart.ts';
import { badRequest, json, MIDSTREAM_ERROR, SSE } from './openai-common.ts';
import { asNumber, asString, nextId, nowSeconds, splitPieces, tokens } from './text.ts';
import type { Knobs, SimReply, SimRequest } from './types.ts';

// ---------------------------------------------------------------- images

// A valid 1x1 transparent PNG: small, but a real image for clients that decode it.
const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

function imageReply(prompt: string, n: number, model: string, responseFormat: unknown, knobs: Knobs) {
  // dall-e models answer with URLs by default; gpt-image models always with b64_json.
  const asUrl = responseFormat === 'url' || (responseFormat === undefined && model.startsWith('dall-e'));
  const data = Array.from({ length: n }, (_, i) =>
    asUrl
      ? { url: `https://sim.invalid/images/${nextId('img_')}-${i}.png`, revised_prompt: prompt }
      : { b64_json: PNG_1X1, revised_prompt: prompt },
  );
  const inputTokens = tokens(prompt);
  const outputTokens = 272 * n; // a low-quality square image is billed at 272 tokens
  const usage =
    knobs.noUsage || !model.startsWith('gpt-image')
      ? undefined
      : {
          input_tokens: inputTokens,
          output_tokens: outputTokens,
          total_tokens: inputTokens + outputTokens,
          input_tokens_details: { text_tokens: inputTokens, image_tokens: 0 },
        };
  return { created: nowSeconds(), data, usage };
}

export function imageGenerations(req: SimRequest): SimReply {
  const body = req.json;
  const prompt = asString(body?.prompt);
  if (!body || prompt === undefined) return badRequest("Missing required parameter: 'prompt'.");
  const n = Math.max(1, Math.min(asNumber(body.n) ?? 1, 10));
  return json(imageReply(prompt, n, asString(body.model) ?? 'dall-e-2', body.response_format, req.knobs));
}

export async function imageEdits(req: SimRequest): Promise<SimReply> {
  if (!isMultipart(req.headers)) return badRequest('Expected a multipart/form-data body.');
  const form = await parseMultipart(req.headers, req.body);
  if (form.files.length === 0) return badRequest("Missing required parameter: 'image'.");
  const prompt = form.fields.prompt ?? '';
  const n = Math.max(1, Math.min(Number(form.fields.n ?? 1) || 1, 10));
  const model = form.fields.model ?? 'dall-e-2';
  const reply = imageReply(prompt, n, model, form.fields.response_format, req.knobs);
  return json(reply, { 'x-sim-multipart': describeMultipart(form) });
}

// ---------------------------------------------------------------- audio

const AUDIO_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/** Fake audio: an MPEG frame header then deterministic bytes; about 64 bytes per input character. */
function fakeAudio(input: string): Buffer {
  const size = 418 + Buffer.byteLength(input) * 64;
  const buf = Buffer.alloc(size);
  buf[0] = 0xff;
  buf[1] = 0xfb;
  buf[2] = 0x90;
  buf[3] = 0x64;
  for (let i = 4; i < size; i++) buf[i] = (i * 31 + input.length) & 0xff;
  return buf;
}

export function speech(req: SimRequest): SimReply {
  const body = req.json;
  const input = asString(body?.input);
  if (!body || input === undefined) return badRequest("Missing required parameter: 'input'.");
  const format = asString(body.response_format) ?? 'mp3';
  return {
    kind: 'bytes',
    status: 200,
    contentType: AUDIO_TYPES[format] ?? 'audio/mpeg',
    body: fakeAudio(input),
  };
}

function timestamp(seconds: number, sep: string): string {
  const ms = Math.round(seconds * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(Math.floor(ms / 3_600_000))}:${p(Math.floor(ms / 60_000) % 60)}:${p(Math.floor(ms / 1000) % 60)}${sep}${p(ms % 1000, 3)}`;
}

export function audioText(task: 'transcribe' | 'translate') {
  return async function audioHandler(req: SimRequest): Promise<SimReply> {
    if (!isMultipart(req.headers)) return badRequest('Expected a multipart/form-data body.');
    const form = await parseMultipart(req.headers, req.body);
    const file = form.files.find((f) => f.field === 'file');
    if (!file) return badRequest("Missing required parameter: 'file'.");
    const model = form.fields.model ?? 'whisper-1';
    const text = `${task === 'translate' ? 'Translated' : 'Transcribed'} ${file.size} bytes of audio from ${file.filename}.`;
    const seconds = Math.max(1, Math.round(file.size / 16_000));
    const format = form.fields.response_format ?? 'json';
    const headers = { 'x-sim-multipart': describeMultipart(form) };
    const textTokens = tokens(form.fields.prompt ?? '');
    const outTokens = tokens(text);
    const audioTokens = seconds * 10;
    const usage = req.knobs.noUsage
      ? undefined
      : model.startsWith('whisper')
        ? { type: 'duration', seconds }
        : {
            type: 'tokens',
            input_tokens: textTokens + audioTokens,
            input_token_details: { text_tokens: textTokens, audio_tokens: audioTokens },
            output_tokens: outTokens,
            total_tokens: textTokens + audioTokens + outTokens,
          };
    if (form.fields.stream === 'true' && task === 'transcribe') {
      const frames = splitPieces(text, req.knobs.chunks).map(
        (delta) => `data: ${JSON.stringify({ type: 'transcript.text.delta', delta, logprobs: [] })}\n\n`,
      );
      frames.push(`data: ${JSON.stringify({ type: 'transcript.text.done', text, logprobs: [], usage })}\n\n`);
      return { kind: 'stream', contentType: SSE, frames, errorFrame: MIDSTREAM_ERROR, headers };
    }
    switch (format) {
      case 'text':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `${text}\n`,
          headers,
        };
      case 'srt':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `1\n${timestamp(0, ',')} --> ${timestamp(seconds, ',')}\n${text}\n\n`,
          headers,
        };
      case 'vtt':
        return {
          kind: 'bytes',
          status: 200,
          contentType: 'text/plain; charset=utf-8',
          body: `WEBVTT\n\n${timestamp(0, '.')} --> ${timestamp(seconds, '.')}\n${text}\n\n`,
          headers,
        };
      case 'verbose_json':
        return json(
          {
            task,
            language: 'english',
            duration: seconds,
            text,
            segments: [
              {
                id: 0,
                seek: 0,
                start: 0,
                end: seconds,
                text,
                tokens: [],
                temperature: 0,
                avg_logprob: -0.2,
                compression_ratio: 1,
                no_speech_prob: 0,
              },
            ],
            usage,
          },
          headers,
        );
      default:
        return json({ text, usage }, headers);
    }
  };
}
