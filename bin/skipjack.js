#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, so `npx skipjack` works without a build step.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
