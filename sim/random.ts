// Seeded random streams: every draw comes from mulberry32, never Math.random, so a seed replays a run.
import { mulberry32 } from '../placement/index.js';

export type Rng = () => number;

/** A stream per purpose (a class's arrivals, its run times, a model's draws), so one does not shift another. */
export function stream(seed: number, purpose: number): Rng {
  return mulberry32(Math.imul(seed ^ 0x2545f491, 0x9e3779b1) ^ Math.imul(purpose + 1, 0x85ebca6b));
}

/** Exponential with this mean; 1 - u keeps log away from 0. */
export function exponential(rng: Rng, mean: number): number {
  return -Math.log(1 - rng()) * mean;
}

/** Standard normal by Box-Muller (one of the pair; simplicity beats the wasted draw). */
export function normal(rng: Rng): number {
  const u = 1 - rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

/** Lognormal with this mean and log-space sigma: mu = ln(mean) - sigma²/2 keeps the mean as given. */
export function lognormal(rng: Rng, mean: number, sigma: number): number {
  return Math.exp(Math.log(mean) - (sigma * sigma) / 2 + sigma * normal(rng));
}

/** An integer in [0, n). */
export function pick(rng: Rng, n: number): number {
  return Math.min(n - 1, Math.floor(rng() * n));
}
