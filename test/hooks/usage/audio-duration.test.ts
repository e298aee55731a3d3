import assert from 'node:assert/strict';
import { test } from 'node:test';
import { audioFileSeconds, FALLBACK_BITS_PER_SECOND } from '../../../hooks/usage/audio-duration.ts';

/** "fLaC" and a STREAMINFO block with the given sample rate and total sample count (36 bits). */
function flac(sampleRate: number, totalSamples: number, trailing = 100): Buffer {
  const buf = Buffer.alloc(8 + 34 + trailing);
  buf.write('fLaC', 0, 'latin1');
  buf[4] = 0x80; // last-metadata-block flag set, block type 0 (STREAMINFO)
  buf.writeUIntBE(34, 5, 3);
  const info = 8;
  buf[info + 10] = (sampleRate >> 12) & 0xff;
  buf[info + 11] = (sampleRate >> 4) & 0xff;
  // Low 4 bits of the rate, then 2 channels (1) and 16 bits per sample (15): 0b0001, 0b111.
  buf[info + 12] = ((sampleRate & 0x0f) << 4) | (1 << 1) | 0;
  buf[info + 13] = (0x0f << 4) | Math.floor(totalSamples / 2 ** 32);
  buf.writeUInt32BE(totalSamples % 2 ** 32, info + 14);
  return buf;
}

/** An ID3v2 tag of `tagBytes` payload, then an MPEG frame header and `frameBytes` in all from it. */
function mp3(header: [number, number, number], tagBytes: number, frameBytes: number): Buffer {
  const buf = Buffer.alloc(10 + tagBytes + frameBytes);
  buf.write('ID3', 0, 'latin1');
  buf[3] = 4;
  buf[6] = (tagBytes >> 21) & 0x7f;
  buf[7] = (tagBytes >> 14) & 0x7f;
  buf[8] = (tagBytes >> 7) & 0x7f;
  buf[9] = tagBytes & 0x7f;
  buf.set(header, 10 + tagBytes);
  return buf;
}

test('FLAC: total samples over sample rate, exact, including counts above 32 bits', () => {
  assert.deepEqual(audioFileSeconds(flac(44_100, 441_000)), { seconds: 10, exact: true });
  assert.deepEqual(audioFileSeconds(flac(48_000, 48_000 * 100_000)), { seconds: 100_000, exact: true });
});

test('FLAC without a total sample count falls back to the size estimate', () => {
  const file = flac(44_100, 0);
  assert.deepEqual(audioFileSeconds(file), {
    seconds: (file.length * 8) / FALLBACK_BITS_PER_SECOND,
    exact: false,
  });
});

test('MP3 after an ID3 tag: the first frame bitrate, marked estimated', () => {
  // MPEG-1 layer III, bitrate index 9 (128 kbit/s): 16,000 bytes from the frame are one second.
  assert.deepEqual(audioFileSeconds(mp3([0xff, 0xfb, 0x90], 300, 16_000)), { seconds: 1, exact: false });
  // MPEG-2 layer III, bitrate index 8 (64 kbit/s).
  assert.deepEqual(audioFileSeconds(mp3([0xff, 0xf3, 0x80], 200, 24_000)), { seconds: 3, exact: false });
});

test('MP3 headers with a free or bad bitrate, or cut files, fall back without throwing', () => {
  for (const file of [
    mp3([0xff, 0xfb, 0x00], 0, 8_000), // free format
    mp3([0xff, 0xfb, 0xf0], 0, 8_000), // bitrate index 15 (bad)
    mp3([0xff, 0xfb, 0x90], 5_000, 4).subarray(0, 200), // tag longer than the file
    Buffer.from('ID3\u0004\u0000\u0000\u0000\u0000\u0000\u0000', 'latin1'), // a bare tag header
    Buffer.from([0x00, 0x00, 0xff, 0xfb, 0x90, 0x00]), // a header too close to the end to be read
  ]) {
    assert.deepEqual(audioFileSeconds(file), {
      seconds: (file.length * 8) / FALLBACK_BITS_PER_SECOND,
      exact: false,
    });
  }
});
