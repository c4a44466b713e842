// Plugins by name, so servers and queues configure placement with JSON. User plugins join through
// registerPlugins; loading their module (a dynamic import) is the server's job, keeping this module pure.
import { labelsFilter, regionFilter, resourcesFilter, workerActiveFilter } from './filters.js';
import {
  affinity,
  binpack,
  leastAllocated,
  mostAllocated,
  readWeight,
  rejectUnknownOptions,
  spread,
} from './rankers.js';
import type { Filter, PlacementConfig, Ranker, RankerFactory, RankerOptions } from './types.js';

export interface RankerSpec {
  name: string;
  weight?: number;
  params?: Record<string, unknown>;
}

/** JSON-able placement configuration, per server or per queue. */
export interface PlacementSpec {
  /** Filter names in the order they run. Must include the four built-ins (see REQUIRED_FILTERS). */
  filters?: string[];
  rankers?: RankerSpec[];
}

export interface Registry {
  filters: Readonly<Record<string, Filter>>;
  rankers: Readonly<Record<string, RankerFactory>>;
}

/** Built-in factories validate their options at run time, so JSON can be handed to them as is. */
function fromJson<O extends RankerOptions>(factory: (options?: O) => Ranker): RankerFactory {
  return (options) => factory(options as O);
}

export const builtinFilters: Readonly<Record<string, Filter>> = Object.freeze({
  [workerActiveFilter.name]: workerActiveFilter,
  [regionFilter.name]: regionFilter,
  [labelsFilter.name]: labelsFilter,
  [resourcesFilter.name]: resourcesFilter,
});

export const builtinRankers: Readonly<Record<string, RankerFactory>> = Object.freeze({
  'least-allocated': fromJson(leastAllocated),
  'most-allocated': fromJson(mostAllocated),
  binpack: fromJson(binpack),
  spread: fromJson(spread),
  affinity: fromJson(affinity),
});

export const builtinRegistry: Registry = Object.freeze({ filters: builtinFilters, rankers: builtinRankers });

/**
 * The built-in filters enforce the job's own hard constraints (DESIGN: "a job asked for region mad
 * runs in mad or not at all"), so a configuration may reorder them or add to them, not drop them.
 */
export const REQUIRED_FILTERS: readonly string[] = Object.keys(builtinFilters);

/**
 * Defaults: all four filters; least-allocated (weight 1) spreads load, as the Kubernetes default
 * scoring strategy does; affinity (weight 2) lets a met preference outweigh a load difference, after
 * the Kubernetes default plugin weights (NodeAffinity 2, NodeResourcesFit 1).
 */
export const DEFAULT_PLACEMENT_SPEC: Readonly<Required<PlacementSpec>> = Object.freeze({
  filters: ['worker-active', 'region', 'labels', 'resources'],
  rankers: [
    { name: 'least-allocated', weight: 1 },
    { name: 'affinity', weight: 2 },
  ],
});

function lookup<T>(table: Readonly<Record<string, T>>, kind: string, name: string): T {
  if (!Object.hasOwn(table, name)) {
    throw new Error(`unknown ${kind} "${name}" (known: ${Object.keys(table).join(', ')})`);
  }
  return table[name]!;
}

function rejectDuplicates(kind: string, names: readonly string[]): void {
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) throw new Error(`${kind} "${name}" is listed twice`);
    seen.add(name);
  }
}

function buildFilters(names: readonly string[], registry: Registry): Filter[] {
  rejectDuplicates('filter', names);
  const missing = REQUIRED_FILTERS.filter((name) => !names.includes(name));
  if (missing.length) {
    throw new Error(`filters must include the built-in ${missing.join(', ')}: they enforce the job's constraints`);
  }
  return names.map((name) => lookup(registry.filters, 'filter', name));
}

function buildRanker(spec: RankerSpec, registry: Registry): Ranker {
  const factory = lookup(registry.rankers, 'ranker', spec.name);
  const options = spec.weight === undefined ? { ...spec.params } : { ...spec.params, weight: spec.weight };
  return factory(options);
}

/** Turns a JSON spec into filters and rankers; omitted parts take DEFAULT_PLACEMENT_SPEC. Throws on bad specs. */
export function buildPlacementConfig(spec: PlacementSpec = {}, registry: Registry = builtinRegistry): PlacementConfig {
  const rankerSpecs = spec.rankers ?? DEFAULT_PLACEMENT_SPEC.rankers;
  rejectDuplicates(
    'ranker',
    rankerSpecs.map((r) => r.name),
  );
  return {
    filters: buildFilters(spec.filters ?? DEFAULT_PLACEMENT_SPEC.filters, registry),
    rankers: rankerSpecs.map((r) => buildRanker(r, registry)),
  };
}

