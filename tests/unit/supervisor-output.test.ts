/** Output from supervised processes: byte-exact, contiguous offsets, and the cap with its marker. */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { coalesceChunks, OutputSequencer, truncationMarker, type OutputChunk } from '../../worker/output.js';
import { supervisedProcesses } from '../support/supervised.js';

const procs = supervisedProcesses('skipjack-out-');
const run = procs.run;

function expectContiguous(chunks: OutputChunk[]): void {
  let next = 0;
  for (const chunk of chunks) {
    expect(chunk.offset).toBe(next);
    next += chunk.data.length;
  }
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A deterministic byte pattern that is not valid UTF-8, so any decoding would show. */
const PATTERN_SOURCE = 'const b=Buffer.alloc(1<<20);for(let i=0;i<b.length;i++)b[i]=(i*31+7)&255;';
function patternBytes(mebibytes: number): Buffer {
  const block = Buffer.alloc(1 << 20);
  for (let i = 0; i < block.length; i++) block[i] = (i * 31 + 7) & 255;
  return Buffer.concat(Array.from({ length: mebibytes }, () => block));
}

describe('output from a process', () => {
  test('20 MiB of binary output arrives byte-exact with contiguous offsets', async () => {
    const script = `${PATTERN_SOURCE}for(let k=0;k<20;k++)process.stdout.write(b)`;
    const { proc, chunks } = run({ command: [process.execPath, '-e', script] });
    const result = await proc.done;

    const expected = patternBytes(20);
    expect(result).toMatchObject({ reason: 'exited', exitCode: 0, outputBytes: expected.length, truncated: false });
    expectContiguous(chunks);
    expect(chunks.every((c) => c.stream === 'stdout')).toBe(true);
    expect(sha256(Buffer.concat(chunks.map((c) => c.data)))).toBe(sha256(expected));
  });

  test('stdout and stderr share one offset sequence, each chunk labelled', async () => {
    const { proc, chunks } = run({ command: ['sh', '-c', 'echo out1; echo err1 >&2; echo out2; echo err2 >&2'] });
    const result = await proc.done;
    const of = (stream: string) =>
      Buffer.concat(chunks.filter((c) => c.stream === stream).map((c) => c.data)).toString();

    expectContiguous(chunks);
    expect(of('stdout')).toBe('out1\nout2\n');
    expect(of('stderr')).toBe('err1\nerr2\n');
    expect(result.outputBytes).toBe(20);
  });

  test('past the cap, output is cut at exactly the cap, marked once, and the job runs to its end', async () => {
    const cap = 100_000;
    const finished = path.join(procs.scratch(), 'finished');
    const script = [
      `${PATTERN_SOURCE}process.stdout.write(b.subarray(0, 300000));`,
      // The same stream: across stdout and stderr, which the reader sees first is a race.
      // process.exit() drops what a pipe has not taken yet: exit once the last write is flushed.
      `process.stdout.write('later\\n', () => setTimeout(() => { require('fs').writeFileSync(${JSON.stringify(finished)}, ''); process.exit(7); }, 100));`,
    ].join('');
    const { proc, chunks } = run({ command: [process.execPath, '-e', script], outputCapBytes: cap });
    const result = await proc.done;

    const jobChunks = chunks.filter((c) => c.stream !== 'system');
    const systemChunks = chunks.filter((c) => c.stream === 'system');
    const marker = truncationMarker(cap);
    expectContiguous(chunks);
    expect(Buffer.concat(jobChunks.map((c) => c.data))).toEqual(patternBytes(1).subarray(0, cap));
    expect(systemChunks).toEqual([{ stream: 'system', offset: cap, data: marker }]);
    expect(chunks[chunks.length - 1]!.stream).toBe('system');
    expect(marker.toString()).toBe(`\n[skipjack] output truncated at ${cap} bytes; the job kept running\n`);
    expect(result).toMatchObject({
      reason: 'exited',
      exitCode: 7,
      truncated: true,
      outputBytes: cap + marker.length,
      droppedBytes: 300_000 + 'later\n'.length - cap,
    });
    expect(existsSync(finished)).toBe(true);
  });
});

describe('OutputSequencer', () => {
  function sequence(cap: number, pushes: string[]): OutputChunk[] {
    const chunks: OutputChunk[] = [];
    const sequencer = new OutputSequencer(cap, (c) => chunks.push(c));
    pushes.forEach((p, i) => sequencer.push(i % 2 ? 'stderr' : 'stdout', Buffer.from(p)));
    return chunks;
  }
  const show = (chunks: OutputChunk[]) => chunks.map((c) => [c.stream, c.offset, c.data.toString()]);

  test('output of exactly the cap is not truncated', () => {
    expect(show(sequence(6, ['abc', 'def']))).toEqual([
      ['stdout', 0, 'abc'],
      ['stderr', 3, 'def'],
    ]);
  });

  test('the chunk that crosses the cap is split, then one marker, then nothing', () => {
    expect(show(sequence(4, ['abc', 'def', 'ghi']))).toEqual([
      ['stdout', 0, 'abc'],
      ['stderr', 3, 'd'],
      ['system', 4, truncationMarker(4).toString()],
    ]);
  });

  test('a cap of 0 keeps nothing but the marker', () => {
    expect(show(sequence(0, ['abc', 'def']))).toEqual([['system', 0, truncationMarker(0).toString()]]);
  });

  test('empty reads produce no chunks', () => {
    expect(sequence(10, ['', 'a', ''])).toHaveLength(1);
  });
});

describe('coalesceChunks', () => {
  const chunk = (stream: OutputChunk['stream'], offset: number, data: string): OutputChunk => ({
    stream,
    offset,
    data: Buffer.from(data),
  });
  const show = (chunks: OutputChunk[]) => chunks.map((c) => [c.stream, c.offset, c.data.toString()]);

  test('merges contiguous chunks of one stream, keeps stream changes apart', () => {
    const chunks = [
      chunk('stdout', 0, 'ab'),
      chunk('stdout', 2, 'cd'),
      chunk('stderr', 4, 'e'),
      chunk('stdout', 5, 'f'),
    ];
    expect(show(coalesceChunks(chunks))).toEqual([
      ['stdout', 0, 'abcd'],
      ['stderr', 4, 'e'],
      ['stdout', 5, 'f'],
    ]);
  });

  test('respects maxBytes and never splits a chunk', () => {
    const chunks = [chunk('stdout', 0, 'ab'), chunk('stdout', 2, 'cd'), chunk('stdout', 4, 'efghij')];
    expect(show(coalesceChunks(chunks, 4))).toEqual([
      ['stdout', 0, 'abcd'],
      ['stdout', 4, 'efghij'],
    ]);
  });

  test('does not join across a gap in offsets', () => {
    expect(coalesceChunks([chunk('stdout', 0, 'ab'), chunk('stdout', 5, 'cd')])).toHaveLength(2);
  });
});
