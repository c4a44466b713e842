// A binary min-heap under a comparator: the event queue and each shape's pending jobs.
export class Heap<T> {
  private items: T[] = [];
  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): T | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last !== undefined) {
      a[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  private siftDown(i: number): void {
    const a = this.items;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.less(a[l]!, a[m]!)) m = l;
      if (r < a.length && this.less(a[r]!, a[m]!)) m = r;
      if (m === i) return;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}

/** A set with O(1) add, delete and indexed access, for sampling and scanning from a random start. */
export class IndexedSet<T> {
  private items: T[] = [];
  private index = new Map<T, number>();

  get size(): number {
    return this.items.length;
  }

  at(i: number): T {
    return this.items[i]!;
  }

  has(item: T): boolean {
    return this.index.has(item);
  }

  add(item: T): void {
    if (this.index.has(item)) return;
    this.index.set(item, this.items.length);
    this.items.push(item);
  }

  delete(item: T): void {
    const i = this.index.get(item);
    if (i === undefined) return;
    const last = this.items.pop()!;
    this.index.delete(item);
    if (last !== item) {
      this.items[i] = last;
      this.index.set(last, i);
    }
  }

  values(): readonly T[] {
    return this.items;
  }
}
