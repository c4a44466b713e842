// Bearer tokens with scopes. A deploy tool holds an `enqueue` token, an agent a `worker` token,
// an operator an `admin` token (which may do everything). With no tokens configured the server
// is open, which is safe only on loopback, its default address.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { HttpError } from './errors.js';

export const scopes = ['enqueue', 'worker', 'admin'] as const;
export type Scope = (typeof scopes)[number];

/** Which scope each route needs; the first match wins. null: open to anyone (probes, the API document). */
const routeScopes: [method: string, path: RegExp, scope: Scope | 'any' | null][] = [
  ['GET', /^\/(healthz|readyz|openapi\.json)?$/, null], // '/' is the dashboard page; its data calls need a token
  ['GET', /^\/metrics$/, 'any'],
  ['GET', /^\/jobs$/, 'any'], // the list (enqueue) and the poll (worker) share the path
  ['POST', /^\/jobs$/, 'enqueue'],
  ['GET', /^\/jobs\/\d+(\/(logs|attempts|placement))?$/, 'enqueue'],
  ['POST', /^\/jobs\/\d+\/cancel$/, 'enqueue'],
  ['POST', /^\/jobs\/\d+\/(claim|heartbeat|logs|release|restart)$/, 'worker'],
  ['POST', /^\/(claims|releases)$/, 'worker'],
  ['POST', /^\/workers$/, 'worker'],
  ['POST', /^\/workers\/[^/]+\/(heartbeat|end-poll)$/, 'worker'],
  ['DELETE', /^\/workers\/[^/]+$/, 'worker'],
  ['GET', /^\/workers\/[^/]+\/leases$/, 'worker'],
  ['GET', /^\/workers(\/[^/]+)?$/, 'any'],
  ['GET', /^\/schedules$/, 'any'],
  ['POST', /^\/schedules$/, 'admin'],
  ['DELETE', /^\/schedules\/[^/]+$/, 'admin'],
];

export interface TokenTable {
  /** sha256 of each token → its scope. */
  byHash: Map<string, Scope>;
}

/** "admin:TOKEN,worker:TOKEN,enqueue:TOKEN" (SKIPJACK_TOKENS); a scope may appear more than once. */
export function parseTokens(spec: string | undefined): TokenTable {
  const byHash = new Map<string, Scope>();
  for (const entry of (spec ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const colon = entry.indexOf(':');
    const scope = entry.slice(0, colon) as Scope;
    const token = entry.slice(colon + 1);
    if (colon <= 0 || !scopes.includes(scope))
      throw new Error(
        `SKIPJACK_TOKENS: "${entry.slice(0, 20)}…" should be scope:token with scope one of ${scopes.join(', ')}`,
      );
    if (token.length < 16) throw new Error(`SKIPJACK_TOKENS: the ${scope} token is shorter than 16 characters`);
    byHash.set(hash(token), scope);
  }
  return { byHash };
}

const hash = (token: string) => createHash('sha256').update(token).digest('hex');

/** Sets res.locals.scope to the caller's scope: admin where the server has no tokens. */
export function authenticate(tokens: TokenTable) {
  return (req: Request, res: Response, next: NextFunction) => {
    res.locals.scope = 'admin';
    if (tokens.byHash.size === 0) return next();
    const needed = scopeFor(req.method, req.path);
    if (needed === null) return next();
    const granted = scopeOf(tokens, req.get('authorization'));
    if (!granted)
      return next(new HttpError(401, 'unauthorized', 'a bearer token is required (Authorization: Bearer TOKEN)'));
    if (granted !== 'admin' && needed !== 'any' && granted !== needed) {
      return next(new HttpError(403, 'forbidden', `this needs a token with the ${needed} scope; yours has ${granted}`));
    }
    res.locals.scope = granted;
    next();
  };
}

/** A new worker's key, returned once at registration; the server keeps only its sha256. */
export function newWorkerKey(): { key: string; sha256: string } {
  const key = randomBytes(32).toString('base64url');
  return { key, sha256: hash(key) };
}

/** Whether the caller is this worker (it shows the key), or an admin: a worker token alone is any agent. */
export function actsForWorker(res: Response, keySha256: string | null, presented: string | undefined): boolean {
  if (res.locals.scope === 'admin') return true;
  if (!keySha256 || !presented) return false;
  return timingSafeEqual(Buffer.from(keySha256), Buffer.from(hash(presented)));
}

/** The scope a request needs (the OpenAPI document's security says the same). */
export function scopeFor(method: string, path: string): Scope | 'any' | null {
  for (const [m, re, scope] of routeScopes) if (m === method && re.test(path)) return scope;
  return 'admin';
}

function scopeOf(tokens: TokenTable, header: string | undefined): Scope | null {
  const token = /^Bearer\s+(\S+)$/i.exec(header ?? '')?.[1];
  if (!token) return null;
  const h = Buffer.from(hash(token));
  for (const [known, scope] of tokens.byHash) if (timingSafeEqual(Buffer.from(known), h)) return scope;
  return null;
}
