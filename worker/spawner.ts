// Starting job processes: in this process (child_process.spawn), or through the spawn helper
// (spawn-helper.py), which starts them with vfork. Both hand the supervisor the same thing: a pid,
// two output streams, and 'spawn', 'error' and 'exit' events.
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { constants as osConstants } from 'node:os';
import { PassThrough, type Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

export interface LaunchOptions {
  cwd?: string;
  env: Record<string, string>;
  /** How the job's group is stopped should the worker go away while it runs (the spawn helper does). */
  stop?: { signal: NodeJS.Signals; graceSeconds: number };
}

/** The part of a ChildProcess the supervisor uses. `pid` is set by the time 'spawn' is emitted. */
export interface LaunchedProcess {
  readonly pid?: number | undefined;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  once(event: 'spawn', listener: () => void): this;
  once(event: 'error', listener: (err: Error) => void): this;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  /** Known at 'exit': the process group had no other member left (nothing to stop or wait for). */
  readonly aloneAtExit?: boolean;
}

export type Launcher = (file: string, args: string[], opts: LaunchOptions) => LaunchedProcess;

/** Every job leads a new session (detached: setsid), so its whole process group can be signalled. */
export const launchInProcess: Launcher = (file, args, opts): ChildProcess =>
  spawn(file, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });

type HelperMessage =
  | { t: 'ready' }
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'failed'; id: number; message: string }
  | { t: 'out'; id: number; stream: 'stdout' | 'stderr' }
  | { t: 'eof'; id: number; stream: 'stdout' | 'stderr' }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null; alone: boolean };

class HelperChild extends EventEmitter implements LaunchedProcess {
  pid: number | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  exited = false;
  aloneAtExit = false;
  /** Output may still arrive after the exit, until both streams have ended. */
  openStreams = 2;

  constructor(
    readonly id: number,
    readonly helper: ChildProcess,
    drop: () => void,
  ) {
    super();
    // The supervisor destroys streams it gave up on (held open by an escaped process).
    for (const s of [this.stdout, this.stderr])
      s.once('close', () => {
        if (!s.writableEnded) drop();
      });
  }
}

const HELPER_PATH = fileURLToPath(new URL('./spawn-helper.py', import.meta.url));
const HEADER_BYTES = 8;

/** Frames both ways: uint32 JSON length, uint32 payload length (big-endian), JSON, payload. */
function frame(msg: object): Buffer {
  const json = Buffer.from(JSON.stringify(msg));
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32BE(json.length, 0);
  return Buffer.concat([header, json]);
}

/** A stream's bytes in, whole frames out. */
function frameReader(onFrame: (msg: HelperMessage, payload: Buffer) => void): (data: Buffer) => void {
  let pending = Buffer.alloc(0);
  return (data) => {
    let buf = pending.length ? Buffer.concat([pending, data]) : data;
    while (buf.length >= HEADER_BYTES) {
      const jsonLength = buf.readUInt32BE(0);
      const end = HEADER_BYTES + jsonLength + buf.readUInt32BE(4);
      if (buf.length < end) break;
      onFrame(
        JSON.parse(buf.subarray(HEADER_BYTES, HEADER_BYTES + jsonLength).toString()),
        buf.subarray(HEADER_BYTES + jsonLength, end),
      );
      buf = buf.subarray(end);
    }
    pending = Buffer.from(buf);
  };
}

/**
 * The spawn helper (spawn-helper.py): python3 starts job processes with vfork, which a big Node
 * process cannot. One per worker, restarted if it dies. Without python3 (3.9+), start() says so
 * and the worker forks jobs itself.
 */
export class SpawnHelper {
  private helper: ChildProcess | undefined;
  private readonly children = new Map<number, HelperChild>();
  private nextId = 1;
  private readonly ready = new WeakSet<ChildProcess>();

  constructor(private readonly python = 'python3') {}

  /** Starts the helper and waits until it answers: false (with the reason) if it cannot run here. */
  async start(): Promise<{ ok: true } | { ok: false; reason: string }> {
    const helper = this.running();
    if (this.ready.has(helper)) return { ok: true };
    let stderr = '';
    const collect = (d: Buffer) => (stderr += d.toString());
    helper.stderr!.on('data', collect);
    try {
      return await new Promise((resolve) => {
        helper.once('error', (err) => resolve({ ok: false, reason: err.message }));
        helper.once('exit', (code) => resolve({ ok: false, reason: stderr.trim() || `exited with code ${code}` }));
        helper.once('ready', () => resolve({ ok: true }));
      });
    } finally {
      helper.stderr!.off('data', collect);
    }
  }

