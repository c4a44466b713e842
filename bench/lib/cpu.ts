// CPU time over a span of a benchmark, by component: the database, this process (the Skipjack
// server, or a peer, runs in it) and the worker processes. On a machine whose cores are all busy,
// jobs/s follow the CPU each job costs, so this shows where a throughput goes. Linux only (from
// /proc); the database's share is measured only when its processes run on this machine.
import { readFileSync } from 'node:fs';
import type pg from 'pg';

const TICK_MS = 10; // USER_HZ is 100 on Linux

export interface CpuUse {
  /** PostgreSQL's processes, backends that ended during the span included; null if not here. */
  postgresMs: number | null;
  /** This process. */
  benchMs: number;
  /** The worker processes given; null when there are none (a peer runs in this process). */
  workersMs: number | null;
}

interface Snapshot {
  postgres: number | null;
  bench: number;
  workers: number;
}

/** Measures from `begin` to `end`; a peer's drain calls both around its enqueue and drain. */
export class CpuMeter {
  private start: Snapshot | null = null;
  private postmaster: number | null = null;
  private workerPids: number[] = [];
  use: CpuUse | null = null;

  async begin(pool: pg.Pool, workerPids: number[] = []): Promise<void> {
    this.postmaster = await postmasterPid(pool);
    this.workerPids = workerPids;
    this.start = this.take();
  }

  /** Call while the worker processes still run: an ended one's time is no longer in its stat. */
  end(): void {
    if (!this.start) return;
    const end = this.take();
    const start = this.start;
    this.use = {
      postgresMs: start.postgres === null || end.postgres === null ? null : (end.postgres - start.postgres) * TICK_MS,
      benchMs: Math.round(end.bench - start.bench),
      workersMs: this.workerPids.length === 0 ? null : (end.workers - start.workers) * TICK_MS,
    };
  }

  private take(): Snapshot {
    return {
      postgres: this.postmaster === null ? null : clusterTicks(this.postmaster),
      bench: benchMs(),
      workers: this.workerPids.reduce((sum, pid) => sum + (ticks(pid)?.own ?? 0), 0),
    };
  }
}

/** CPU per job in microseconds, by component, and in all. */
export function perJob(use: CpuUse | null, jobs: number) {
  if (!use) return null;
  const us = (ms: number | null) => (ms === null ? null : Math.round((ms * 1000) / jobs));
  const total = use.postgresMs === null ? null : use.postgresMs + use.benchMs + (use.workersMs ?? 0);
  return { postgres: us(use.postgresMs), bench: us(use.benchMs), workers: us(use.workersMs), total: us(total) };
}

function benchMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** The postmaster is the parent of a backend; null when PostgreSQL is not on this machine. */
async function postmasterPid(pool: pg.Pool): Promise<number | null> {
  const backend = (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  const stat = ticks(backend);
  if (!stat || !readComm(stat.parent)?.startsWith('postgres')) return null;
  return stat.parent;
}

/** The postmaster's own time, its ended children's (reaped, so counted in its own stat) and its live children's. */
function clusterTicks(postmaster: number): number | null {
  const own = ticks(postmaster);
  if (!own) return null;
  let sum = own.own + own.reaped;
  for (const pid of childrenOf(postmaster)) sum += ticks(pid)?.own ?? 0;
  return sum;
}

function childrenOf(parent: number): number[] {
  try {
    return readFileSync(`/proc/${parent}/task/${parent}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** A process's own CPU time in milliseconds (utime + stime); null if it does not run on this machine. */
export function processCpuMs(pid: number): number | null {
  const t = ticks(pid);
  return t === null ? null : t.own * TICK_MS;
}

function ticks(pid: number): { own: number; reaped: number; parent: number } | null {
  try {
    // Fields after the command name, which may hold spaces: state is [0], ppid [1], utime [11].
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { own: Number(f[11]) + Number(f[12]), reaped: Number(f[13]) + Number(f[14]), parent: Number(f[1]) };
  } catch {
    return null;
  }
}

function readComm(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8');
  } catch {
    return null;
  }
}
