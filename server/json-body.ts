// The JSON body of the requests nearly every client sends (application/json in UTF-8, not
// compressed, its length given), read without body-parser's decoder and stream machinery, which
// run cold at the start of each request on an idle server: a job reaches its worker 0.1 ms sooner
// (bench/ latency, interleaved job by job). Any other body goes on to express.json(), and a bad
// one fails as there, so the error handler answers both alike.
import type { NextFunction, Request, Response } from 'express';

const PLAIN_JSON = /^application\/json\s*(;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;
const BOM = 0xfeff;

export function plainJsonBody(limitBytes: number) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const length = Number(req.headers['content-length']);
    const encoding = req.headers['content-encoding'];
    const plain =
      PLAIN_JSON.test(req.headers['content-type'] ?? '') && (encoding === undefined || encoding === 'identity');
    if (!plain || !(length > 0 && length <= limitBytes)) return next();
    const chunks: Buffer[] = [];
    let done = false;
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('error', (err) => {
      if (!done) next(Object.assign(err, { status: 400, type: 'request.aborted' }));
      done = true;
    });
    req.once('end', () => {
      if (done) return;
      done = true;
      let text = Buffer.concat(chunks).toString('utf8');
      if (text.charCodeAt(0) === BOM) text = text.slice(1);
      try {
        req.body = parseObjectOrArray(text);
      } catch (err) {
        return next(Object.assign(err as Error, { status: 400, type: 'entity.parse.failed', body: text }));
      }
      // body-parser's mark: express.json() leaves a body read here alone.
      (req as Request & { _body?: boolean })._body = true;
      next();
    });
  };
}

/** As body-parser's strict mode: only an object or an array at the top. */
function parseObjectOrArray(text: string): unknown {
  const first = /\S/.exec(text)?.[0];
  if (first !== '{' && first !== '[')
    throw new SyntaxError(`a JSON body must be an object or an array, not ${JSON.stringify(text.slice(0, 20))}`);
  return JSON.parse(text);
}
