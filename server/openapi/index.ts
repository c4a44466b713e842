// The OpenAPI 3.1 document, built from the same zod schemas the routes validate with
// (operations.ts) and the scopes auth.ts enforces: neither can drift from what the server does.
import { z } from 'zod';
import { errorBody } from '../../protocol/responses.js';
import { scopeFor } from '../auth.js';
import { operations, type Operation } from './operations.js';

type JsonSchema = Record<string, unknown>;

/** JSON Schema 2020-12, the dialect OpenAPI 3.1 uses; a refinement or transform is left as any. */
function toSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

const ERRORS: Record<number, string> = {
  400: 'Invalid input; the message names the field',
  401: 'No bearer token, or an unknown one (only when the server has tokens)',
  403: "The token's scope does not allow this",
  404: 'Not found',
  409: 'Conflict: a stale lease, a job taken or already finished',
  413: 'Body larger than the limit',
  415: 'Body not JSON',
  422: 'No known worker could ever run the job (allowUnplaceable accepts the wait)',
  503: 'The database cannot be reached; retry shortly',
};

/** A path such as /jobs/:id as OpenAPI writes it: /jobs/{id}. */
export const openApiPath = (expressPath: string) => expressPath.replace(/:(\w+)/g, '{$1}');

function parameters(op: Operation): JsonSchema[] {
  const from = (where: 'path' | 'query', schema: z.ZodObject | undefined) => {
    if (!schema) return [];
    const json = toSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
    return Object.entries(json.properties ?? {}).map(([name, schema]) => ({
      name,
      in: where,
      required: where === 'path' || (json.required ?? []).includes(name),
      schema,
    }));
  };
  const headers = (op.headers ?? []).map((h) => ({
    name: h.name,
    in: 'header',
    required: false,
    description: h.description,
    schema: { type: 'string' },
  }));
  return [...from('path', op.params), ...from('query', op.query), ...headers];
}

function operation(op: Operation): JsonSchema {
  // The scope auth.ts asks of this route, for a concrete path ('1' stands for any id).
  const scope = scopeFor(op.method.toUpperCase(), op.path.replace(/:\w+/g, '1'));
  const errors = new Set(op.errors ?? []);
  if (op.params || op.query || op.body) errors.add(400);
  if (op.params) errors.add(404);
  if (op.body) [413, 415].forEach((c) => errors.add(c));
  if (scope !== null) [401, 403].forEach((c) => errors.add(c));
  if (op.path !== '/healthz' && op.path !== '/openapi.json' && op.path !== '/') errors.add(503);
  const responses: Record<string, JsonSchema> = {
    [op.ok.status]: {
      description: op.ok.description,
      ...(op.ok.status === 204
        ? {}
        : {
            content: {
              [op.ok.contentType ?? 'application/json']: {
                schema: op.ok.schema ? toSchema(op.ok.schema, 'output') : { type: 'string' },
              },
            },
          }),
    },
  };
  for (const code of [...errors].sort()) {
    responses[code] = {
      description: ERRORS[code],
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  const params = parameters(op);
  return {
    operationId: `${op.method}${op.path.replace(/[/:.-](\w)/g, (_m, c: string) => c.toUpperCase()).replace(/\W/g, '') || 'Root'}`,
    summary: op.summary,
    ...(scope === null ? { security: [] } : { security: [{ bearer: [] }], description: scopeNote(scope) }),
    ...(params.length ? { parameters: params } : {}),
    ...(op.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(op.body, 'input') } } } }
      : {}),
    responses,
  };
}

const scopeNote = (scope: string) =>
  scope === 'any' ? 'Any token (when the server has tokens).' : `A token with the ${scope} scope, or admin.`;

let cached: object | undefined;

export function openApiDocument(): object {
  if (cached) return cached;
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of operations) (paths[openApiPath(op.path)] ??= {})[op.method] = operation(op);
  cached = {
    openapi: '3.1.0',
    info: {
      title: 'Skipjack',
      version: '0.1.0',
      description:
        'Postgres-backed job orchestrator. With no tokens configured the server is open (loopback only); with SKIPJACK_TOKENS, a bearer token of the named scope.',
    },
    paths,
    components: {
      schemas: { Error: toSchema(errorBody, 'output') },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
  };
  return cached;
}
