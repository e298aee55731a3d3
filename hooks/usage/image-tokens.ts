// Input tokens of an image by the vendors' published rules (test/fixtures/usage/counting-rules.md), from
// its size, which is read from the first bytes of inline (base64) data: PNG, GIF, WebP and JPEG headers.
// An image given by URL has no size here: OpenAI's low detail needs none; otherwise a typical size is
// assumed (1024 x 1024), so the count is an estimate for such images.

export interface ImageSize {
  readonly width: number;
  readonly height: number;
}

const ASSUMED: ImageSize = { width: 1024, height: 1024 };
/** Base64 characters decoded to find a JPEG's frame header (it follows the EXIF and colour data). */
const HEADER_CHARS = 256 * 1024;

function jpegSize(b: Buffer): ImageSize | undefined {
  let at = 2;
  while (at + 9 < b.length) {
    if (b[at] !== 0xff) return undefined;
    const marker = b[at + 1]!;
    const length = b.readUInt16BE(at + 2);
    // Start-of-frame markers, but not DHT (C4), JPG (C8) or DAC (CC).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: b.readUInt16BE(at + 5), width: b.readUInt16BE(at + 7) };
    }
    at += 2 + length;
  }
  return undefined;
}

function webpSize(b: Buffer): ImageSize | undefined {
  const chunk = b.toString('latin1', 12, 16);
  if (chunk === 'VP8 ' && b.length >= 30) {
    return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
  }
  if (chunk === 'VP8L' && b.length >= 25) {
    const bits = b.readUInt32LE(21);
    return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X' && b.length >= 30) {
    return { width: b.readUIntLE(24, 3) + 1, height: b.readUIntLE(27, 3) + 1 };
  }
  return undefined;
}

/** The size of an image from its base64 data, or undefined when the format is not recognised. */
export function base64ImageSize(data: string): ImageSize | undefined {
  const b = Buffer.from(data.length > HEADER_CHARS ? data.slice(0, HEADER_CHARS) : data, 'base64');
  if (b.length >= 24 && b.readUInt32BE(0) === 0x89504e47) {
    return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
  }
  if (b.length >= 10 && b.toString('latin1', 0, 3) === 'GIF') {
    return { width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
  }
  if (b.length >= 16 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') {
    return webpSize(b);
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) return jpegSize(b);
  return undefined;
}

/** The size of an image given as a URL: known for a base64 data URL only. */
export function urlImageSize(url: string): ImageSize | undefined {
  const comma = url.indexOf(',');
  if (!url.startsWith('data:') || comma < 0 || !url.slice(0, comma).endsWith(';base64')) return undefined;
  return base64ImageSize(url.slice(comma + 1));
}

function scaledToFit(size: ImageSize, box: number): ImageSize {
  const scale = Math.min(1, box / Math.max(size.width, size.height));
  return { width: size.width * scale, height: size.height * scale };
}

/**
 * OpenAI (vision guide, "Calculating costs"): low detail 85; otherwise the image is scaled to fit 2048 x
 * 2048, then its shortest side to 768, and costs 85 plus 170 per 512 px tile.
 */
export function openaiImageTokens(size: ImageSize | undefined, detail: string | undefined): number {
  if (detail === 'low') return 85;
  const fit = scaledToFit(size ?? ASSUMED, 2048);
  const scale = Math.min(1, 768 / Math.min(fit.width, fit.height));
  const tiles = Math.ceil((fit.width * scale) / 512) * Math.ceil((fit.height * scale) / 512);
  return 85 + 170 * tiles;
}

/** Anthropic (vision guide): width x height / 750, after scaling the long edge to at most 1568 px. */
export function anthropicImageTokens(size: ImageSize | undefined): number {
  const fit = scaledToFit(size ?? ASSUMED, 1568);
  return Math.ceil((fit.width * fit.height) / 750);
}

/**
 * Gemini (token guide): 258 for an image of at most 384 px on both sides; a larger one is cut into
 * 768 x 768 tiles of 258 each.
 */
export function geminiImageTokens(size: ImageSize | undefined): number {
  const s = size ?? ASSUMED;
  if (s.width <= 384 && s.height <= 384) return 258;
  return 258 * Math.ceil(s.width / 768) * Math.ceil(s.height / 768);
}
