// Times every request under the Express route pattern that answered it (/jobs/:id, never
// /jobs/42); a request no route matched is "unmatched", so a made-up URL adds no series.
import type { NextFunction, Request, Response } from 'express';
import type { Metrics } from './index.js';
import { methodLabel } from './labels.js';

export const UNMATCHED = 'unmatched';

export function httpMetrics(metrics: Pick<Metrics, 'http'>) {
  return (req: Request, res: Response, next: NextFunction) => {
    const end = metrics.http.startTimer();
    res.once('close', () => {
      // Routers are mounted at the root, so the pattern alone is the route. A route that passed
      // the request on stays in req.route; the fallback 404 marks it unmatched.
      const route: string = res.locals.unmatched || !req.route ? UNMATCHED : String(req.route.path);
      end({ method: methodLabel(req.method), route, status: String(res.statusCode) });
    });
    next();
  };
}
