#!/usr/bin/env node
// The CLI: the compiled JavaScript in dist/ when it was built from the sources as they are (npm
// install builds it), else the TypeScript through tsx, so that an edit never runs stale.
// SKIPJACK_FROM_SOURCE=1 asks for the sources.
import { fileURLToPath } from 'node:url';
import { distIsCurrent } from './sources.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
if (process.env.SKIPJACK_FROM_SOURCE !== '1' && distIsCurrent(root)) {
  await import('../dist/cli/main.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
