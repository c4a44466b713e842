// The worker's spawn helper: a small, long-lived Node process that forks job processes for it.
// fork() copies the parent's page tables, so its cost grows with the parent's memory: a worker
// full of HTTP, JSON and TypeScript state forks at about half the rate of a bare Node process
// (bench/scenarios/process.ts). Plain JavaScript on purpose: no loader, nothing imported but
// node:child_process, so this process stays small.
//
// Messages (advanced serialization, so output travels as Buffers):
//   in:  {t: 'spawn', id, file, args, cwd, env}   {t: 'drop', id}: stop reading a job's output
//   out: {t: 'spawned', id, pid}   {t: 'failed', id, message}   {t: 'out', id, stream, data}
//        {t: 'eof', id, stream}    {t: 'exit', id, code, signal}
// The worker signals process groups itself; this process only starts, reads and reaps.
import { spawn } from 'node:child_process';

const children = new Map();

process.on('message', (msg) => {
  if (msg.t === 'spawn') start(msg);
  else if (msg.t === 'drop') children.get(msg.id)?.forEach((s) => s.destroy());
});
// The worker is gone (or stopped us): job processes live in their own sessions; its successor's
// reaper re-runs their jobs, as after a worker crash.
process.on('disconnect', () => process.exit(0));

function start({ id, file, args, cwd, env }) {
  let child;
  try {
    child = spawn(file, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return send({ t: 'failed', id, message: err.message });
  }
  child.once('error', (err) => {
    if (child.pid === undefined) send({ t: 'failed', id, message: err.message });
  });
  if (child.pid === undefined) return;
  children.set(id, [child.stdout, child.stderr]);
  send({ t: 'spawned', id, pid: child.pid });
  relay(id, 'stdout', child.stdout);
  relay(id, 'stderr', child.stderr);
  child.once('exit', (code, signal) => send({ t: 'exit', id, code, signal }));
  child.once('close', () => children.delete(id));
}

// One chunk in flight per stream: the next is read once the worker's channel took this one.
function relay(id, stream, readable) {
  readable.on('data', (data) => {
    readable.pause();
    send({ t: 'out', id, stream, data }, () => readable.resume());
  });
  readable.once('close', () => send({ t: 'eof', id, stream }));
}

function send(msg, then) {
  if (!process.connected) return;
  process.send(msg, undefined, {}, () => then?.());
}
