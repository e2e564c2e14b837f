/** Splits a byte stream into text lines, streamed (output files may be far larger than memory). */
export async function* textLines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let carry = '';
  for await (const chunk of chunks) {
    carry += decoder.decode(chunk, { stream: true });
    let newline = carry.indexOf('\n');
    while (newline !== -1) {
      const line = carry.slice(0, newline).replace(/\r$/, '');
      if (line.trim() !== '') yield line;
      carry = carry.slice(newline + 1);
      newline = carry.indexOf('\n');
    }
  }
  carry += decoder.decode();
  if (carry.trim() !== '') yield carry;
}

/** Whether a provider's HTTP status (or error type) is worth sending again. */
export function retryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}
