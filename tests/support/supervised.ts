// Runs supervised processes for a test file and makes sure none outlives its test.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { processGroupAlive, superviseProcess, type OutputChunk, type ProcessSpec, type SupervisedProcess } from '../../worker/supervisor.js';

export function supervisedProcesses(scratchPrefix: string) {
  const started: SupervisedProcess[] = [];
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
  return {
    /** A fresh directory per test, removed after it. */
    scratch: () => scratch,
    /** Starts a process whose group is killed after the test if still alive. */
    track(proc: SupervisedProcess): SupervisedProcess {
      started.push(proc);
      return proc;
    },
    run(spec: ProcessSpec): { proc: SupervisedProcess; chunks: OutputChunk[] } {
      const chunks: OutputChunk[] = [];
      const proc = superviseProcess(spec, (chunk) => chunks.push(chunk));
      started.push(proc);
      return { proc, chunks };
    },
  };
}
