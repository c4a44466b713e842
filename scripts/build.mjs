// npm run build (and prepare, on install): the sources compiled to dist/, with the files they read
// at run time beside them, and a stamp that bin/skipjack.js checks to run dist/ only when current.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newestSource, STAMP } from '../bin/sources.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  // An install without devDependencies: bin/skipjack runs the sources through tsx instead.
  process.stderr.write('skipjack build: typescript is not installed; skipping (the CLI runs through tsx)\n');
  process.exit(0);
}

// Taken before compiling: a source saved while tsc runs leaves dist/ stale, as it is.
const newest = newestSource(root);
rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });

// Read through import.meta.url at run time: server/sql/*.sql and the spawn helper.
const assets = [
  ...readdirSync(join(root, 'server', 'sql'))
    .filter((f) => f.endsWith('.sql'))
    .map((f) => join('server', 'sql', f)),
  join('worker', 'spawn-helper.py'),
];
for (const file of assets) {
  mkdirSync(dirname(join(dist, file)), { recursive: true });
  copyFileSync(join(root, file), join(dist, file));
}
writeFileSync(join(dist, STAMP), JSON.stringify({ newestSource: newest }) + '\n');
