// A real headless Chromium (Debian's) through playwright-core: open a local page, measure its
// SVG charts, and optionally screenshot it. Network is off: a self-contained page needs none.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = () => existsSync(CHROMIUM);

export interface Rendered {
  charts: { id: string; width: number; height: number; lines: number }[];
  /** Requests the page made beyond its own file. */
  requests: string[];
}

export async function renderPage(file: string, screenshot?: string): Promise<Rendered> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const url = pathToFileURL(file).href;
    const requests: string[] = [];
    page.on('request', (r) => {
      if (r.url() !== url) requests.push(r.url());
    });
    await page.goto(url);
    const charts = await page.$$eval('svg.chart', (svgs) =>
      svgs.map((s) => {
        const box = s.getBoundingClientRect();
        return { id: s.id, width: box.width, height: box.height, lines: s.querySelectorAll('polyline').length };
      }),
    );
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
    return { charts, requests };
  } finally {
    await browser.close();
  }
}

// `node --import tsx tests/support/browser.ts PAGE.html SHOT.png`: the README's example screenshot.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [file, png] = process.argv.slice(2);
  if (!file || !png) {
    process.stderr.write('usage: node --import tsx tests/support/browser.ts PAGE.html SHOT.png\n');
    process.exit(2);
  }
  const r = await renderPage(file, png);
  process.stdout.write(`${r.charts.length} charts, ${r.requests.length} outside requests; ${png} written\n`);
}
