// `skipjack simulate --report DIR`: the real command writes one self-contained page with a line
// per model in every chart, and a real headless Chromium lays those charts out at a real size.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hasChromium, renderPage } from '../support/browser.js';
import { skipjackCommand } from '../support/processes.js';

const MODELS = ['pull', 'central', 'auction', 'p2c'];
const CHARTS = [
  'wait-cdf',
  'distribution-score',
  'utilization-cpu',
  'utilization-memoryMb',
  'utilization-slots',
  'stranded',
];
let dir: string;
let html: string;
let stderr: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sim-report-'));
  const args = ['simulate', '--workload', 'mixed', '--jobs', '1500', '--seed', '2', '--report', dir];
  ({ stderr } = await promisify(execFile)(skipjackCommand, args));
  html = readFileSync(join(dir, 'sim-report.html'), 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the page is written where it says, and needs nothing from the network', () => {
  expect(stderr).toContain(`report written to ${join(dir, 'sim-report.html')}`);
  expect(html).toMatch(/^<!doctype html>/);
  expect(html).not.toMatch(/https?:/i);
  expect(html).not.toMatch(/<(script|link|img|iframe)\b|url\(/i);
});

test('every chart has exactly one line per model, and the table and verdict are there', () => {
  for (const id of CHARTS) {
    const svg = html.match(new RegExp(`<svg id="${id}"[\\s\\S]*?</svg>`))?.[0];
    expect(svg).toBeDefined();
    const lines = [...svg!.matchAll(/<polyline data-model="([^"]+)" points="([^"]+)"/g)];
    expect(lines.map((m) => m[1])).toEqual(MODELS);
    for (const m of lines) expect(m[2]!.split(' ').length).toBeGreaterThan(10);
  }
  expect(html).toContain('<table id="results">');
  for (const m of MODELS) expect(html).toContain(`<th>${m}</th>`);
  expect(html).toMatch(/<li>mean wait: \w+ wins/);
});

const inChromium = hasChromium() ? test : test.skip;
if (!hasChromium()) console.warn('sim-report: /usr/bin/chromium is not installed; the browser test is skipped');

inChromium('in headless Chromium, every chart has a nonzero size and nothing is fetched', async () => {
  const r = await renderPage(join(dir, 'sim-report.html'));
  expect(r.charts.map((c) => c.id)).toEqual(CHARTS);
  for (const c of r.charts) {
    expect(c.width).toBeGreaterThan(100);
    expect(c.height).toBeGreaterThan(100);
    expect(c.lines).toBe(MODELS.length);
  }
  expect(r.requests).toEqual([]);
});
