import { DEFAULT_OUTPUT_CAP_BYTES } from '../protocol/schemas.js';
/**
 * The output of one job attempt as a single byte sequence: stdout and stderr interleaved in
 * arrival order, each chunk labelled with its stream and its byte offset in the sequence.
 * Bytes stay Buffers end to end: job output need not be UTF-8, and decoding would corrupt it.
 */

export type OutputStream = 'stdout' | 'stderr' | 'system';

export interface OutputChunk {
  stream: OutputStream;
  /** Byte offset of data[0] in the attempt's combined output sequence. */
  offset: number;
  data: Buffer;
}

export { DEFAULT_OUTPUT_CAP_BYTES };

export function truncationMarker(capBytes: number): Buffer {
  return Buffer.from(`\n[skipjack] output truncated at ${capBytes} bytes; the job kept running\n`);
}

/**
 * Numbers the chunks and enforces the cap: exactly `capBytes` bytes of job output pass, then one
 * 'system' chunk (the marker, which takes its own place in the sequence), then nothing more.
 * Bytes past the cap are counted, not kept: a job that logs too much is not killed for it.
 */
export class OutputSequencer {
  private nextOffset = 0;
  private jobBytes = 0;
  private cut = false;

  constructor(
    private readonly capBytes: number,
    private readonly emit: (chunk: OutputChunk) => void,
  ) {}

  push(stream: 'stdout' | 'stderr', data: Buffer): void {
    if (data.length === 0) return;
    const room = Math.max(0, this.capBytes - this.jobBytes);
    this.jobBytes += data.length;
    if (room > 0) this.deliver(stream, data.length <= room ? data : data.subarray(0, room));
    if (data.length > room && !this.cut) {
      this.cut = true;
      this.deliver('system', truncationMarker(this.capBytes));
    }
  }

  /** Bytes delivered so far, marker included: the offset the next chunk would have. */
  get deliveredBytes(): number {
    return this.nextOffset;
  }

  get truncated(): boolean {
    return this.cut;
  }

  /** Job output bytes that arrived past the cap and were dropped. */
  get droppedBytes(): number {
    return Math.max(0, this.jobBytes - this.capBytes);
  }

  private deliver(stream: OutputStream, data: Buffer): void {
    const chunk = { stream, offset: this.nextOffset, data };
    this.nextOffset += data.length;
    this.emit(chunk);
  }
}

/**
 * Merges neighbouring chunks of the same stream whose bytes are contiguous, up to `maxBytes` per
 * merged chunk, so a shipper can send fewer, larger pieces. A single chunk larger than `maxBytes`
 * is kept whole, not split. Offsets and bytes are preserved exactly.
 */
export function coalesceChunks(chunks: readonly OutputChunk[], maxBytes = 1024 * 1024): OutputChunk[] {
  const runs: ChunkRun[] = [];
  for (const chunk of chunks) {
    const last = runs[runs.length - 1];
    if (last && canExtend(last, chunk, maxBytes)) {
      last.parts.push(chunk.data);
      last.bytes += chunk.data.length;
    } else {
      runs.push({ first: chunk, parts: [chunk.data], bytes: chunk.data.length });
    }
  }
  return runs.map((run) =>
    run.parts.length === 1 ? run.first : { ...run.first, data: Buffer.concat(run.parts, run.bytes) },
  );
}

interface ChunkRun {
  first: OutputChunk;
  parts: Buffer[];
  bytes: number;
}

function canExtend(run: ChunkRun, chunk: OutputChunk, maxBytes: number): boolean {
  return (
    run.first.stream === chunk.stream &&
    run.first.offset + run.bytes === chunk.offset &&
    run.bytes + chunk.data.length <= maxBytes
  );
}
