// Image sizes read from inline data, and the vendors' published image rules on their own examples
// (test/fixtures/usage/counting-rules.md).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  anthropicImageTokens,
  base64ImageSize,
  geminiImageTokens,
  openaiImageTokens,
  urlImageSize,
} from '../../../hooks/usage/image-tokens.ts';

function png(width: number, height: number): string {
  const b = Buffer.alloc(33);
  b.writeUInt32BE(0x89504e47, 0);
  b.writeUInt32BE(0x0d0a1a0a, 4);
  b.writeUInt32BE(13, 8);
  b.write('IHDR', 12, 'latin1');
  b.writeUInt32BE(width, 16);
  b.writeUInt32BE(height, 20);
  return b.toString('base64');
}

function jpeg(width: number, height: number): string {
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, ...Buffer.from('JFIF\0'), 1, 1, 0, 0, 1, 0, 1, 0, 0]);
  const sof = Buffer.alloc(19);
  sof.writeUInt16BE(0xffc0, 0);
  sof.writeUInt16BE(17, 2);
  sof[4] = 8;
  sof.writeUInt16BE(height, 5);
  sof.writeUInt16BE(width, 7);
  return Buffer.concat([Buffer.from([0xff, 0xd8]), app0, sof]).toString('base64');
}

function gif(width: number, height: number): string {
  const b = Buffer.alloc(13);
  b.write('GIF89a', 0, 'latin1');
  b.writeUInt16LE(width, 6);
  b.writeUInt16LE(height, 8);
  return b.toString('base64');
}

function webp(width: number, height: number): string {
  const b = Buffer.alloc(30);
  b.write('RIFF', 0, 'latin1');
  b.write('WEBPVP8X', 8, 'latin1');
  b.writeUIntLE(width - 1, 24, 3);
  b.writeUIntLE(height - 1, 27, 3);
  return b.toString('base64');
}

test('the size of PNG, JPEG, GIF and WebP images from their base64 data', () => {
  assert.deepEqual(base64ImageSize(png(640, 480)), { width: 640, height: 480 });
  assert.deepEqual(base64ImageSize(jpeg(1920, 1080)), { width: 1920, height: 1080 });
  assert.deepEqual(base64ImageSize(gif(32, 16)), { width: 32, height: 16 });
  assert.deepEqual(base64ImageSize(webp(800, 600)), { width: 800, height: 600 });
  assert.deepEqual(urlImageSize(`data:image/png;base64,${png(10, 20)}`), { width: 10, height: 20 });
  assert.equal(base64ImageSize('QUJD'), undefined);
  assert.equal(urlImageSize('https://example.com/cat.png'), undefined);
});

test("OpenAI's image rule on the vision guide's examples", () => {
  assert.equal(openaiImageTokens({ width: 1024, height: 1024 }, 'high'), 765);
  assert.equal(openaiImageTokens({ width: 2048, height: 4096 }, 'high'), 1105);
  assert.equal(openaiImageTokens({ width: 4096, height: 8192 }, 'low'), 85);
  assert.equal(openaiImageTokens(undefined, 'low'), 85);
});

test("Anthropic's image rule: width x height / 750 after fitting 1568 px", () => {
  assert.equal(anthropicImageTokens({ width: 1000, height: 1000 }), 1334);
  assert.equal(anthropicImageTokens({ width: 1092, height: 1092 }), 1590);
  assert.equal(anthropicImageTokens({ width: 3136, height: 3136 }), Math.ceil((1568 * 1568) / 750));
});

test("Gemini's image rule: 258 up to 384 px, else 258 per 768 px tile", () => {
  assert.equal(geminiImageTokens({ width: 384, height: 300 }), 258);
  assert.equal(geminiImageTokens({ width: 1024, height: 1024 }), 4 * 258);
  assert.equal(geminiImageTokens({ width: 768, height: 500 }), 258);
});
