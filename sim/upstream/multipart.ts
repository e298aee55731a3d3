// multipart/form-data bodies (image edits, audio uploads), parsed with busboy from the buffered body.

import type { IncomingHttpHeaders } from 'node:http';
import busboy from 'busboy';

export interface MultipartFile {
  field: string;
  filename: string;
  mimeType: string;
  size: number;
}

export interface MultipartSummary {
  fields: Record<string, string>;
  files: MultipartFile[];
}

export function isMultipart(headers: IncomingHttpHeaders): boolean {
  return (headers['content-type'] ?? '').toLowerCase().startsWith('multipart/form-data');
}

export function parseMultipart(headers: IncomingHttpHeaders, body: Buffer): Promise<MultipartSummary> {
  return new Promise((resolve, reject) => {
    const summary: MultipartSummary = { fields: {}, files: [] };
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers, limits: { fieldSize: 1 << 20 } });
    } catch (err) {
      reject(err);
      return;
    }
    parser.on('field', function onField(name, value) {
      summary.fields[name] = value;
    });
    parser.on('file', function onFile(field, stream, info) {
      const file: MultipartFile = { field, filename: info.filename ?? '', mimeType: info.mimeType, size: 0 };
      summary.files.push(file);
      stream.on('data', function onData(chunk: Buffer) {
        file.size += chunk.length;
      });
    });
    parser.on('error', reject);
    parser.on('close', function onClose() {
      resolve(summary);
    });
    parser.end(body);
  });
}

/** Header-safe description of what arrived: `{"fields":[..names],"files":[{field,filename,size}]}`. */
export function describeMultipart(m: MultipartSummary): string {
  return encodeURIComponent(
    JSON.stringify({
      fields: Object.keys(m.fields),
      files: m.files.map((f) => ({ field: f.field, filename: f.filename, size: f.size })),
    }),
  );
}