  readonly launch: Launcher = (file, args, opts) => {
    const helper = this.running();
    const child = new HelperChild(this.nextId++, helper, () => this.send(helper, { t: 'drop', id: child.id }));
    this.children.set(child.id, child);
    this.holdOpen(helper);
    const stop = opts.stop && { signal: osConstants.signals[opts.stop.signal], graceSeconds: opts.stop.graceSeconds };
    this.send(helper, { t: 'spawn', id: child.id, file, args, cwd: opts.cwd, env: opts.env, stop });
    return child;
  };

  // The spawns of one claim answer go to the helper in one write: each write wakes it, and on a
  // small VM a wake-up costs more than the message.
  private send(helper: ChildProcess, msg: object): void {
    const stdin = helper.stdin!;
    if (stdin.writableCorked === 0) {
      stdin.cork();
      process.nextTick(() => stdin.uncork());
    }
    stdin.write(frame(msg));
  }

  /**
   * The helper SIGKILLs every job it runs at `at` (epoch ms) unless told a later time first, or
   * null for none: a dead man's switch, so that a worker that stops answering (SIGSTOP, a long
   * stall) cannot keep a job running past its lease while the job runs again elsewhere.
   */
  killAllBy(at: number | null): void {
    const helper = this.helper;
    if (!helper || !this.ready.has(helper) || helper.exitCode !== null || helper.signalCode !== null) return;
    this.send(helper, { t: 'deadline', killIn: at === null ? null : Math.max(0, (at - Date.now()) / 1000) });
  }

  /** Ends the helper. Call it once no job runs: a job still running then is stopped by the helper. */
  stop(): void {
    this.helper?.stdin?.end();
    this.helper = undefined;
  }

  private running(): ChildProcess {
    if (this.helper && this.helper.exitCode === null && this.helper.signalCode === null) return this.helper;
    // Its own process group: a terminal's Ctrl-C is for the worker, which then stops the jobs.
    const helper = spawn(this.python, [HELPER_PATH], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '' },
    });
    helper.stdout!.on(
      'data',
      frameReader((msg, payload) => this.dispatch(helper, msg, payload)),
    );
    helper.stderr!.on('data', (data: Buffer) => process.stderr.write(data));
    helper.stdin!.on('error', () => {}); // it died: 'close' below handles that
    // 'close', not 'exit': by then every frame it wrote has been read and dispatched.
    helper.once('close', () => this.lost(helper));
    helper.on('error', () => this.lost(helper));
    helper.once('ready', () => this.holdOpen(helper));
    this.helper = helper;
    return helper;
  }

  /** Starting or running jobs, the helper keeps the worker's event loop alive; idle, it must not. */
  private holdOpen(helper: ChildProcess): void {
    const ref = this.children.size > 0 || !this.ready.has(helper);
    for (const h of [helper, helper.stdin, helper.stdout, helper.stderr] as unknown as {
      ref(): void;
      unref(): void;
    }[]) {
      if (ref) h.ref();
      else h.unref();
    }
  }

  private dispatch(helper: ChildProcess, msg: HelperMessage, payload: Buffer): void {
    if (msg.t === 'ready') {
      this.ready.add(helper);
      return void helper.emit('ready');
    }
    const child = this.children.get(msg.id);
    if (!child) return;
    switch (msg.t) {
      case 'spawned':
        child.pid = msg.pid;
        child.emit('spawn');
        break;
      case 'failed':
        child.exited = true;
        child.openStreams = 0;
        this.forgetIfDone(child);
        child.emit('error', new Error(msg.message));
        break;
      case 'out':
        child[msg.stream].write(payload);
        break;
      case 'eof':
        child[msg.stream].end();
        child.openStreams--;
        this.forgetIfDone(child);
        break;
      case 'exit':
        child.exited = true;
        child.aloneAtExit = msg.alone;
        child.emit('exit', msg.code, msg.signal);
        this.forgetIfDone(child);
        break;
    }
  }

  private forgetIfDone(child: HelperChild): void {
    if (!child.exited || child.openStreams > 0) return;
    this.children.delete(child.id);
    if (this.children.size === 0 && this.helper) this.holdOpen(this.helper);
  }

  /** The helper died: its children's exits will never be reported. Their groups are killed by the supervisor. */
  private lost(helper: ChildProcess): void {
    if (this.helper === helper) this.helper = undefined;
    for (const child of this.children.values()) {
      if (child.helper !== helper) continue; // started by its successor
      this.children.delete(child.id);
      if (child.pid === undefined) child.emit('error', new Error('the spawn helper exited before starting the job'));
      else {
        child.emit('error', new Error("the spawn helper exited; the job's exit status is unknown"));
        child.stdout.end();
        child.stderr.end();
        if (!child.exited) child.emit('exit', null, null);
      }
    }
  }
}
