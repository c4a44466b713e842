/**
 * Runs one job attempt as a supervised OS process. No network, no database: the worker agent
 * passes a ProcessSpec and an output callback, ships the chunks, and releases the job with the
 * ProcessResult.
 *
 * Process group. Each job runs in a new session (spawn with detached: true → setsid), so its
 * process group id is its pid. Every kill (timeout, cancel, worker shutdown) goes to the whole
 * group: the stop signal, SIGCONT (so stopped members can act on it), then SIGKILL after the grace.
 * This is supervisord's stopasgroup/killasgroup and Nomad's kill_signal/kill_timeout, applied to a
 * process group instead of a cgroup. A process that calls setsid() itself leaves the group and is
 * beyond our reach; only a cgroup would catch it.
 *
 * Leftovers. When the main process exits on its own, whatever is left in its group is stopped the
 * same way (stop signal, then SIGKILL after the grace), as systemd's KillMode=control-group does
 * when a service's main process exits. We chose the graceful order over an immediate SIGKILL so a
 * leftover helper (a test server, a log flusher) can clean up; `done` resolves only once the group
 * is empty, so a slot the worker frees is really free (capacity invariant). A leftover that obeys
 * the stop signal costs nothing; one that ignores it delays `done` by at most the grace.
 *
 * Zombies count as gone. Orphans are reparented to PID 1, and a PID 1 that does not reap (a bare
 * container entrypoint, often the worker itself) leaves them as zombies that still belong to the
 * group. kill(-pgid, 0) succeeds on them, so on Linux we check /proc for a member that is not a
 * zombie. Run the worker under an init (tini, docker --init) so they do not pile up.
 *
 * stdin is /dev/null: jobs are unattended.
 *
 * Pipes. A process that escaped the group may still hold stdout open; after the group is gone we
 * read for at most outputDrainSeconds more, then close our ends, so `done` cannot hang on it.
 *
 * The worker's own death does not kill its jobs (they are in their own sessions): the worker must
 * stop() its jobs when it shuts down. After a crash the spawn helper stops them (spawn-helper.py),
 * and the server's lease reaper returns their jobs.
 */
import { statSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { DEFAULT_OUTPUT_CAP_BYTES, OutputSequencer, type OutputChunk } from './output.js';
import { buildJobEnv } from './job-env.js';
import { launchInProcess, type LaunchedProcess, type Launcher } from './spawner.js';
import { errnoCode, processGroupAlive } from './process-group.js';

export { processGroupAlive };

export type { OutputChunk } from './output.js';

export interface ProcessSpec {
  /** argv, never a shell string; command[0] is the executable, looked up on the job's PATH. */
  command: string[];
  /** Set over the small inherited environment (see buildJobEnv); may override PATH, HOME, ... */
  env?: Record<string, string>;
  cwd?: string;
  /** Wall-clock limit from spawn; then the kill escalation, and reason 'timed_out'. */
  timeoutSeconds?: number;
  /** Sent to the whole group first. Default SIGTERM. */
  killSignal?: NodeJS.Signals;
  /** Time between killSignal and SIGKILL to the group. Default 10. */
  killGraceSeconds?: number;
  /** Job output kept; past it output is dropped (the job keeps running). Default 64 MiB. */
  outputCapBytes?: number;
  /** How long to keep reading output once the job's group is gone. Default 2. */
  outputDrainSeconds?: number;
}

/** Why the worker (not the job) ended the process: an operator's cancel, or the worker shutting down. */
export type StopReason = 'cancelled' | 'shutdown';
export type EndReason = 'exited' | 'timed_out' | StopReason | 'spawn_failed';

export interface ProcessResult {
  /** 'timed_out', 'cancelled' and 'shutdown' win over 'exited' once we have started a kill. */
  reason: EndReason;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The OS's or the spec check's message, for 'spawn_failed' only. */
  error?: string;
  /** Non-fatal trouble: members that survived SIGKILL, pipes held open, onOutput throwing. */
  warnings: string[];
  /** Length of the delivered output sequence, truncation marker included: the next offset. */
  outputBytes: number;
  /** Job output bytes that arrived past the cap and were dropped. */
  droppedBytes: number;
  truncated: boolean;
  /** From spawn until `done` resolved, group cleanup included. */
  durationMs: number;
}

export interface SupervisedProcess {
  /** Also the process group id. Undefined when the spawn failed. */
  readonly pid: number | undefined;
  /** Resolves once the main process has exited, its group is empty and its output is read. Never rejects. */
  readonly done: Promise<ProcessResult>;
  /** Kill escalation with reason 'cancelled'; no effect once the main process has exited. */
  cancel(): void;
  /** Kill escalation with the given reason; the first reason wins. */
  stop(reason: StopReason): void;
}

export const DEFAULT_KILL_SIGNAL: NodeJS.Signals = 'SIGTERM';
export const DEFAULT_KILL_GRACE_SECONDS = 10;
export const DEFAULT_OUTPUT_DRAIN_SECONDS = 2;
export { DEFAULT_OUTPUT_CAP_BYTES };

const GROUP_POLL_MS = 50;
/** After SIGKILL a member can only linger in uninterruptible sleep; we stop waiting for it. */
const GIVE_UP_AFTER_SIGKILL_MS = 5000;

/** How the job's group is stopped: its signal, then SIGKILL after the grace. */
const stopSettings = (spec: ProcessSpec) => ({
  signal: spec.killSignal ?? DEFAULT_KILL_SIGNAL,
  graceSeconds: spec.killGraceSeconds ?? DEFAULT_KILL_GRACE_SECONDS,
});

/** `launch` starts the process in a new session (see spawner.ts): in this process by default. */
export function superviseProcess(
  spec: ProcessSpec,
  onOutput: (chunk: OutputChunk) => void,
  launch: Launcher = launchInProcess,
): SupervisedProcess {
  const startedAt = performance.now();
  const problem = specProblem(spec);
  if (problem) return failedToStart(problem, startedAt);
  let child: LaunchedProcess;
  try {
    child = launch(spec.command[0]!, spec.command.slice(1), {
      cwd: spec.cwd,
      env: buildJobEnv(spec.env),
      stop: stopSettings(spec),
    });
  } catch (err) {
    return failedToStart(errorMessage(err), startedAt); // e.g. a NUL byte in an argument
  }
  return new Supervision(child, spec, onOutput, startedAt);
}

class Supervision implements SupervisedProcess {
  pid: number | undefined;
  readonly done: Promise<ProcessResult>;
  private resolveDone!: (result: ProcessResult) => void;
  private readonly output: OutputSequencer;
  private readonly warnings: string[] = [];
  private readonly killSignal: NodeJS.Signals;
  private readonly graceMs: number;
  private stopReason: 'timed_out' | StopReason | null = null;
  private exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private escalationStartedAt: number | null = null;
  private sigkillTimer: NodeJS.Timeout | undefined;
  private cancelTimeout: () => void = () => {};
  private groupGone = false;
  private outputCallbackFailed = false;

  constructor(
    private readonly child: LaunchedProcess,
    private readonly spec: ProcessSpec,
    private readonly onOutput: (chunk: OutputChunk) => void,
    private readonly startedAt: number,
  ) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    const stop = stopSettings(spec);
    this.killSignal = stop.signal;
    this.graceMs = stop.graceSeconds * 1000;
    this.output = new OutputSequencer(spec.outputCapBytes ?? DEFAULT_OUTPUT_CAP_BYTES, (c) => this.emit(c));
    // In this process the pid is known at once; through the spawn helper, with 'spawn'. A failed
    // spawn (ENOENT, EACCES...) is an 'error' event before any pid.
    const failed = (err: Error) => {
      if (this.pid === undefined) this.resolveDone(spawnFailedResult(err.message, startedAt));
    };
    child.once('error', failed);
    if (child.pid !== undefined) this.started(child.pid);
    else child.once('spawn', () => this.started(child.pid!));
  }

  private started(pid: number): void {
    const { child, spec } = this;
    this.pid = pid;
    child.stdout!.on('data', (data: Buffer) => this.output.push('stdout', data));
    child.stderr!.on('data', (data: Buffer) => this.output.push('stderr', data));
    child.on('error', (err) => this.warnings.push(`child process error: ${err.message}`));
    child.once('exit', (code, signal) => void this.finish(code, signal));
    if (spec.timeoutSeconds !== undefined) {
      this.cancelTimeout = setLongTimeout(() => this.stop('timed_out'), spec.timeoutSeconds * 1000);
    }
    if (this.stopReason) this.escalate(); // stopped while the helper was still starting it
  }

  cancel(): void {
    this.stop('cancelled');
  }

  stop(reason: StopReason | 'timed_out'): void {
    if (this.exited || this.stopReason) return;
    this.stopReason = reason;
    if (this.pid !== undefined) this.escalate();
  }

  private async finish(code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    this.exited = { code, signal };
    this.cancelTimeout();
    await this.emptyGroup();
    await this.drainOutput();
    this.resolveDone(this.result());
  }

  /** Stop signal to the group, SIGCONT so stopped members can act on it, SIGKILL after the grace. */
  private escalate(): void {
    if (this.escalationStartedAt !== null) return;
    this.escalationStartedAt = performance.now();
    if (this.killSignal === 'SIGKILL' || this.graceMs === 0) return this.signalGroup('SIGKILL');
    this.signalGroup(this.killSignal);
    this.signalGroup('SIGCONT');
    this.sigkillTimer = setTimeout(() => this.signalGroup('SIGKILL'), this.graceMs);
  }

  private signalGroup(signal: NodeJS.Signals): void {
    if (this.groupGone) return; // its id may belong to someone else by now
    try {
      process.kill(-this.pid!, signal);
    } catch (err) {
      if (errnoCode(err) === 'ESRCH') this.groupGone = true;
      else this.warnings.push(`could not send ${signal} to process group ${this.pid}: ${errorMessage(err)}`);
    }
  }

  /** After the main process exits: stop what is left of its group and wait until nothing is. */
  private async emptyGroup(): Promise<void> {
    // The helper looked as it reaped: most jobs leave nothing behind, and asking the kernel
    // again here cost the worker a thrown ESRCH per job (a tenth of its CPU on /bin/true jobs).
    if (!this.child.aloneAtExit) await this.stopLeftovers();
    clearTimeout(this.sigkillTimer); // a stop's escalation, whether or not anything was left
    this.groupGone = true;
  }

  private async stopLeftovers(): Promise<void> {
    const pgid = this.pid!;
    if (processGroupAlive(pgid)) this.escalate();
    while (processGroupAlive(pgid)) {
      if (performance.now() - this.escalationStartedAt! > this.graceMs + GIVE_UP_AFTER_SIGKILL_MS) {
        this.warnings.push(`process group ${pgid} still had members after SIGKILL; stopped waiting`);
        break;
      }
      await sleep(GROUP_POLL_MS);
    }
  }

  /** Reads to EOF, but gives up on pipes held open by a process that left the group. */
  private async drainOutput(): Promise<void> {
    const streams = [this.child.stdout!, this.child.stderr!];
    const drainMs = (this.spec.outputDrainSeconds ?? DEFAULT_OUTPUT_DRAIN_SECONDS) * 1000;
    const closed = await raceTimeout(Promise.all(streams.map(whenClosed)), drainMs);
    if (closed) return;
    this.warnings.push(
      `output pipes still open ${drainMs} ms after the job's process group was gone (held by a process that left the group); stopped reading`,
    );
    streams.forEach((stream) => stream.destroy());
  }

  private emit(chunk: OutputChunk): void {
    try {
      this.onOutput(chunk);
    } catch (err) {
      if (this.outputCallbackFailed) return;
      this.outputCallbackFailed = true;
      this.warnings.push(`onOutput threw (further errors not reported): ${errorMessage(err)}`);
    }
  }

  private result(): ProcessResult {
    return {
      reason: this.stopReason ?? 'exited',
      exitCode: this.exited!.code,
      signal: this.exited!.signal,
      warnings: this.warnings,
      outputBytes: this.output.deliveredBytes,
      droppedBytes: this.output.droppedBytes,
      truncated: this.output.truncated,
      durationMs: Math.round(performance.now() - this.startedAt),
    };
  }
}

