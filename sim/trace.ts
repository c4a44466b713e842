// Trace files: one job per row, as CSV (with a header) or JSONL. Fields: arrival (seconds from the
// start), runSeconds, and optionally class, queue, priority, cpu, memoryMb, diskMb, region (a|b for a
// set), labels (k=v;k=v in CSV, an object in JSONL). A row that does not parse stops the load, naming it.
import { z } from 'zod';
import type { JobConstraints } from '../placement/index.js';

export interface TraceJob {
  arrival: number;
  runSeconds: number;
  className: string;
  queue: string;
  priority: number;
  constraints: JobConstraints;
}

const num = z.coerce.number().finite();
const row = z.object({
  arrival: num.min(0),
  runSeconds: num.positive(),
  class: z.string().min(1).optional(),
  queue: z.string().min(1).default('default'),
  priority: num.int().default(0),
  cpu: num.int().min(0).optional(),
  memoryMb: num.int().min(0).optional(),
  diskMb: num.int().min(0).optional(),
  region: z.union([z.string(), z.array(z.string())]).optional(),
  labels: z.union([z.string(), z.record(z.string(), z.union([z.string(), z.array(z.string())]))]).optional(),
});

/** Empty CSV cells mean "not given". */
function dropEmpty(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== '' && v !== null && v !== undefined));
}

function parseLabels(v: unknown): JobConstraints['labels'] {
  if (typeof v !== 'string') return v as JobConstraints['labels'];
  const pairs = v.split(';').filter(Boolean);
  return Object.fromEntries(
    pairs.map((p) => {
      const [k, val = ''] = p.split('=');
      return [k!.trim(), val.includes('|') ? val.split('|') : val.trim()];
    }),
  );
}

function toJob(raw: Record<string, unknown>, where: string): TraceJob {
  const parsed = row.safeParse(dropEmpty(raw));
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new Error(`${where}: ${i.path.join('.') || 'row'}: ${i.message}`);
  }
  const r = parsed.data;
  const resources = dropEmpty({ cpu: r.cpu, memoryMb: r.memoryMb, diskMb: r.diskMb });
  const region = typeof r.region === 'string' && r.region.includes('|') ? r.region.split('|') : r.region;
  const constraints: JobConstraints = dropEmpty({
    region,
    labels: r.labels === undefined ? undefined : parseLabels(r.labels),
    resources: Object.keys(resources).length ? resources : undefined,
  });
  return {
    arrival: r.arrival,
    runSeconds: r.runSeconds,
    className: r.class ?? r.queue,
    queue: r.queue,
    priority: r.priority,
    constraints,
  };
}

/** CSV without quoting: trace fields hold no commas (sets use |, labels use ;). */
function parseCsv(text: string, file: string): TraceJob[] {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = lines[0]!.split(',').map((h) => h.trim());
  return lines.slice(1).map((line, i) => {
    const cells = line.split(',');
    return toJob(Object.fromEntries(header.map((h, j) => [h, cells[j]?.trim()])), `${file}:${i + 2}`);
  });
}

function parseJsonl(text: string, file: string): TraceJob[] {
  return text.split(/\r?\n/).flatMap((line, i) => {
    if (line.trim() === '') return [];
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`${file}:${i + 1}: not JSON`);
    }
    return [toJob(value as Record<string, unknown>, `${file}:${i + 1}`)];
  });
}

/** JSONL when the first non-blank character is `{`, else CSV. Sorted by arrival, stably. */
export function parseTrace(text: string, file = 'trace'): TraceJob[] {
  const jobs = text.trimStart().startsWith('{') ? parseJsonl(text, file) : parseCsv(text, file);
  return jobs
    .map((j, i) => ({ j, i }))
    .sort((a, b) => a.j.arrival - b.j.arrival || a.i - b.i)
    .map(({ j }) => j);
}
