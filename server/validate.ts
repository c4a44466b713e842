// zod at the edge: bad input becomes a 400 that names the field, before anything changes.
import { z } from 'zod';
import { HttpError } from './errors.js';

export function parse<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query' | 'params'): z.output<S> {
  const unfit = unfitPart(input);
  if (unfit) throw invalidRequest([{ path: [where, ...unfit.path].join('.'), message: unfit.message }]);
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  throw invalidRequest(
    result.error.issues.map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message })),
  );
}

/** The 400 for bad input: the first issue in the message, every issue in `issues`. */
export function invalidRequest(issues: { path: string; message: string }[]): HttpError {
  return new HttpError(400, 'invalid_request', `${issues[0].path}: ${issues[0].message}`, { issues });
}

// Digits only: Number() would also take 0x10, 1e3 and ' 1' as ids.
export const idParam = z.strictObject({
  id: z
    .string()
    .regex(/^[1-9][0-9]{0,15}$/, 'must be a positive job id')
    .transform(Number)
    .pipe(z.number().max(Number.MAX_SAFE_INTEGER, 'must be a positive job id')),
});
export const workerParam = z.strictObject({ id: z.uuid('must be a worker id (uuid)') });

const MAX_DEPTH = 64;
/** No schema takes a longer array or more keys (a batch's jobs, a command, chunks, leases). */
const MAX_ITEMS = 10_000;
/** Values in one body: a full batch of ordinary jobs fits many times over. */
const MAX_VALUES = 2_000_000;
// A lone UTF-16 surrogate: JSON carries it, PostgreSQL's json and text cannot.
const loneSurrogate = /\p{Cs}/u;

/**
 * The first part of a request that no schema should see, and why, if any:
 * - a "__proto__" key: JSON.parse makes it an ordinary key, and zod drops it without a word
 *   (copied over, it would set the prototype): a label constraint so named vanished;
 * - a string or key with a lone surrogate: jsonb refused it with a 500, text stored U+FFFD;
 * - nesting deeper than any request needs, which a recursive walk would pay for with its stack;
 * - an array or object bigger than any schema takes, refused before it is walked (a 2 MB array
 *   cost a walk of 262 ms before zod counted its items), and a body of too many values.
 * Breadth first and without recursion, so a body of any shape is walked safely.
 */
function unfitPart(input: unknown): { path: string[]; message: string } | null {
  // Each entry: a value, the entry it is under and its key there (the path, rebuilt only if needed).
  const queue: { value: unknown; under: number; key: string; depth: number }[] = [
    { value: input, under: -1, key: '', depth: 0 },
  ];
  const pathOf = (i: number, ...more: string[]) => {
    const path = more;
    for (let at = i; at > 0; at = queue[at].under) path.unshift(queue[at].key);
    return path;
  };
  for (let i = 0; i < queue.length; i++) {
    const { value, depth } = queue[i];
    if (typeof value === 'string') {
      if (loneSurrogate.test(value))
        return { path: pathOf(i), message: 'must be valid Unicode (it holds a lone surrogate)' };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_DEPTH) return { path: pathOf(i), message: `must not nest more than ${MAX_DEPTH} levels deep` };
    const size = Array.isArray(value) ? value.length : Object.keys(value).length;
    if (size > MAX_ITEMS)
      return {
        path: pathOf(i),
        message: `must have at most ${MAX_ITEMS} ${Array.isArray(value) ? 'items' : 'keys'} (it has ${size})`,
      };
    if (queue.length + size > MAX_VALUES)
      return { path: pathOf(i), message: `the body holds more than ${MAX_VALUES} values` };
    if (Object.hasOwn(value, '__proto__'))
      return { path: pathOf(i, '__proto__'), message: "must not be a key: it would set the object's prototype" };
    for (const key in value) {
      if (loneSurrogate.test(key))
        return { path: pathOf(i, key), message: 'must be a valid Unicode key (it holds a lone surrogate)' };
      queue.push({ value: (value as Record<string, unknown>)[key], under: i, key, depth: depth + 1 });
    }
  }
  return null;
}
