// zod at the edge: bad input becomes a 400 that names the field, before anything changes.
import { z } from 'zod';
import { HttpError } from './errors.js';

export function parse<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query' | 'params'): z.output<S> {
  const proto = protoKeyPath(input);
  if (proto) throw invalidRequest([{ path: [where, ...proto].join('.'), message: 'must not be a key: it would set the object\'s prototype' }]);
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  throw invalidRequest(result.error.issues.map((i) => ({ path: [where, ...i.path.map(String)].join('.'), message: i.message })));
}

/** The 400 for bad input: the first issue in the message, every issue in `issues`. */
export function invalidRequest(issues: { path: string; message: string }[]): HttpError {
  return new HttpError(400, 'invalid_request', `${issues[0].path}: ${issues[0].message}`, { issues });
}

// Digits only: Number() would also take 0x10, 1e3 and ' 1' as ids.
export const idParam = z.strictObject({
  id: z.string().regex(/^[1-9][0-9]{0,15}$/, 'must be a positive job id').transform(Number).pipe(z.number().max(Number.MAX_SAFE_INTEGER, 'must be a positive job id')),
});
export const workerParam = z.strictObject({ id: z.uuid('must be a worker id (uuid)') });

/**
 * Where a "__proto__" key is, if anywhere. JSON.parse makes it an ordinary key, and zod drops it
 * without a word (copied over, it would set the prototype): a label constraint so named vanished.
 */
function protoKeyPath(value: unknown): string[] | null {
  if (value === null || typeof value !== 'object') return null;
  if (Object.hasOwn(value, '__proto__')) return ['__proto__'];
  for (const key in value) {
    const below = protoKeyPath((value as Record<string, unknown>)[key]);
    if (below) return [key, ...below];
  }
  return null;
}
