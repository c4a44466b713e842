// A job's logger, made when it first logs at a level that is on: pino serializes a child's
// bindings when the child is made, which at the warn level cost a worker running thousands of
// short jobs a few percent of its CPU for loggers it never used.
import type { Logger } from 'pino';

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const off = () => {};

export function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(target, key) {
      if (typeof key === 'string' && LEVELS.has(key) && !target.isLevelEnabled(key)) return off;
      child ??= target.child(bindings);
      const value = Reflect.get(child, key, child);
      return typeof value === 'function' ? value.bind(child) : value;
    },
    set(target, key, value) {
      child ??= target.child(bindings); // e.g. a level set on the job's logger, not the worker's
      return Reflect.set(child, key, value, child);
    },
  });
}
