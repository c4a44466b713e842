// Whether dist/ was built from the sources as they are now: the build records the newest
// modification time among them (files and directories, so that an added, removed or renamed file
// counts), and bin/skipjack.js compares. A stat of each source: about a millisecond.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const SOURCE_DIRS = ['protocol', 'placement', 'server', 'worker', 'cli', 'sim', 'migrations'];
export const STAMP = 'build-stamp.json';

export function newestSource(root) {
  let newest = 0;
  for (const dir of SOURCE_DIRS) {
    const base = join(root, dir);
    newest = Math.max(newest, statSync(base).mtimeMs);
    for (const entry of readdirSync(base, { recursive: true }))
      newest = Math.max(newest, statSync(join(base, entry)).mtimeMs);
  }
  return newest;
}

export function distIsCurrent(root) {
  try {
    const stamp = JSON.parse(readFileSync(join(root, 'dist', STAMP), 'utf8'));
    return stamp.newestSource === newestSource(root);
  } catch {
    return false; // no build, or a build cut short
  }
}
