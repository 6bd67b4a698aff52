// Mirror diffs, GPUs and upstreams, load runs and the audit log.

import type { AuditEvent, Gpu, LoadRun, MirrorDiffs, Upstreams } from "../api";
import { badge, clock, duration, h, none, num, pct, table, td } from "../dom";

export function mirror(m: MirrorDiffs): Node {
  const rows = m.diffs.slice(0, 10).map((d) => [
    td("num", clock(d.time_ms)),
    td("name", d.route),
    td("", d.kinds.map((k) => badge(k, "warn"))),
    td("num", d.similarity === undefined ? "–" : num(d.similarity)),
    td("num", `${d.primary.status} / ${d.shadow.status}`),
    td("num", d.latency_ratio === undefined ? "–" : `×${num(d.latency_ratio)}`),
    td("muted", `${d.shadow.cluster} #${d.copy}`),
  ]);
  return h(
    "div",
    {},
    h("p", { class: "muted" }, `${m.total} differing pair${m.total === 1 ? "" : "s"} recorded (the last ${m.capacity} kept)`),
    table(["time", "route", "differs in", "similarity", "status p/s", "latency", "shadow"], rows),
  );
}

const GIB = 1024 ** 3;

export function gauges(gpu: Gpu, upstreams: Upstreams): Node {
  const devices = gpu.devices.map((d) => [
    td("name", `#${d.index} ${d.name ?? ""}`),
    td("num", d.utilization_gpu_percent === undefined ? "–" : `${d.utilization_gpu_percent}%`),
    td(
      "num",
      d.memory_used_bytes === undefined || d.memory_total_bytes === undefined
        ? "–"
        : `${num(d.memory_used_bytes / GIB)} / ${num(d.memory_total_bytes / GIB)} GiB`,
    ),
    td("num", d.temperature_celsius === undefined ? "–" : `${d.temperature_celsius} °C`),
    td("num", d.power_watts === undefined ? "–" : `${num(d.power_watts)} W`),
  ]);
  const clusters = upstreams.clusters.map((c) => [
    td("name", c.cluster),
    td("num", `${c.load.endpoints_up}/${c.endpoints.length}`),
    td("num", num(c.load.running)),
    td("num", num(c.load.waiting)),
    td("num", pct(c.load.kv_cache_usage)),
  ]);
  return h(
    "div",
    { class: "gauges" },
    h("h3", {}, "GPUs"),
    gpu.available ? table(["device", "util", "memory", "temp", "power"], devices) : none(`none: ${gpu.reason ?? "not watched"}`),
    h("h3", {}, "Upstreams"),
    table(["cluster", "up", "running", "waiting", "KV cache"], clusters),
  );
}

const RUN_TONES: Record<string, string> = { running: "info", done: "good", interrupted: "warn" };

export function loadRuns(runs: LoadRun[]): Node {
  const rows = runs.slice(0, 10).map((r) => [
    td("name", h("strong", {}, r.scenario), h("div", { class: "muted" }, `${r.run_id} · shard ${r.shard}`)),
    td("", badge(r.state, RUN_TONES[r.state] ?? "idle")),
    td("num", r.stage === null ? `–/${r.stages}` : `${r.stage + 1}/${r.stages}`),
    td("num", `${num(r.achieved_rate)}/s`),
    td("num", `${r.done}/${r.sent}`),
    td(`num ${r.failed > 0 ? "bad" : ""}`, String(r.failed)),
    td("num", r.ttft_p95_ms === null ? "–" : `${num(r.ttft_p95_ms)} ms`),
    td("num", pct(r.error_rate)),
    td("", badge(r.passed ? "pass" : "fail", r.passed ? "good" : "bad")),
    td("num", `${duration(r.elapsed_s * 1000)} / ${duration(r.duration_s * 1000)}`),
  ]);
  return table(["scenario", "state", "stage", "rate", "done", "failed", "TTFT p95", "errors", "thresholds", "elapsed"], rows);
}

export function audit(events: AuditEvent[]): Node {
  const rows = [...events]
    .sort((a, b) => b.seq - a.seq)
    .slice(0, 10)
    .map((e) => [
      td("num", clock(e.time_ms)),
      td("muted", e.token ? `${e.source} (${e.token})` : e.source),
      td("", e.action),
      td(e.result === "applied" ? "" : "bad", e.result),
    ]);
  return table(["time", "by", "action", "result"], rows);
}
