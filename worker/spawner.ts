// Starting job processes: in this process (child_process.spawn), or through the spawn helper
// (spawn-helper.mjs), a small process whose fork() is cheaper than ours. Both hand the supervisor
// the same thing: a pid, two output streams, and 'spawn', 'error' and 'exit' events.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

export interface LaunchOptions {
  cwd?: string;
  env: Record<string, string>;
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
}

export type Launcher = (file: string, args: string[], opts: LaunchOptions) => LaunchedProcess;

/** Every job leads a new session (detached: setsid), so its whole process group can be signalled. */
export const launchInProcess: Launcher = (file, args, opts): ChildProcess =>
  spawn(file, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });

type HelperMessage =
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'failed'; id: number; message: string }
  | { t: 'out'; id: number; stream: 'stdout' | 'stderr'; data: Uint8Array }
  | { t: 'eof'; id: number; stream: 'stdout' | 'stderr' }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null };

class HelperChild extends EventEmitter implements LaunchedProcess {
  pid: number | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  exited = false;
  /** Output may still arrive after the exit, until both streams have ended. */
  openStreams = 2;

  constructor(readonly id: number, drop: () => void) {
    super();
    // The supervisor destroys streams it gave up on (held open by an escaped process).
    for (const s of [this.stdout, this.stderr]) s.once('close', () => { if (!s.writableEnded) drop(); });
  }
}

const HELPER_PATH = fileURLToPath(new URL('./spawn-helper.mjs', import.meta.url));

/** One helper process per worker, started on first use and again if it dies. */
export class SpawnHelper {
  private helper: ChildProcess | undefined;
  private readonly children = new Map<number, HelperChild>();
  private nextId = 1;

  readonly launch: Launcher = (file, args, opts) => {
    const helper = this.running();
    const child = new HelperChild(this.nextId++, () => this.post({ t: 'drop', id: child.id }));
    this.children.set(child.id, child);
    this.post({ t: 'spawn', id: child.id, file, args, cwd: opts.cwd, env: opts.env }, helper);
    return child;
  };

  /** Ends the helper; job processes it started keep running in their own sessions. */
  stop(): void {
    this.helper?.disconnect();
    this.helper = undefined;
  }

  private running(): ChildProcess {
    if (this.helper?.connected) return this.helper;
    // execArgv [], so the helper does not load the TypeScript loader this process may run under.
    const helper = fork(HELPER_PATH, [], { execArgv: [], serialization: 'advanced', env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    helper.on('message', (msg: HelperMessage) => this.dispatch(msg));
    helper.once('exit', () => this.lost(helper));
    helper.on('error', () => this.lost(helper));
    // Idle, it must not keep the worker alive; busy, the worker has other reasons to run.
    helper.unref();
    (helper.channel as { unref?: () => void } | undefined)?.unref?.();
    this.helper = helper;
    return helper;
  }

  private post(msg: object, helper = this.helper): void {
    if (helper?.connected) helper.send(msg);
  }

  private dispatch(msg: HelperMessage): void {
    const child = this.children.get(msg.id);
    if (!child) return;
    switch (msg.t) {
      case 'spawned':
        child.pid = msg.pid;
        child.emit('spawn');
        break;
      case 'failed':
        this.children.delete(child.id);
        child.emit('error', Object.assign(new Error(msg.message), { code: 'ESPAWNHELPER' }));
        break;
      case 'out':
        child[msg.stream].write(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength));
        break;
      case 'eof':
        child[msg.stream].end();
        child.openStreams--;
        this.forgetIfDone(child);
        break;
      case 'exit':
        child.exited = true;
        child.emit('exit', msg.code, msg.signal);
        this.forgetIfDone(child);
        break;
    }
  }

  private forgetIfDone(child: HelperChild): void {
    if (child.exited && child.openStreams === 0) this.children.delete(child.id);
  }

  /** The helper died: its children's exits will never be reported. Their groups are killed by the supervisor. */
  private lost(helper: ChildProcess): void {
    if (this.helper === helper) this.helper = undefined;
    for (const child of this.children.values()) {
      if (child.pid === undefined) child.emit('error', new Error('the spawn helper exited before starting the job'));
      else {
        child.emit('error', new Error('the spawn helper exited; the job\'s exit status is unknown'));
        child.stdout.end();
        child.stderr.end();
        if (!child.exited) child.emit('exit', null, null);
      }
    }
    this.children.clear();
  }
}
