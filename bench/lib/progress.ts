// A one-line progress bar on stderr, redrawn in place: label, bar, count/total, rate.
export class Progress {
  private start = performance.now();
  private last = 0;
  private tty = process.stderr.isTTY;

  constructor(
    private label: string,
    private total: number,
  ) {}

  update(count: number): void {
    const now = performance.now();
    if (now - this.last < 200 && count < this.total) return;
    this.last = now;
    const width = 24;
    const frac = this.total > 0 ? Math.min(1, count / this.total) : 1;
    const filled = Math.round(frac * width);
    const rate = count / Math.max(0.001, (now - this.start) / 1000);
    const line = `${this.label.padEnd(28)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${count}/${this.total} ${rate.toFixed(0)}/s`;
    // Without a terminal, print a line every so often instead of redrawing.
    if (this.tty) process.stderr.write(`\r${line}\x1b[K`);
    else if (count >= this.total || Math.floor(now / 5000) !== Math.floor((now - 200) / 5000))
      process.stderr.write(line + '\n');
  }

  done(): void {
    if (this.tty) process.stderr.write('\r\x1b[K');
  }
}

export function note(message: string): void {
  process.stderr.write(`${message}\n`);
}
