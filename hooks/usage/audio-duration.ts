// Length of an uploaded audio file, for transcription replies that do not state it (response_format
// text, srt, vtt, and json from servers that report no usage). docs/billing.md "Price units" lists how
// exact each format is:
// - WAV: exact (data chunk size / byte rate from the fmt chunk);
// - FLAC: exact (total samples / sample rate from STREAMINFO), when the encoder wrote the total;
// - MP3: the bitrate of the first frame (exact for constant bitrate, an estimate for variable);
// - anything else (ogg/opus, webm, m4a, mp4, mpga without a readable frame): an estimate at
//   FALLBACK_BITS_PER_SECOND.

/** Assumed bitrate of audio whose container is not read: a common speech-quality compressed rate. */
export const FALLBACK_BITS_PER_SECOND = 64_000;

function wavSeconds(data: Buffer): number | undefined {
  if (
    data.length < 12 ||
    data.toString('latin1', 0, 4) !== 'RIFF' ||
    data.toString('latin1', 8, 12) !== 'WAVE'
  )
    return undefined;
  let byteRate: number | undefined;
  let at = 12;
  while (at + 8 <= data.length) {
    const id = data.toString('latin1', at, at + 4);
    const size = data.readUInt32LE(at + 4);
    const start = at + 8;
    if (id === 'fmt ' && start + 12 <= data.length) byteRate = data.readUInt32LE(start + 8);
    if (id === 'data') {
      if (byteRate === undefined || byteRate === 0) return undefined;
      // Streamed WAVs write 0 or 0xFFFFFFFF as the size: then the rest of the file is the data.
      const bytes =
        size === 0 || size === 0xffffffff ? data.length - start : Math.min(size, data.length - start);
      return bytes / byteRate;
    }
    at = start + size + (size % 2);
  }
  return undefined;
}

function flacSeconds(data: Buffer): number | undefined {
  // "fLaC", then the first metadata block (4-byte header) is STREAMINFO.
  if (data.length < 8 + 18 || data.toString('latin1', 0, 4) !== 'fLaC' || (data.readUInt8(4) & 0x7f) !== 0)
    return undefined;
  const info = 8;
  const sampleRate =
    (data.readUInt8(info + 10) << 12) | (data.readUInt8(info + 11) << 4) | (data.readUInt8(info + 12) >> 4);
  const totalSamples = (data.readUInt8(info + 13) & 0x0f) * 2 ** 32 + data.readUInt32BE(info + 14);
  if (sampleRate === 0 || totalSamples === 0) return undefined;
  return totalSamples / sampleRate;
}

// kbit/s by bitrate index, layer III: MPEG-1, and MPEG-2 / 2.5.
const MP3_BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0];
const MP3_BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0];

function mp3Seconds(data: Buffer): number | undefined {
  let at = 0;
  // An ID3v2 tag first: 10-byte header, then a size in four 7-bit bytes.
  if (data.length >= 10 && data.toString('latin1', 0, 3) === 'ID3') {
    at =
      10 +
      ((data.readUInt8(6) & 0x7f) << 21) +
      ((data.readUInt8(7) & 0x7f) << 14) +
      ((data.readUInt8(8) & 0x7f) << 7) +
      (data.readUInt8(9) & 0x7f);
  }
  const limit = Math.min(data.length - 4, at + 4096);
  for (let i = at; i < limit; i++) {
    if (data[i] !== 0xff || (data.readUInt8(i + 1) & 0xe0) !== 0xe0) continue;
    const version = (data.readUInt8(i + 1) >> 3) & 0x03; // 3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5, 1 reserved
    const layer = (data.readUInt8(i + 1) >> 1) & 0x03; // 1 = layer III
    const index = data.readUInt8(i + 2) >> 4;
    if (version === 1 || layer !== 1) continue;
    const kbps = (version === 3 ? MP3_BITRATES_V1 : MP3_BITRATES_V2)[index];
    if (kbps === undefined || kbps === 0) continue;
    return ((data.length - i) * 8) / (kbps * 1000);
  }
  return undefined;
}

/** Ogg, Matroska/WebM and MP4/M4A: compressed frames in them can look like MPEG frame headers. */
function otherContainer(data: Buffer): boolean {
  if (data.length < 12) return false;
  return (
    data.toString('latin1', 0, 4) === 'OggS' ||
    data.readUInt32BE(0) === 0x1a45dfa3 ||
    data.toString('latin1', 4, 8) === 'ftyp'
  );
}

/** Seconds of audio in the file, and whether that figure is exact for its format. */
export function audioFileSeconds(data: Buffer): { seconds: number; exact: boolean } | undefined {
  if (data.length === 0) return undefined;
  const wav = wavSeconds(data);
  if (wav !== undefined) return { seconds: wav, exact: true };
  const flac = flacSeconds(data);
  if (flac !== undefined) return { seconds: flac, exact: true };
  const mp3 = otherContainer(data) ? undefined : mp3Seconds(data);
  if (mp3 !== undefined) return { seconds: mp3, exact: false };
  return { seconds: (data.length * 8) / FALLBACK_BITS_PER_SECOND, exact: false };
}
