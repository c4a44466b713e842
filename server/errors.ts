// Errors that carry their HTTP answer. Anything else reaching the error handler is a bug (500).

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export const notFound = (what: string) => new HttpError(404, 'not_found', `${what} not found`);

/**
 * A worker acting under an id this database does not hold: never registered here, or the database
 * was reset or restored since. A code of its own, so that a worker can tell it from a proxy's 404
 * and register again.
 */
export const unknownWorker = (workerId: string) =>
  new HttpError(
    404,
    'unknown_worker',
    `worker ${workerId} is not registered here (the database may have been reset); register again`,
  );

/** A lease token that is not the job's live one: the caller lost the job and must stop acting on it. */
export const staleLease = (jobId: number) =>
  new HttpError(409, 'stale_lease', `job ${jobId}: lease token is not the live lease (expired, released or reclaimed)`);
