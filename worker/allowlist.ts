/**
 * The worker's executable allowlist. An operator may restrict which programs jobs can start on a
 * machine; the worker refuses a job whose command[0] does not resolve to an allowed file.
 *
 * Patterns are absolute paths, optionally with globs: `*` and `?` stay within one path segment,
 * `**` spans segments (`/opt/tools/**` admits everything below /opt/tools). Matching is against the
 * executable's real path (symlinks resolved), so a link cannot smuggle in a program from elsewhere.
 * The literal directory part of each pattern is resolved the same way, so `/bin/*` still means
 * what the operator meant on a system where /bin is a link to /usr/bin.
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

export interface ResolveOptions {
  /** The PATH the job will run with; defaults to the worker's. */
  pathEnv?: string;
  /** The job's working directory, for relative commands like `./build.sh`; defaults to the worker's. */
  cwd?: string;
}

/** Returns null when the command may run (always, with no patterns), else the reason it may not. */
export function checkAllowed(
  command: readonly string[],
  patterns: readonly string[],
  options: ResolveOptions = {},
): string | null {
  if (patterns.length === 0) return null;
  const allowlist = `the worker's allowlist (${patterns.join(', ')})`;
  const name = command[0];
  if (!name) return `the command is empty, so it cannot be checked against ${allowlist}`;
  const executable = resolveExecutable(name, options);
  if (!executable) {
    const where = name.includes('/') ? '' : ' on PATH';
    return `executable ${name} was not found${where} or is not executable, so it cannot be checked against ${allowlist}`;
  }
  if (patterns.some((pattern) => matchesPattern(executable, pattern))) return null;
  const shown = executable === name ? executable : `${executable} (from "${name}")`;
  return `executable ${shown} is not in ${allowlist}`;
}

/** Problems with allowlist patterns, for checking the worker's configuration at startup. */
export function allowlistProblems(patterns: readonly string[]): string[] {
  return patterns
    .filter((pattern) => !path.isAbsolute(pattern))
    .map((pattern) => `allowlist pattern "${pattern}" is not an absolute path`);
}

/** The real path of the file execvp would run for `name`, or null when there is none. */
export function resolveExecutable(name: string, options: ResolveOptions = {}): string | null {
  const cwd = options.cwd ?? process.cwd();
  const candidates = name.includes('/')
    ? [path.resolve(cwd, name)]
    : searchDirs(options.pathEnv ?? process.env.PATH ?? '').map((dir) => path.resolve(cwd, dir, name));
  const found = candidates.find(isExecutableFile);
  return found === undefined ? null : realpathSync(found);
}

export function matchesPattern(executable: string, pattern: string): boolean {
  if (!path.isAbsolute(pattern)) return false;
  return [pattern, canonicalPattern(pattern)].some((p) => globToRegExp(p).test(executable));
}

export function globToRegExp(glob: string): RegExp {
  let source = '';
  let i = 0;
  while (i < glob.length) {
    if (glob.startsWith('/**/', i)) {
      source += '/(?:.*/)?'; // zero or more whole segments
      i += 4;
    } else if (glob.startsWith('**', i)) {
      source += '.*';
      i += 2;
    } else {
      source += glob[i] === '*' ? '[^/]*' : glob[i] === '?' ? '[^/]' : escapeRegExp(glob[i]!);
      i += 1;
    }
  }
  return new RegExp(`^${source}$`);
}

/** The pattern with its literal leading directories resolved to their real path. */
function canonicalPattern(pattern: string): string {
  const segments = pattern.split('/');
  const firstGlob = segments.findIndex((segment) => /[*?]/.test(segment));
  const literal = firstGlob < 0 ? pattern : segments.slice(0, firstGlob).join('/') || '/';
  let real: string;
  try {
    real = realpathSync(literal);
  } catch {
    return pattern; // nothing there yet; match it literally
  }
  return firstGlob < 0 ? real : path.posix.join(real, ...segments.slice(firstGlob));
}

function searchDirs(pathEnv: string): string[] {
  return pathEnv.split(':').map((dir) => (dir === '' ? '.' : dir)); // an empty entry means cwd, as in execvp
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function escapeRegExp(char: string): string {
  return /[\\^$.|+()[\]{}]/.test(char) ? `\\${char}` : char;
}
