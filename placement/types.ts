// The data the placement plugins see. Pure values: no I/O, no clocks except ctx.now.
import type { PlacementVerdict } from '../protocol/types.js';

export interface Resources {
  /** CPU in millicores (1000 = one core). */
  cpu: number;
  memoryMb: number;
  diskMb: number;
}

export interface Capacity extends Resources {
  slots: number;
}

export type LabelSelector = Record<string, string | string[]>;

export interface JobConstraints {
  /** Exact region, or one of a set. Absent = any region. */
  region?: string | string[];
  resources?: Partial<Resources>;
  /** Hard label match: equality, or membership when the value is a list. */
  labels?: LabelSelector;
}

export interface LabelPreference {
  labels: LabelSelector;
  /** Relative weight of this preference, 1..100. */
  weight: number;
}

export interface PlacementJob {
  id: number;
  queue: string;
  /** Higher runs first. */
  priority: number;
  /** Epoch milliseconds. */
  createdAt: number;
  constraints: JobConstraints;
  preferences: LabelPreference[];
}

/** 'unresponsive' is never stored: an active worker whose heartbeats stopped, as the server shows it. */
export type WorkerState = 'active' | 'draining' | 'gone' | 'deregistered' | 'unresponsive';

export interface PlacementWorker {
  id: string;
  name: string;
  region: string | null;
  labels: Record<string, string>;
  state: WorkerState;
  capacity: Capacity;
  /** What the jobs it holds (running or assigned) already use. */
  allocated: Capacity;
  /** Epoch milliseconds. */
  lastSeenAt: number;
  /** Queues it takes jobs from; absent means every queue. */
  queues?: string[];
}

export interface PlacementContext {
  /** Epoch milliseconds. */
  now: number;
}

/** A hard constraint. Returns null when the worker fits, else the reason it does not. */
export interface Filter {
  name: string;
  check(job: PlacementJob, worker: PlacementWorker, ctx: PlacementContext): string | null;
}

/** A soft preference. Returns 0..100; the pipeline takes the weighted sum. */
export interface Ranker {
  name: string;
  weight: number;
  score(job: PlacementJob, worker: PlacementWorker, ctx: PlacementContext): number;
}

/** One worker's outcome for one job: why it was rejected, or how it scored. The wire type is this one. */
export type Verdict = PlacementVerdict;

/** The plugins one server or queue places with. */
export interface PlacementConfig {
  filters: readonly Filter[];
  rankers: readonly Ranker[];
}

/** Every ranker factory takes its weight plus its own params. */
export interface RankerOptions {
  weight?: number;
}

/** Builds a ranker from JSON-able options (weight and params); validates them and throws on bad ones. */
export type RankerFactory = (options?: RankerOptions & Record<string, unknown>) => Ranker;
