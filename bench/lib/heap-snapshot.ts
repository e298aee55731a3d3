// V8 .heapsnapshot files (the JSON DevTools reads): a summary by constructor, the difference between two
// snapshots of one process, and, for objects allocated between them and still alive, the shortest chain
// of references that keeps them from the GC roots.

import { readFile } from 'node:fs/promises';

interface RawSnapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

export interface ClassStats {
  count: number;
  selfSize: number;
}

export interface HeapSummary {
  nodes: number;
  totalSelfSize: number;
  maxId: number;
  byClass: Map<string, ClassStats>;
}

/** A parsed snapshot with the indexes the summaries and retainer walks use. */
export class HeapSnapshot {
  readonly nodeCount: number;
  private readonly nodes: number[];
  private readonly edges: number[];
  private readonly strings: string[];
  private readonly nodeTypes: string[];
  private readonly edgeTypes: string[];
  private readonly nf: number;
  private readonly ef: number;
  private readonly typeOff: number;
  private readonly nameOff: number;
  private readonly idOff: number;
  private readonly sizeOff: number;
  private readonly edgeCountOff: number;
  private readonly edgeTypeOff: number;
  private readonly edgeNameOff: number;
  private readonly edgeToOff: number;
  private readonly firstEdge: Uint32Array;
  private retainers?: { offsets: Uint32Array; from: Uint32Array; edge: Uint32Array };
  private distances?: Int32Array;

  constructor(raw: RawSnapshot) {
    const meta = raw.snapshot.meta;
    this.nodes = raw.nodes;
    this.edges = raw.edges;
    this.strings = raw.strings;
    this.nodeTypes = meta.node_types[0];
    this.edgeTypes = meta.edge_types[0];
    this.nf = meta.node_fields.length;
    this.ef = meta.edge_fields.length;
    this.typeOff = meta.node_fields.indexOf('type');
    this.nameOff = meta.node_fields.indexOf('name');
    this.idOff = meta.node_fields.indexOf('id');
    this.sizeOff = meta.node_fields.indexOf('self_size');
    this.edgeCountOff = meta.node_fields.indexOf('edge_count');
    this.edgeTypeOff = meta.edge_fields.indexOf('type');
    this.edgeNameOff = meta.edge_fields.indexOf('name_or_index');
    this.edgeToOff = meta.edge_fields.indexOf('to_node');
    this.nodeCount = this.nodes.length / this.nf;
    this.firstEdge = new Uint32Array(this.nodeCount + 1);
    for (let i = 0, e = 0; i < this.nodeCount; i++) {
      this.firstEdge[i] = e;
      e += this.nodes[i * this.nf + this.edgeCountOff]! * this.ef;
      this.firstEdge[i + 1] = e;
    }
  }

  static async read(file: string): Promise<HeapSnapshot> {
    return new HeapSnapshot(JSON.parse(await readFile(file, 'utf8')) as RawSnapshot);
  }

  id(node: number): number {
    return this.nodes[node * this.nf + this.idOff]!;
  }

  selfSize(node: number): number {
    return this.nodes[node * this.nf + this.sizeOff]!;
  }

  type(node: number): string {
    return this.nodeTypes[this.nodes[node * this.nf + this.typeOff]!]!;
  }

  name(node: number): string {
    return this.strings[this.nodes[node * this.nf + this.nameOff]!]!;
  }

  /** The group DevTools' summary puts a node in: the constructor of objects, `(type)` of the rest. */
  className(node: number): string {
    const type = this.type(node);
    switch (type) {
      case 'object':
      case 'native':
        return this.name(node);
      case 'closure':
        return '(closure)';
      case 'concatenated string':
      case 'sliced string':
      case 'string':
        return '(string)';
      default:
        return `(${type})`;
    }
  }

  /** Per class; `filter` keeps only some nodes (e.g. those allocated after another snapshot). */
  summary(filter?: (node: number) => boolean): HeapSummary {
    const byClass = new Map<string, ClassStats>();
    let total = 0;
    let maxId = 0;
    let counted = 0;
    for (let n = 0; n < this.nodeCount; n++) {
      const id = this.id(n);
      if (id > maxId) maxId = id;
      if (filter !== undefined && !filter(n)) continue;
      counted++;
      const size = this.selfSize(n);
      total += size;
      const cls = this.className(n);
      const s = byClass.get(cls);
      if (s === undefined) byClass.set(cls, { count: 1, selfSize: size });
      else {
        s.count++;
        s.selfSize += size;
      }
    }
    return { nodes: counted, totalSelfSize: total, maxId, byClass };
  }

  /** Nodes of `className` whose id is above `minId`, largest first (at most `limit`). */
  instances(className: string, minId: number, limit: number): number[] {
    const found: number[] = [];
    for (let n = 0; n < this.nodeCount; n++) {
      if (this.id(n) > minId && this.className(n) === className) found.push(n);
    }
    found.sort((a, b) => this.selfSize(b) - this.selfSize(a));
    return found.slice(0, limit);
  }

