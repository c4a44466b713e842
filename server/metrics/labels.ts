// Label values are bounded: a Prometheus series per made-up queue or URL would grow without end.

/** Queue names as label values: the first `cap` seen in the jobs table keep their own, the rest are "other". */
export class BoundedLabels {
  private readonly known = new Set<string>();

  constructor(readonly cap: number) {}

  /** Call only with a value that is in the database (a job's queue), never with a request's input. */
  label(value: string): string {
    if (this.known.has(value)) return value;
    if (this.known.size >= this.cap) return OTHER;
    this.known.add(value);
    return value;
  }
}

export const OTHER = 'other';

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);
export const methodLabel = (method: string) => (METHODS.has(method) ? method : OTHER);

/** The placement filters a refusal may name; a plugin's filter counts as "other". */
const REFUSAL_REASONS = new Set(['region', 'labels', 'resources', 'queue', 'worker-active', 'deadline']);
export const refusalLabel = (reason: string) => (REFUSAL_REASONS.has(reason) ? reason : OTHER);
