// The last ten minutes of each cluster's figures, kept in the page: the API
// answers the current window only, so the history is what this tab has seen.

import { svg } from "./dom";
import type { StatsRow } from "./api";

export const KEEP_MS = 10 * 60 * 1000;

export interface Point {
  t: number;
  v: number | null;
}

/// The figures of one cluster and version at one poll.
export interface Figures {
  rps: number;
  error_rate: number;
  ttft_p50: number | null;
  ttft_p95: number | null;
  gap_p99: number | null;
  tokens_per_second: number;
}

export type Metric = keyof Figures;

export const METRICS: { key: Metric; label: string; unit: string }[] = [
  { key: "rps", label: "rps", unit: "" },
  { key: "error_rate", label: "errors", unit: "%" },
  { key: "ttft_p50", label: "TTFT p50", unit: "ms" },
  { key: "ttft_p95", label: "TTFT p95", unit: "ms" },
  { key: "gap_p99", label: "gap p99", unit: "ms" },
  { key: "tokens_per_second", label: "tokens/s", unit: "" },
];

/// Rows of one cluster and version across routes: rates add up, the error
/// rate is over all their requests, and latencies are the worst route's.
export function figuresByCluster(rows: StatsRow[]): Map<string, Figures> {
  const groups = new Map<string, StatsRow[]>();
  for (const row of rows) {
    const key = `${row.cluster}\u0000${row.version}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const out = new Map<string, Figures>();
  for (const [key, group] of groups) {
    const requests = group.reduce((n, r) => n + r.requests, 0);
    const errors = group.reduce((n, r) => n + r.errors, 0);
    const worst = (pick: (r: StatsRow) => number | undefined | null) => {
      const values = group.map(pick).filter((v): v is number => typeof v === "number");
      return values.length === 0 ? null : Math.max(...values);
    };
    out.set(key, {
      rps: group.reduce((n, r) => n + r.rps, 0),
      error_rate: requests === 0 ? 0 : errors / requests,
      ttft_p50: worst((r) => r.ttft_ms?.p50),
      ttft_p95: worst((r) => r.ttft_ms?.p95),
      gap_p99: worst((r) => r.gap_ms?.p99),
      tokens_per_second: group.reduce((n, r) => n + r.output_tokens_per_second, 0),
    });
  }
  return out;
}

/// Every cluster's series, by `cluster\0version` then metric.
export class History {
  private series = new Map<string, Map<Metric, Point[]>>();

  add(now: number, figures: Map<string, Figures>): void {
    for (const [key, f] of figures) {
      let byMetric = this.series.get(key);
      if (byMetric === undefined) {
        byMetric = new Map();
        this.series.set(key, byMetric);
      }
      for (const { key: metric } of METRICS) {
        const points = byMetric.get(metric) ?? [];
        points.push({ t: now, v: f[metric] });
        byMetric.set(metric, points);
      }
    }
    // A cluster that went quiet keeps its line until it is ten minutes old.
    for (const [key, byMetric] of this.series) {
      for (const [metric, points] of byMetric) {
        const kept = points.filter((p) => now - p.t <= KEEP_MS);
        if (kept.length === 0) byMetric.delete(metric);
        else byMetric.set(metric, kept);
      }
      if (byMetric.size === 0) this.series.delete(key);
    }
  }

  keys(): string[] {
    return [...this.series.keys()].sort();
  }

  points(key: string, metric: Metric): Point[] {
    return this.series.get(key)?.get(metric) ?? [];
  }
}

const WIDTH = 120;
const HEIGHT = 26;
/// The narrowest span a line is drawn over, so that a page just opened
/// does not stretch its first seconds across the whole width.
const MIN_SPAN_MS = 60 * 1000;

/// A line over what this page has seen (a minute at least, ten at most),
/// scaled from 0 to its own maximum; gaps where nothing was measured.
export function sparkline(points: Point[], now: number, tone: string): SVGElement {
  const max = Math.max(0, ...points.map((p) => p.v ?? 0));
  const first = points.length === 0 ? now : points[0].t;
  const span = Math.min(KEEP_MS, Math.max(MIN_SPAN_MS, now - first));
  const x = (t: number) => WIDTH - ((now - t) / span) * WIDTH;
  const y = (v: number) => HEIGHT - 2 - (max === 0 ? 0 : (v / max) * (HEIGHT - 4));
  let d = "";
  let pen = false;
  for (const p of points) {
    if (p.v === null) {
      pen = false;
      continue;
    }
    d += `${pen ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`;
    pen = true;
  }
  return svg(
    "svg",
    { class: `spark ${tone}`, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: "img", "data-span-s": Math.round(span / 1000) },
    svg("line", { class: "base", x1: 0, x2: WIDTH, y1: HEIGHT - 1.5, y2: HEIGHT - 1.5 }),
    d === "" ? null : svg("path", { class: "line", d }),
  );
}
