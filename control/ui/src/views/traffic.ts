// Routes with their weights, and each cluster's figures with ten minutes of
// history.

import { h, none, num, pct, table, td } from "../dom";
import type { Route } from "../api";
import { History, METRICS, sparkline } from "../series";

const SLICE_TONES = ["c0", "c1", "c2", "c3", "c4", "c5"];

export function routes(list: Route[]): Node {
  if (list.length === 0) return none();
  const clusters = [...new Set(list.flatMap((r) => Object.keys(r.split)))].sort();
  const tone = (cluster: string) => SLICE_TONES[clusters.indexOf(cluster) % SLICE_TONES.length];
  return h(
    "div",
    { class: "routes" },
    list.map((route) => {
      const total = Object.values(route.split).reduce((a, b) => a + b, 0);
      const parts = Object.entries(route.split);
      const share = (w: number) => (total === 0 ? 0 : (w / total) * 100);
      const bar = h("div", { class: "split-bar" });
      for (const [cluster, weight] of parts) {
        if (weight === 0) continue;
        const slice = h("span", { class: `slice ${tone(cluster)}`, title: `${cluster}: ${weight}` });
        slice.style.width = `${share(weight)}%`;
        bar.append(slice);
      }
      return h(
        "div",
        { class: "route", "data-route": route.name },
        h(
          "div",
          { class: "route-head" },
          h("strong", {}, route.name),
          h("span", { class: "muted" }, ` on ${route.listener}`),
          route.sticky ? h("span", { class: "muted" }, ` · sticky by ${route.sticky.header}`) : null,
        ),
        bar,
        h(
          "div",
          { class: "legend" },
          parts.map(([cluster, weight]) =>
            h(
              "span",
              { class: "weight", "data-cluster": cluster },
              h("i", { class: `dot ${tone(cluster)}` }),
              `${cluster} `,
              h("b", {}, `${num(share(weight))}%`),
              h("span", { class: "muted" }, ` (${weight})`),
            ),
          ),
        ),
      );
    }),
  );
}

function figure(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined) return "–";
  return unit === "%" ? pct(value) : `${num(value)}${unit === "" ? "" : ` ${unit}`}`;
}

/// One row per cluster and version: each metric's current value over its
/// sparkline.
export function clusters(history: History, now: number, windowSeconds: number): Node {
  const keys = history.keys();
  const rows = keys.map((key) => {
    const [cluster, version] = key.split("\u0000");
    return [
      td("name", h("strong", {}, cluster), h("div", { class: "muted" }, version)),
      ...METRICS.map(({ key: metric, unit }) => {
        const points = history.points(key, metric);
        const last = points.length === 0 ? null : points[points.length - 1].v;
        const tone = metric === "error_rate" && (last ?? 0) > 0 ? "bad" : "";
        return td(`metric ${tone}`, h("div", { class: "value" }, figure(last, unit)), sparkline(points, now, tone));
      }),
    ];
  });
  if (rows.length === 0) return none("none: no traffic seen yet");
  return h(
    "div",
    {},
    table(["cluster", ...METRICS.map((m) => m.label)], rows, "clusters"),
    h("p", { class: "foot muted" }, `each figure over the last ${windowSeconds} s; each line since this page opened (at least 1 minute wide, at most the last 10 minutes), scaled to its own peak`),
  );
}
