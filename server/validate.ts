// zod at the edge: bad input becomes a 400 that names the field, before anything changes.
import { z } from 'zod';
import { HttpError } from './errors.js';

export function parse<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query' | 'params'): z.output<S> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({
    path: [where, ...i.path.map(String)].join('.'),
    message: i.message,
  }));
  const first = issues[0];
  throw new HttpError(400, 'invalid_request', `${first.path}: ${first.message}`, { issues });
}

export const idParam = z.strictObject({ id: z.coerce.number().int().positive('must be a positive job id') });
export const workerParam = z.strictObject({ id: z.uuid('must be a worker id (uuid)') });