function specProblem(spec: ProcessSpec): string | null {
  const { command, timeoutSeconds, killSignal, killGraceSeconds, outputCapBytes, outputDrainSeconds, cwd } = spec;
  if (!Array.isArray(command) || command.length === 0 || !command[0]) return 'command is empty';
  if (command.some((arg) => typeof arg !== 'string')) return 'command must be an array of strings';
  if (timeoutSeconds !== undefined && !(timeoutSeconds > 0)) return `timeoutSeconds must be > 0, got ${timeoutSeconds}`;
  if (killGraceSeconds !== undefined && !(killGraceSeconds >= 0))
    return `killGraceSeconds must be >= 0, got ${killGraceSeconds}`;
  if (outputDrainSeconds !== undefined && !(outputDrainSeconds >= 0))
    return `outputDrainSeconds must be >= 0, got ${outputDrainSeconds}`;
  if (outputCapBytes !== undefined && !(Number.isInteger(outputCapBytes) && outputCapBytes >= 0)) {
    return `outputCapBytes must be a whole number >= 0, got ${outputCapBytes}`;
  }
  if (killSignal !== undefined && !(killSignal in osConstants.signals)) return `unknown killSignal ${killSignal}`;
  return cwd === undefined ? null : cwdProblem(cwd);
}

/** Checked up front because Node reports a bad cwd as ENOENT of the executable, which misleads. */
function cwdProblem(cwd: string): string | null {
  try {
    return statSync(cwd).isDirectory() ? null : `working directory ${cwd} is not a directory`;
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT') return `working directory ${cwd} does not exist`;
    return `working directory ${cwd} is not usable: ${errorMessage(err)}`;
  }
}

function failedToStart(message: string, startedAt: number): SupervisedProcess {
  return {
    pid: undefined,
    done: Promise.resolve(spawnFailedResult(message, startedAt)),
    cancel() {},
    stop() {},
  };
}

function spawnFailedResult(error: string, startedAt: number): ProcessResult {
  return {
    reason: 'spawn_failed',
    exitCode: null,
    signal: null,
    error,
    warnings: [],
    outputBytes: 0,
    droppedBytes: 0,
    truncated: false,
    durationMs: Math.round(performance.now() - startedAt),
  };
}

function whenClosed(stream: Readable): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve) => stream.once('close', () => resolve()));
}

/** true if `promise` settled within `ms`. */
async function raceTimeout(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const MAX_TIMER_MS = 2 ** 31 - 1;

/** setTimeout fires at once for delays past ~24.8 days; job timeouts may be longer. */
function setLongTimeout(callback: () => void, ms: number): () => void {
  let timer: NodeJS.Timeout;
  const arm = (left: number) => {
    timer = setTimeout(
      () => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : callback()),
      Math.min(left, MAX_TIMER_MS),
    );
  };
  arm(ms);
  return () => clearTimeout(timer);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
