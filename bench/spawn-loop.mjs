// Baseline for the process scenario: a bare Node process spawning a program N times, `conc` at
// once, with piped stdout/stderr and a new session each, as the supervisor does. Plain JavaScript
// in its own process: fork() cost grows with the parent's memory, so running this inside the
// benchmark process (server, pools, peers loaded) would slow the baseline down.
//   node bench/spawn-loop.mjs /bin/true 2000 8   -> prints seconds
import { spawn } from 'node:child_process';

const [program, total, conc] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const t0 = performance.now();
let started = 0;
let finished = 0;
await new Promise((resolve, reject) => {
  const next = () => {
    if (finished === total) return resolve();
    if (started >= total) return;
    started++;
    const child = spawn(program, [], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('close', () => {
      finished++;
      next();
    });
  };
  for (let i = 0; i < conc; i++) next();
});
console.log(((performance.now() - t0) / 1000).toFixed(3));
