// Runs supervised processes for a test file and makes sure none outlives its test. With
// SKIPJACK_TEST_SPAWN_HELPER set (supervisor-via-helper.test.ts), through the worker's spawn helper.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SpawnHelper } from '../../worker/spawner.js';
import {
  processGroupAlive,
  superviseProcess,
  type OutputChunk,
  type ProcessSpec,
  type SupervisedProcess,
} from '../../worker/supervisor.js';

export function supervisedProcesses(scratchPrefix: string) {
  const started: SupervisedProcess[] = [];
  const helper = process.env.SKIPJACK_TEST_SPAWN_HELPER ? new SpawnHelper() : undefined;
  const launch = helper?.launch;
  let scratch = '';
  beforeEach(() => {
    scratch = mkdtempSync(path.join(tmpdir(), scratchPrefix));
  });
  afterEach(async () => {
    for (const proc of started.splice(0)) {
      if (proc.pid !== undefined && processGroupAlive(proc.pid)) process.kill(-proc.pid, 'SIGKILL');
      await Promise.race([proc.done, new Promise((r) => setTimeout(r, 5000).unref())]); // a broken supervisor must not hang cleanup
    }
    rmSync(scratch, { recursive: true, force: true });
  });
  afterAll(() => helper?.stop());
  return {
    /** How this file starts processes: undefined is in the test process. */
    launch,
    /** The process group id, once the process runs (through the helper, a moment after the start). */
    async spawned(proc: SupervisedProcess): Promise<number> {
      while (proc.pid === undefined) await new Promise((r) => setTimeout(r, 5));
      return proc.pid;
    },
    /** A fresh directory per test, removed after it. */
    scratch: () => scratch,
    /** Starts a process whose group is killed after the test if still alive. */
    track(proc: SupervisedProcess): SupervisedProcess {
      started.push(proc);
      return proc;
    },
    run(spec: ProcessSpec): { proc: SupervisedProcess; chunks: OutputChunk[] } {
      const chunks: OutputChunk[] = [];
      const proc = superviseProcess(spec, (chunk) => chunks.push(chunk), launch);
      started.push(proc);
      return { proc, chunks };
    },
  };
}
