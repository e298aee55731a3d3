// The parts of a multipart/form-data body already in memory, found synchronously (usage presets run in
// synchronous hook stages). Part data are views into the body, never copies.

export interface FormPart {
  readonly name: string;
  readonly filename: string | undefined;
  readonly data: Buffer;
}

const HEADER_END = Buffer.from('\r\n\r\n');

function boundaryOf(contentType: string): string | undefined {
  const match = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return match?.[1] ?? match?.[2];
}

/** Parts by field name (the first of each name), or an empty map when the body is not multipart. */
export function multipartParts(contentType: string, body: Buffer): Map<string, FormPart> {
  const parts = new Map<string, FormPart>();
  const boundary = boundaryOf(contentType);
  if (boundary === undefined || !contentType.toLowerCase().startsWith('multipart/form-data')) return parts;
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const headersStart = at + delimiter.length;
    // `--boundary--` closes the body.
    if (body[headersStart] === 0x2d && body[headersStart + 1] === 0x2d) break;
    const headersEnd = body.indexOf(HEADER_END, headersStart);
    if (headersEnd < 0) break;
    const headers = body.toString('latin1', headersStart, headersEnd);
    const dataStart = headersEnd + HEADER_END.length;
    const end = body.indexOf(next, dataStart);
    const dataEnd = end < 0 ? body.length : end;
    const disposition = /content-disposition:[^\r\n]*/i.exec(headers)?.[0] ?? '';
    const name = /\bname="([^"]*)"/i.exec(disposition)?.[1];
    if (name !== undefined && !parts.has(name)) {
      const filename = /\bfilename="([^"]*)"/i.exec(disposition)?.[1];
      parts.set(name, { name, filename, data: body.subarray(dataStart, dataEnd) });
    }
    if (end < 0) break;
    at = end + 2;
  }
  return parts;
}
