// Listings for people: jobs, workers, and a job's placement verdicts, as aligned columns. Each command's
// --json prints the API's answer instead, for scripts.
import { REQUIRED_FILTERS } from '../placement/index.js';
import type { JobView, PlacementExplanation, WorkerView } from '../protocol/types.js';

/** Columns padded to their widest cell; the last is left ragged. */
function columns(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return (
    rows
      .map((r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

const COMMAND_WIDTH = 60;

/** One line per job: id, state, queue, attempts, how long ago it was enqueued, its command. */
export function jobTable(jobs: JobView[], now = Date.now()): string {
  const rows = jobs.map((j) => [
    String(j.id),
    j.state,
    j.queue,
    `${j.attempts}/${j.maxAttempts}`,
    ago(now - Date.parse(j.createdAt)),
    commandLine(j.command),
  ]);
  return columns([['ID', 'STATE', 'QUEUE', 'ATTEMPTS', 'ENQUEUED', 'COMMAND'], ...rows]);
}

/** One line per worker: what it runs out of what it has, where, and when it was last heard from. */
export function workerTable(workers: WorkerView[], now = Date.now()): string {
  const rows = workers.map((w) => [
    w.name,
    w.id,
    w.state,
    w.region ?? '-',
    `${w.allocated.slots}/${w.capacity.slots}`,
    `${w.allocated.cpu}/${w.capacity.cpu}`,
    `${w.allocated.memoryMb}/${w.capacity.memoryMb}`,
    w.queues.join(','),
    ago(now - Date.parse(w.lastSeenAt)),
  ]);
  return columns([
    ['NAME', 'ID', 'STATE', 'REGION', 'SLOTS', 'CPU (m)', 'MEMORY (MB)', 'QUEUES', 'LAST SEEN'],
    ...rows,
  ]);
}

/** The summary, then each live worker: whether it fits, and why not or how well. */
export function placementTable(p: PlacementExplanation): string {
  const head = `job ${p.jobId} (${p.state}, ${p.mode} placement): ${p.summary}\n`;
  if (p.verdicts.length === 0) return head;
  const rows = p.verdicts.map((v) => [
    v.workerId === p.bestWorkerId ? `${v.workerName} *` : v.workerName,
    v.workerId,
    v.fits ? 'yes' : 'no',
    v.fits ? (v.total === undefined ? '' : `score ${Math.round(v.total)}`) : refusal(v.filter, v.reason),
  ]);
  const best = p.bestWorkerId ? '* the worker ranked first\n' : '';
  return head + columns([['WORKER', 'ID', 'FITS', 'WHY'], ...rows]) + best;
}

/** A built-in filter's reason says what it checked ("region ord≠mad"); a plugin's is named. */
const refusal = (filter = '', reason = '') =>
  filter === 'queue' || REQUIRED_FILTERS.includes(filter) ? reason : `${filter}: ${reason}`;

function commandLine(command: string[]): string {
  const line = command.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`)).join(' ');
  return line.length > COMMAND_WIDTH ? `${line.slice(0, COMMAND_WIDTH - 1)}…` : line;
}

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86_400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}