// ---- user plugins ----

/** What a plugin module exports. A ranker may be a ready Ranker or a factory taking {weight, ...params}. */
export interface PluginModule {
  filters?: Filter[];
  rankers?: (Ranker | RankerFactory)[];
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? `an object with keys ${Object.keys(value).join(', ') || '(none)'}` : typeof value;
}

/** Reads a possibly malformed plugin value without trusting its shape. */
function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function hasName(value: unknown): boolean {
  const name = field(value, 'name');
  return typeof name === 'string' && name !== '';
}

function isFilter(value: unknown): value is Filter {
  return hasName(value) && typeof field(value, 'check') === 'function';
}

function isRanker(value: unknown): value is Ranker {
  return hasName(value) && typeof field(value, 'weight') === 'number' && typeof field(value, 'score') === 'function';
}

function listOf(exports: Record<string, unknown>, key: 'filters' | 'rankers'): unknown[] {
  const list = exports[key] ?? [];
  if (!Array.isArray(list)) throw new Error(`plugin: "${key}" must be an array, got ${describeValue(list)}`);
  return list;
}

/** A fixed Ranker becomes a factory whose only option is its weight. */
function factoryFor(ranker: Ranker): RankerFactory {
  return (options = {}) => {
    rejectUnknownOptions(ranker.name, options, []);
    const weight = options.weight === undefined ? ranker.weight : readWeight(ranker.name, options);
    // Calls through the original so a class-based ranker keeps its `this`.
    return { name: ranker.name, weight, score: (job, worker, ctx) => ranker.score(job, worker, ctx) };
  };
}

/** A factory must build a valid ranker from defaults alone; that also tells us its name. */
function nameFactory(factory: RankerFactory, where: string): [string, RankerFactory] {
  const sample: unknown = factory({});
  if (!isRanker(sample)) {
    throw new Error(`${where}: factory({}) must return {name, weight, score()}, got ${describeValue(sample)}`);
  }
  return [sample.name, factory];
}

function pluginRanker(value: unknown, where: string): [string, RankerFactory] {
  if (typeof value === 'function') return nameFactory(value as RankerFactory, where);
  if (isRanker(value)) return [value.name, factoryFor(value)];
  throw new Error(
    `${where}: expected a Ranker {name, weight, score()} or a factory function, got ${describeValue(value)}`,
  );
}

function addUnique<T>(table: Record<string, T>, kind: string, name: string, value: T): void {
  if (Object.hasOwn(table, name)) throw new Error(`plugin: ${kind} "${name}" is already registered`);
  table[name] = value;
}

/** The plugin's exports, or its default export when that is where they are. */
function pluginExports(moduleExports: unknown): Record<string, unknown> {
  if (typeof moduleExports !== 'object' || moduleExports === null) {
    throw new Error(`plugin: expected a module exporting filters and/or rankers, got ${describeValue(moduleExports)}`);
  }
  const exports = moduleExports as Record<string, unknown>;
  const own = 'filters' in exports || 'rankers' in exports;
  return !own && typeof exports.default === 'object' && exports.default !== null
    ? (exports.default as Record<string, unknown>)
    : exports;
}

/**
 * A new registry: the given one plus a plugin module's filters and rankers. Validates their shape and
 * refuses names already taken, so a plugin cannot silently replace a built-in. Pure: the caller imports.
 */
export function registerPlugins(moduleExports: unknown, registry: Registry = builtinRegistry): Registry {
  const exports = pluginExports(moduleExports);
  const pluginFilters = listOf(exports, 'filters');
  const pluginRankers = listOf(exports, 'rankers');
  if (pluginFilters.length + pluginRankers.length === 0) throw new Error('plugin: exports no filters and no rankers');
  const filters = { ...registry.filters };
  const rankers = { ...registry.rankers };
  pluginFilters.forEach((value, i) => {
    if (!isFilter(value))
      throw new Error(`plugin filters[${i}]: expected {name, check()}, got ${describeValue(value)}`);
    addUnique(filters, 'filter', value.name, value);
  });
  pluginRankers.forEach((value, i) => {
    addUnique(rankers, 'ranker', ...pluginRanker(value, `plugin rankers[${i}]`));
  });
  return { filters, rankers };
}
