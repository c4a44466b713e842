// Skipjack placement: pure filters, rankers and the pipeline, shared by the server and the simulator.
export * from './types.js';
export * from './resources.js';
export { valueMatches, selectorMatches, labelMismatch } from './match.js';
export * from './reasons.js';
export * from './filters.js';
export * from './rankers.js';
export * from './pipeline.js';
export * from './registry.js';
