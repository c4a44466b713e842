// The environment a job runs with: the few variables it inherits from the worker, then its own.

/**
 * Variables a job inherits from the worker. Everything else is left out on purpose: the worker's
 * environment holds its own credentials (API token, DATABASE_URL) that jobs must not see.
 * LC_* variables are inherited too.
 */
export const INHERITED_ENV_NAMES: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
];
const FALLBACK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export function buildJobEnv(
  jobEnv: Record<string, string> = {},
  parentEnv?: NodeJS.ProcessEnv,
): Record<string, string> {
  return { ...(parentEnv ? inheritedFrom(parentEnv) : inheritedFromWorker()), ...jobEnv };
}

function inheritedFrom(parentEnv: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = { PATH: FALLBACK_PATH };
  for (const [name, value] of Object.entries(parentEnv)) {
    if (value !== undefined && (INHERITED_ENV_NAMES.includes(name) || name.startsWith('LC_'))) env[name] = value;
  }
  return env;
}

// Read once: walking process.env (a native object) took 7% of a worker's time on short jobs.
let workerInherited: Record<string, string> | undefined;
const inheritedFromWorker = () => (workerInherited ??= inheritedFrom(process.env));
