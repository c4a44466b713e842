// Whether a job's process group still has a live member. kill(-pgid, 0) alone counts zombies
// (members that exited but whose parent has not reaped them yet) as alive, so on Linux we look
// through /proc for a member that is not a zombie.
import { readdirSync, readFileSync } from 'node:fs';

/** True while the group has a member that is not a zombie (or that we may not inspect). */
export function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    return errnoCode(err) === 'EPERM';
  }
  return procShowsLiveMember(pgid) ?? true;
}

/** undefined when /proc cannot be read (not Linux); else whether a non-zombie member exists. */
function procShowsLiveMember(pgid: number): boolean | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  return entries.some((entry) => {
    if (!/^\d+$/.test(entry)) return false;
    const stat = readProcStat(entry);
    return stat !== null && stat.pgid === pgid && stat.state !== 'Z' && stat.state !== 'X';
  });
}

function readProcStat(pid: string): { state: string; pgid: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // it exited while we looked
  }
  // "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses, so cut at the last ')'.
  const [state, , pgrp] = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return state && pgrp ? { state, pgid: Number(pgrp) } : null;
}

export function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}
