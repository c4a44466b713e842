// What every scenario gets from the runner.
import type { BenchPostgres } from '../lib/postgres.js';

export interface ScenarioContext {
  pg: BenchPostgres;
  quick: boolean;
  /** Directory for CPU profiles (server in-process, worker processes), if profiling. */
  profileDir?: string;
}

export interface ScenarioOutput {
  skipjack: Record<string, unknown>;
  peers: Record<string, Record<string, unknown>>;
  ratios: Record<string, number | null>;
  notes: string[];
  table: string;
}
