// The served /openapi.json: valid OpenAPI 3.1 by a strict validator, and it documents exactly
// the routes the app serves, each method and path.
//
// Adding a route: give it a row in server/openapi/operations.ts (method, the Express path,
// params/query/body schemas, the answer and its errors). This test walks the running server's
// Express router (every route of every router mounted on the app, wherever it is mounted), so a
// route served without a row fails "every route the app serves is documented", and a row for a
// route that is gone fails the reverse. Nothing here lists routes by hand.
import { compileErrors, validate } from '@readme/openapi-parser';
import { openApiPath } from '../../server/openapi/index.js';
import { startTestServer, type TestServer } from '../support/server.js';

let t: TestServer;
let doc: { openapi: string; paths: Record<string, Record<string, Operation>> };
beforeAll(async () => {
  t = await startTestServer();
  doc = await (await fetch(`${t.server.url}/openapi.json`)).json();
});
afterAll(async () => {
  await t.close();
});

interface Operation {
  parameters?: { name: string; in: string; required?: boolean }[];
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  security?: unknown[];
}

interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
  matchers?: unknown[];
}

/** "METHOD /path" for every route of the router and the routers mounted in it. */
function servedRoutes(stack: Layer[]): string[] {
  return stack.flatMap((layer) => {
    if (layer.route) {
      const paths = Array.isArray(layer.route.path) ? layer.route.path : [layer.route.path];
      return paths.flatMap((p) =>
        Object.keys(layer.route!.methods)
          .filter((m) => m !== '_all')
          .map((m) => `${m.toUpperCase()} ${openApiPath(p)}`),
      );
    }
    return layer.handle?.stack ? servedRoutes(layer.handle.stack) : [];
  });
}

const documented = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));

test('the served document is valid OpenAPI 3.1 to a strict validator', async () => {
  expect(doc.openapi).toBe('3.1.0');
  const result = await validate(structuredClone(doc) as never);
  if (!result.valid) throw new Error(compileErrors(result));
  expect(result.valid).toBe(true);
});

test('every route the app serves is documented, with its method and path, and nothing else is', () => {
  const served = [...new Set(servedRoutes((t.server.app as unknown as { router: { stack: Layer[] } }).router.stack))];
  // The walk itself works: it finds routes of the mounted routers and of the app.
  expect(served).toEqual(
    expect.arrayContaining(['POST /claims', 'GET /jobs/{id}', 'DELETE /workers/{id}', 'GET /healthz']),
  );
  expect(served.filter((r) => !documented().includes(r))).toEqual([]);
  expect(documented().filter((r) => !served.includes(r))).toEqual([]);
});

test('each operation names its path parameters, and documents its answer and its error body', () => {
  for (const [path, ops] of Object.entries(doc.paths)) {
    const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(ops)) {
      const where = `${method.toUpperCase()} ${path}`;
      const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
      expect([where, pathParams.map((p) => p.name)]).toEqual([where, inPath]);
      expect([where, pathParams.every((p) => p.required)]).toEqual([where, true]);
      const codes = Object.keys(op.responses);
      expect([where, codes.some((c) => c.startsWith('2'))]).toEqual([where, true]);
      for (const code of codes.filter((c) => Number(c) >= 400))
        expect(op.responses[code].content?.['application/json']?.schema).toEqual({
          $ref: '#/components/schemas/Error',
        });
      if (inPath.length) expect([where, codes]).toEqual([where, expect.arrayContaining(['400', '404'])]);
    }
  }
});

test('request bodies, query parameters and security follow the routes and auth.ts', () => {
  const op = (method: string, path: string) => doc.paths[path][method];
  expect(op('post', '/jobs').requestBody).toBeDefined();
  expect(op('post', '/claims').requestBody).toBeDefined();
  expect((op('get', '/jobs').parameters ?? []).map((p) => p.name)).toEqual(
    expect.arrayContaining(['state', 'queue', 'cursor', 'limit', 'available', 'worker']),
  );
  expect((op('get', '/jobs/{id}/logs').parameters ?? []).map((p) => p.name)).toEqual(['id', 'attempt', 'follow']);
  // Open routes say so; a route that needs a token says bearer and answers 401 and 403.
  expect(op('get', '/healthz').security).toEqual([]);
  expect(op('post', '/claims').security).toEqual([{ bearer: [] }]);
  expect(Object.keys(op('post', '/claims').responses)).toEqual(expect.arrayContaining(['401', '403']));
  expect(Object.keys(op('post', '/jobs').responses)).toEqual(expect.arrayContaining(['201', '422']));
});

test('a real answer and a real error have the documented fields', async () => {
  const job = await t.client.enqueue({ command: ['true'], allowUnplaceable: true });
  const schema = doc.paths['/jobs/{id}'].get.responses['200'].content!['application/json'].schema as {
    required: string[];
  };
  expect(Object.keys(job)).toEqual(expect.arrayContaining(schema.required));
  const err = await (await fetch(`${t.server.url}/jobs/999999999`)).json();
  const errorSchema = (doc as unknown as { components: { schemas: { Error: { required: string[] } } } }).components
    .schemas.Error;
  expect(Object.keys(err)).toEqual(expect.arrayContaining(errorSchema.required));
});
