// Parsers for command-line values; each names the flag in its error.
import { InvalidArgumentError } from 'commander';

/** Where the CLI and workers find the server unless --server or SKIPJACK_URL says otherwise. */
export const DEFAULT_SERVER_URL = 'http://127.0.0.1:7070';

export function keyValue(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got "${value}"`);
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

export function collect(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

export function int(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected a whole number, got "${value}"`);
  return n;
}

/** "90", "90s", "5m", "1h", "250ms" → seconds. */
export function duration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`expected a duration like 30s, 5m or 1h, got "${value}"`);
  const scale = { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] ?? 's']!;
  return Number(m[1]) * scale;
}