  private edgeName(e: number): string {
    const type = this.edgeTypes[this.edges[e + this.edgeTypeOff]!]!;
    const nameOrIndex = this.edges[e + this.edgeNameOff]!;
    if (type === 'element' || type === 'hidden') return `[${nameOrIndex}]`;
    return this.strings[nameOrIndex] ?? String(nameOrIndex);
  }

  private isWeak(e: number): boolean {
    return this.edgeTypes[this.edges[e + this.edgeTypeOff]!] === 'weak';
  }

  /** Shortest strong distance of every node from the root (node 0); -1 when unreachable. */
  private distancesFromRoot(): Int32Array {
    if (this.distances !== undefined) return this.distances;
    const dist = new Int32Array(this.nodeCount).fill(-1);
    const queue = new Uint32Array(this.nodeCount);
    let head = 0;
    let tail = 0;
    dist[0] = 0;
    queue[tail++] = 0;
    while (head < tail) {
      const n = queue[head++]!;
      for (let e = this.firstEdge[n]!; e < this.firstEdge[n + 1]!; e += this.ef) {
        if (this.isWeak(e)) continue;
        const to = this.edges[e + this.edgeToOff]! / this.nf;
        if (dist[to] !== -1) continue;
        dist[to] = dist[n]! + 1;
        queue[tail++] = to;
      }
    }
    this.distances = dist;
    return dist;
  }

  private retainerIndex(): { offsets: Uint32Array; from: Uint32Array; edge: Uint32Array } {
    if (this.retainers !== undefined) return this.retainers;
    const edgeCount = this.edges.length / this.ef;
    const offsets = new Uint32Array(this.nodeCount + 1);
    for (let e = 0; e < this.edges.length; e += this.ef)
      offsets[this.edges[e + this.edgeToOff]! / this.nf]!++;
    for (let i = 0, sum = 0; i <= this.nodeCount; i++) {
      const c = offsets[i]!;
      offsets[i] = sum;
      sum += c;
    }
    const fill = offsets.slice();
    const from = new Uint32Array(edgeCount);
    const edge = new Uint32Array(edgeCount);
    for (let n = 0; n < this.nodeCount; n++) {
      for (let e = this.firstEdge[n]!; e < this.firstEdge[n + 1]!; e += this.ef) {
        const to = this.edges[e + this.edgeToOff]! / this.nf;
        const slot = fill[to]!++;
        from[slot] = n;
        edge[slot] = e;
      }
    }
    this.retainers = { offsets, from, edge };
    return this.retainers;
  }

  private describe(node: number): string {
    const type = this.type(node);
    let name = this.name(node);
    if (type.endsWith('string')) name = JSON.stringify(name.slice(0, 60));
    else if (name.length > 80) name = `${name.slice(0, 77)}...`;
    return `${this.className(node)} ${name === this.className(node) ? '' : `${name} `}@${this.id(node)}`;
  }

  /**
   * The shortest chain of strong references from a GC root to `target`, root side first, as
   * `Class name @id .edge` lines; undefined when only weak references reach it.
   */
  retainerPath(target: number, maxSteps = 20): string[] | undefined {
    const dist = this.distancesFromRoot();
    if (dist[target] === -1) return undefined;
    const { offsets, from, edge } = this.retainerIndex();
    const steps: string[] = [this.describe(target)];
    let n = target;
    while (n !== 0 && steps.length <= maxSteps) {
      let next = -1;
      let via = -1;
      for (let i = offsets[n]!; i < offsets[n + 1]!; i++) {
        const r = from[i]!;
        if (dist[r] === dist[n]! - 1 && !this.isWeak(edge[i]!)) {
          next = r;
          via = edge[i]!;
          break;
        }
      }
      if (next === -1) break;
      if (next !== 0) steps.push(`${this.describe(next)} .${this.edgeName(via)}`);
      n = next;
    }
    return steps.reverse();
  }
}

export interface ClassDelta {
  className: string;
  countStart: number;
  countEnd: number;
  countDelta: number;
  selfSizeStart: number;
  selfSizeEnd: number;
  selfSizeDelta: number;
}

/** Classes of both summaries, largest self-size growth first. */
export function diffSummaries(start: HeapSummary, end: HeapSummary): ClassDelta[] {
  const names = new Set([...start.byClass.keys(), ...end.byClass.keys()]);
  const out: ClassDelta[] = [];
  for (const className of names) {
    const a = start.byClass.get(className) ?? { count: 0, selfSize: 0 };
    const b = end.byClass.get(className) ?? { count: 0, selfSize: 0 };
    out.push({
      className,
      countStart: a.count,
      countEnd: b.count,
      countDelta: b.count - a.count,
      selfSizeStart: a.selfSize,
      selfSizeEnd: b.selfSize,
      selfSizeDelta: b.selfSize - a.selfSize,
    });
  }
  return out.sort((x, y) => y.selfSizeDelta - x.selfSizeDelta);
}

/** Top `n` of a summary by self size. */
export function topClasses(
  summary: HeapSummary,
  n: number,
): { className: string; count: number; selfSize: number }[] {
  return [...summary.byClass.entries()]
    .map(([className, s]) => ({ className, ...s }))
    .sort((a, b) => b.selfSize - a.selfSize)
    .slice(0, n);
}
