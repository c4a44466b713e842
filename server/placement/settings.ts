// Placement settings per server and per queue: pull or central, and which filters and rankers.
// Read from SKIPJACK_PLACEMENT (JSON, or a path to a JSON file); plugins are imported here, the
// one place placement touches the file system.
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import {
  buildPlacementConfig,
  builtinFilters,
  builtinRegistry,
  queueFilter,
  registerPlugins,
  type PlacementConfig,
  type Registry,
} from '../../placement/index.js';

export type PlacementMode = 'pull' | 'central';

const rankerSpec = z.strictObject({
  name: z.string().min(1),
  weight: z.number().min(0).optional(),
  params: z.record(z.string(), z.unknown()).optional(),
});
const queueSpec = z.strictObject({
  mode: z.enum(['pull', 'central']).optional(),
  filters: z.array(z.string().min(1)).optional(),
  rankers: z.array(rankerSpec).optional(),
});
export const placementSpecSchema = queueSpec.extend({
  plugins: z.array(z.string().min(1)).default([]),
  queues: z.record(z.string(), queueSpec).default({}),
  /** A worker seen this recently counts as "known" for the enqueue-time check. */
  knownWorkerWindowSeconds: z.number().positive().default(3600),
  /** An assignment its worker has not started by then goes back to pending. */
  assignTimeoutSeconds: z.number().positive().default(30),
  schedulerIntervalMs: z.number().int().min(10).default(250),
});
export type PlacementSpecInput = z.input<typeof placementSpecSchema>;

export interface PlacementSettings {
  defaultMode: PlacementMode;
  modeFor(queue: string): PlacementMode;
  configFor(queue: string): PlacementConfig;
  /** Queues whose mode differs from the default (the SQL splits on these). */
  overriddenQueues: string[];
  /** No queue has a plugin filter: the SQL decides a claim alone, in one statement. */
  filtersInSql: boolean;
  knownWorkerWindowMs: number;
  assignTimeoutMs: number;
  schedulerIntervalMs: number;
}

/** SKIPJACK_PLACEMENT holds JSON when it starts with "{", else the path of a JSON file. */
export function readPlacementSpec(source: string | undefined): unknown {
  if (!source) return {};
  const text = source.trim().startsWith('{') ? source : readFileSync(source, 'utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`SKIPJACK_PLACEMENT: not valid JSON (${(err as Error).message})`, { cause: err });
  }
}

export async function loadPlacementSettings(input: unknown, modeOverride?: PlacementMode): Promise<PlacementSettings> {
  const parsed = placementSpecSchema.safeParse(input);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new Error(`placement settings: ${['placement', ...i.path.map(String)].join('.')}: ${i.message}`);
  }
  const spec = parsed.data;
  let registry: Registry = builtinRegistry;
  for (const path of spec.plugins) registry = registerPlugins(await import(pluginUrl(path)), registry);
  const defaultMode = modeOverride ?? spec.mode ?? 'pull';
  const build = (s: { filters?: string[]; rankers?: z.infer<typeof rankerSpec>[] }) =>
    withQueueFilter(buildPlacementConfig(s, registry));
  const base = build({ filters: spec.filters, rankers: spec.rankers });
  const perQueue = new Map(
    Object.entries(spec.queues).map(([queue, q]) => [
      queue,
      {
        mode: q.mode ?? defaultMode,
        config:
          q.filters || q.rankers
            ? build({ filters: q.filters ?? spec.filters, rankers: q.rankers ?? spec.rankers })
            : base,
      },
    ]),
  );
  return {
    defaultMode,
    modeFor: (queue) => perQueue.get(queue)?.mode ?? defaultMode,
    configFor: (queue) => perQueue.get(queue)?.config ?? base,
    overriddenQueues: [...perQueue].filter(([, q]) => q.mode !== defaultMode).map(([name]) => name),
    filtersInSql: [base, ...[...perQueue.values()].map((q) => q.config)].every(onlyBuiltinFilters),
    knownWorkerWindowMs: spec.knownWorkerWindowSeconds * 1000,
    assignTimeoutMs: spec.assignTimeoutSeconds * 1000,
    schedulerIntervalMs: spec.schedulerIntervalMs,
  };
}

// Queue membership is not a user's choice: a worker only runs jobs from queues it serves.
function withQueueFilter(config: PlacementConfig): PlacementConfig {
  return { ...config, filters: [queueFilter, ...config.filters] };
}

function onlyBuiltinFilters(config: PlacementConfig): boolean {
  return config.filters.every((f) => f === queueFilter || builtinFilters[f.name] === f);
}

export const hasCentralQueues = (s: PlacementSettings) => s.defaultMode === 'central' || s.overriddenQueues.length > 0;

function pluginUrl(path: string): string {
  return pathToFileURL(isAbsolute(path) ? path : resolve(process.cwd(), path)).href;
}
