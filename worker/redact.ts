/**
 * Masks secret values (tokens, passwords from a job's env) in the worker's own log lines.
 * Job output is not passed through this: it is shipped byte-exact, as the job wrote it.
 */

export const REDACTED = '***';

export interface Redact {
  (text: string): string;
  (bytes: Buffer): Buffer;
}

export function redactor(secretValues: readonly string[]): Redact {
  // Longest first, so a secret that contains another is masked whole. Empty values would match
  // everywhere, so they are skipped.
  const secrets = [...new Set(secretValues)].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  const secretBytes = secrets.map((s) => Buffer.from(s));
  const mask = Buffer.from(REDACTED);

  function redact(text: string): string;
  function redact(bytes: Buffer): Buffer;
  function redact(input: string | Buffer): string | Buffer {
    if (typeof input === 'string') return secrets.reduce((text, secret) => text.split(secret).join(REDACTED), input);
    return secretBytes.reduce((bytes, secret) => replaceBytes(bytes, secret, mask), input);
  }
  return redact;
}

/** Replaces every occurrence of `needle` in `haystack`, working on bytes so no decoding happens. */
function replaceBytes(haystack: Buffer, needle: Buffer, replacement: Buffer): Buffer {
  let at = haystack.indexOf(needle);
  if (at < 0) return haystack;
  const parts: Buffer[] = [];
  let from = 0;
  while (at >= 0) {
    parts.push(haystack.subarray(from, at), replacement);
    from = at + needle.length;
    at = haystack.indexOf(needle, from);
  }
  parts.push(haystack.subarray(from));
  return Buffer.concat(parts);
}
