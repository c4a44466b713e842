// The job states and end reasons, apart from the zod schemas: the CLI needs the lists, and
// loading zod costs each command about 150 ms of its start (bench/, scenario cli-start).
export const jobStates = ['pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type JobState = (typeof jobStates)[number];
export const terminalStates: readonly JobState[] = ['succeeded', 'failed', 'cancelled'];

export const endReasons = [
  'exited',
  'timed_out',
  'cancelled',
  'lost',
  'spawn_failed',
  'refused',
  'crash_loop',
  'unplaceable',
] as const;
export type EndReason = (typeof endReasons)[number];
