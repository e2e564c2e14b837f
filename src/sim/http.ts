import type { IncomingMessage, ServerResponse } from 'node:http';

/** The request's whole body. */
export function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

export function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

/** Waits `ms` real milliseconds before an answer (none for 0): the simulated latency of a phase. */
export function delay(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

/** The parts of a multipart/form-data body: name, filename and bytes of each. */
export function multipartParts(body: Buffer, contentType: string): { name: string; filename?: string; data: Buffer }[] {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  if (!boundary) return [];
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts: { name: string; filename?: string; data: Buffer }[] = [];
  let start = body.indexOf(delimiter);
  while (start !== -1) {
    const next = body.indexOf(delimiter, start + delimiter.length);
    if (next === -1) break;
    const part = body.subarray(start + delimiter.length + 2, next - 2); // after CRLF, before CRLF
    const headerEnd = part.indexOf('\r\n\r\n');
    if (headerEnd !== -1) {
      const headers = part.subarray(0, headerEnd).toString('utf8');
      const name = /name="([^"]*)"/.exec(headers)?.[1] ?? '';
      const filename = /filename="([^"]*)"/.exec(headers)?.[1];
      parts.push({ name, filename, data: part.subarray(headerEnd + 4) });
    }
    start = next;
  }
  return parts;
}
