"use strict";
(() => {
  // src/api.ts
  var TOKEN_KEY = "sluice.token";
  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }
  function setToken(value) {
    if (value === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, value);
  }
  var ApiError = class extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  };
  async function call(method, path) {
    const headers = { accept: "application/json" };
    const t = token();
    if (t !== null) headers.authorization = `Bearer ${t}`;
    const response = await fetch(path, { method, headers, cache: "no-store" });
    const text = await response.text();
    let body = null;
    try {
      body = text === "" ? null : JSON.parse(text);
    } catch {
      body = null;
    }
    if (!response.ok) {
      const error = body?.error;
      throw new ApiError(response.status, typeof error === "string" ? error : `${method} ${path}: ${response.status}`);
    }
    return body;
  }
  var get = (path) => call("GET", path);

  // src/dom.ts
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs = {}, ...children) {
    const el = document.createElementNS(SVG, tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }
  function setAttrs(el, attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === void 0 || value === false) continue;
      if (typeof value === "function") {
        el.addEventListener(name.replace(/^on/, ""), value);
      } else {
        el.setAttribute(name, value === true ? "" : String(value));
      }
    }
  }
  function append(el, children) {
    for (const child of children.flat()) {
      if (child === null || child === void 0 || child === false) continue;
      el.append(typeof child === "number" ? String(child) : child);
    }
  }
  function table(headers, rows, className = "") {
    if (rows.length === 0) return none();
    return h(
      "table",
      { class: className },
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => c instanceof HTMLTableCellElement ? c : h("td", {}, c)))))
    );
  }
  function td(className, ...children) {
    return h("td", { class: className }, ...children);
  }
  function none(what = "none") {
    return h("p", { class: "none" }, what);
  }
  function badge(text, tone) {
    return h("span", { class: `badge ${tone}` }, text);
  }
  function num(value, digits = 3) {
    if (value === null || value === void 0 || !Number.isFinite(value)) return "–";
    if (value === 0) return "0";
    const abs = Math.abs(value);
    if (abs >= 10 ** digits) return Math.round(value).toString();
    return Number(value.toPrecision(digits)).toString();
  }
  function pct(ratio) {
    if (ratio === null || ratio === void 0 || !Number.isFinite(ratio)) return "–";
    return `${num(ratio * 100)}%`;
  }
  function clock(ms) {
    const d = new Date(ms);
    const two = (n) => String(n).padStart(2, "0");
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  }
  function duration(ms) {
    const s = Math.max(0, Math.round(ms / 1e3));
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  }

  // src/series.ts
  var KEEP_MS = 10 * 60 * 1e3;
  var METRICS = [
    { key: "rps", label: "rps", unit: "" },
    { key: "error_rate", label: "errors", unit: "%" },
    { key: "ttft_p50", label: "TTFT p50", unit: "ms" },
    { key: "ttft_p95", label: "TTFT p95", unit: "ms" },
    { key: "gap_p99", label: "gap p99", unit: "ms" },
    { key: "tokens_per_second", label: "tokens/s", unit: "" }
  ];
  function figuresByCluster(rows) {
    const groups = /* @__PURE__ */ new Map();
    for (const row of rows) {
      const key = `${row.cluster}\0${row.version}`;
      groups.set(key, [...groups.get(key) ?? [], row]);
    }
    const out = /* @__PURE__ */ new Map();
    for (const [key, group] of groups) {
      const requests = group.reduce((n, r) => n + r.requests, 0);
      const errors = group.reduce((n, r) => n + r.errors, 0);
      const worst = (pick) => {
        const values = group.map(pick).filter((v) => typeof v === "number");
        return values.length === 0 ? null : Math.max(...values);
      };
      out.set(key, {
        rps: group.reduce((n, r) => n + r.rps, 0),
        error_rate: requests === 0 ? 0 : errors / requests,
        ttft_p50: worst((r) => r.ttft_ms?.p50),
        ttft_p95: worst((r) => r.ttft_ms?.p95),
        gap_p99: worst((r) => r.gap_ms?.p99),
        tokens_per_second: group.reduce((n, r) => n + r.output_tokens_per_second, 0)
      });
    }
    return out;
  }
  var History = class {
    constructor() {
      this.series = /* @__PURE__ */ new Map();
    }
    add(now, figures) {
      for (const [key, f] of figures) {
        let byMetric = this.series.get(key);
        if (byMetric === void 0) {
          byMetric = /* @__PURE__ */ new Map();
          this.series.set(key, byMetric);
        }
        for (const { key: metric } of METRICS) {
          const points = byMetric.get(metric) ?? [];
          points.push({ t: now, v: f[metric] });
          byMetric.set(metric, points);
        }
      }
      for (const [key, byMetric] of this.series) {
        for (const [metric, points] of byMetric) {
          const kept = points.filter((p) => now - p.t <= KEEP_MS);
          if (kept.length === 0) byMetric.delete(metric);
          else byMetric.set(metric, kept);
        }
        if (byMetric.size === 0) this.series.delete(key);
      }
    }
    keys() {
      return [...this.series.keys()].sort();
    }
    points(key, metric) {
      return this.series.get(key)?.get(metric) ?? [];
    }
  };
  var WIDTH = 120;
  var HEIGHT = 26;
  var MIN_SPAN_MS = 60 * 1e3;
  function sparkline(points, now, tone) {
    const max = Math.max(0, ...points.map((p) => p.v ?? 0));
    const first = points.length === 0 ? now : points[0].t;
    const span = Math.min(KEEP_MS, Math.max(MIN_SPAN_MS, now - first));
    const x = (t) => WIDTH - (now - t) / span * WIDTH;
    const y = (v) => HEIGHT - 2 - (max === 0 ? 0 : v / max * (HEIGHT - 4));
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
      { class: `spark ${tone}`, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: "img", "data-span-s": Math.round(span / 1e3) },
      svg("line", { class: "base", x1: 0, x2: WIDTH, y1: HEIGHT - 1.5, y2: HEIGHT - 1.5 }),
      d === "" ? null : svg("path", { class: "line", d })
    );
  }

  // src/views/traffic.ts
  var SLICE_TONES = ["c0", "c1", "c2", "c3", "c4", "c5"];
  function routes(list) {
    if (list.length === 0) return none();
    const clusters2 = [...new Set(list.flatMap((r) => Object.keys(r.split)))].sort();
    const tone = (cluster) => SLICE_TONES[clusters2.indexOf(cluster) % SLICE_TONES.length];
    return h(
      "div",
      { class: "routes" },
      list.map((route) => {
        const total = Object.values(route.split).reduce((a, b) => a + b, 0);
        const parts = Object.entries(route.split);
        const share = (w) => total === 0 ? 0 : w / total * 100;
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
            route.sticky ? h("span", { class: "muted" }, ` · sticky by ${route.sticky.header}`) : null
          ),
          bar,
          h(
            "div",
            { class: "legend" },
            parts.map(
              ([cluster, weight]) => h(
                "span",
                { class: "weight", "data-cluster": cluster },
                h("i", { class: `dot ${tone(cluster)}` }),
                `${cluster} `,
                h("b", {}, `${num(share(weight))}%`),
                h("span", { class: "muted" }, ` (${weight})`)
              )
            )
          )
        );
      })
    );
  }
  function figure(value, unit) {
    if (value === null || value === void 0) return "–";
    return unit === "%" ? pct(value) : `${num(value)}${unit === "" ? "" : ` ${unit}`}`;
  }
  function clusters(history, now, windowSeconds) {
    const keys = history.keys();
    const rows = keys.map((key) => {
      const [cluster, version] = key.split("\0");
      return [
        td("name", h("strong", {}, cluster), h("div", { class: "muted" }, version)),
        ...METRICS.map(({ key: metric, unit }) => {
          const points = history.points(key, metric);
          const last = points.length === 0 ? null : points[points.length - 1].v;
          const tone = metric === "error_rate" && (last ?? 0) > 0 ? "bad" : "";
          return td(`metric ${tone}`, h("div", { class: "value" }, figure(last, unit)), sparkline(points, now, tone));
        })
      ];
    });
    if (rows.length === 0) return none("none: no traffic seen yet");
    return h(
      "div",
      {},
      table(["cluster", ...METRICS.map((m) => m.label)], rows, "clusters"),
      h("p", { class: "foot muted" }, `each figure over the last ${windowSeconds} s; each line since this page opened (at least 1 minute wide, at most the last 10 minutes), scaled to its own peak`)
    );
  }

  // src/views/rollouts.ts
  var STATE_TONES = {
    pending: "idle",
    progressing: "info",
    paused: "warn",
    promoted: "good",
    rolled_back: "bad",
    aborted: "idle"
  };
  function stateBadge(state) {
    return badge(state, STATE_TONES[state] ?? "idle");
  }
  function reading(value, unit) {
    if (value === null) return "–";
    if (unit === "usd") return `$${num(value)}`;
    if (unit === "%") return `${num(value)}%`;
    if (unit === "ms") return `${num(value)} ms`;
    return num(value);
  }
  function gateRow(g) {
    const verdict = g.ok === null ? ["not judged", "idle"] : g.ok ? ["ok", "good"] : ["breached", "bad"];
    return [
      td("name", g.gate),
      td(`num ${g.ok === false ? "bad" : ""}`, reading(g.value, g.unit)),
      // `*_min` gates hold a floor; the others a ceiling.
      td("num muted", `${g.gate.endsWith("_min") ? "≥" : "≤"} ${reading(g.bound, g.unit)}`),
      td("num muted", String(g.samples)),
      td("", badge(verdict[0], verdict[1]))
    ];
  }
  function progress(r) {
    const bar = h("div", { class: "progress" });
    const fill = h("span", { class: `fill ${STATE_TONES[r.state] ?? "idle"}` });
    fill.style.width = `${Math.min(100, r.weight)}%`;
    bar.append(fill);
    r.steps.forEach((step, i) => {
      const tick = h("i", { class: `tick ${i < r.step ? "done" : ""}`, title: `step ${i + 1}: ${step}%` });
      tick.style.left = `${step}%`;
      bar.append(tick);
    });
    return bar;
  }
  function card(r) {
    const events = r.events ?? [];
    const last = events[events.length - 1];
    const gates = Object.values(r.gates ?? {});
    return h(
      "article",
      { class: "rollout", "data-rollout": r.name, "data-state": r.state },
      h(
        "div",
        { class: "rollout-now" },
        h(
          "header",
          {},
          h("strong", {}, r.name),
          stateBadge(r.state),
          h("span", { class: "muted" }, ` route ${r.route}: ${r.stable} → ${r.canary}`)
        ),
        h(
          "div",
          { class: "step-line" },
          h("span", { class: "step" }, `step ${r.step}/${r.steps.length}`),
          h("span", {}, ` canary weight `),
          h("b", { class: "weight" }, `${r.weight}%`),
          h("span", { class: "muted" }, ` · steps ${r.steps.join(", ")}%`),
          r.breaches ? h("span", { class: "bad" }, ` · ${r.breaches} breach${r.breaches === 1 ? "" : "es"} in a row`) : null
        ),
        progress(r),
        r.state === "rolled_back" && last ? h("div", { class: "callout bad reason" }, h("b", {}, "rolled back: "), last.reason) : null,
        gates.length === 0 ? none("no gate read yet") : table(["gate", "canary", "bound", "samples", ""], gates.map(gateRow), "gates")
      ),
      h(
        "ol",
        { class: "timeline" },
        [...events].reverse().slice(0, 12).map(
          (e) => h(
            "li",
            { class: e.to === "rolled_back" ? "bad" : "" },
            h("time", {}, clock(e.time_ms)),
            h("span", { class: "transition" }, `${e.from} → ${e.to}`),
            h("span", { class: "muted" }, ` step ${e.step}, ${e.weight}%`),
            h("div", { class: "event-reason" }, e.reason)
          )
        )
      )
    );
  }
  function rollouts(list) {
    if (list.length === 0) return none();
    return h("div", { class: "rollouts" }, list.map(card));
  }

  // src/views/faults.ts
  var FAULT_TONES = { active: "warn", halted: "bad", expired: "idle" };
  function target(f) {
    const m = f.match ?? {};
    const parts = Object.entries(m).filter(([, v]) => typeof v === "string").map(([k, v]) => `${k} ${v}`);
    return parts.length === 0 ? "all traffic" : parts.join(", ");
  }
  var FaultsView = class {
    constructor(onChange) {
      this.onChange = onChange;
      this.el = h("div", { class: "faults" });
      this.message = h("p", { class: "message", role: "status" });
      this.body = h("tbody");
      this.table = h(
        "table",
        { class: "faults" },
        h("thead", {}, h("tr", {}, ["id", "action", "match", "state", "injected", "time left", ""].map((x) => h("th", {}, x)))),
        this.body
      );
      this.empty = none();
      this.rows = /* @__PURE__ */ new Map();
      this.el.append(this.message, this.empty);
    }
    update(faults, now) {
      const seen = /* @__PURE__ */ new Set();
      for (const f of faults) {
        seen.add(f.id);
        let row = this.rows.get(f.id);
        if (row === void 0) {
          row = this.row(f);
          this.rows.set(f.id, row);
          this.body.append(row.el);
        }
        row.endsAt = now + f.time_left_ms;
        row.state.replaceChildren(badge(f.state, FAULT_TONES[f.state] ?? "idle"));
        row.injected.textContent = String(f.injected);
      }
      for (const [id, row] of this.rows) {
        if (!seen.has(id)) {
          row.el.remove();
          this.rows.delete(id);
        }
      }
      this.tick(now);
      const shown = this.rows.size === 0 ? this.empty : this.table;
      if (shown.parentNode !== this.el) this.el.replaceChildren(this.message, shown);
    }
    /// The countdowns, from the last poll's time left.
    tick(now) {
      for (const row of this.rows.values()) row.left.textContent = duration(row.endsAt - now);
    }
    row(f) {
      const state = h("td");
      const injected = h("td", { class: "num" });
      const left = h("td", { class: "num countdown" });
      const stop = h("button", { class: "stop", type: "button", title: `DELETE /v1/faults/${f.id}` }, "stop");
      stop.addEventListener("click", () => void this.stop(f.id, stop));
      const el = h(
        "tr",
        { "data-fault": f.id },
        h("td", { class: "name" }, f.id),
        h("td", {}, f.kind, h("div", { class: "muted" }, `${f.percent ?? 100}% of requests`)),
        h("td", { class: "muted" }, target(f)),
        state,
        injected,
        left,
        h("td", {}, stop)
      );
      return { el, state, injected, left, endsAt: 0 };
    }
    async stop(id, button) {
      button.disabled = true;
      try {
        await call("DELETE", `/v1/faults/${encodeURIComponent(id)}`);
        this.say(`stopped ${id}`, "good");
        this.rows.get(id)?.el.remove();
        this.rows.delete(id);
        if (this.rows.size === 0) this.el.replaceChildren(this.message, this.empty);
        this.onChange();
      } catch (e) {
        button.disabled = false;
        const text = e instanceof ApiError ? `cannot stop ${id}: ${e.message}` : `cannot stop ${id}: ${String(e)}`;
        this.say(text, "bad");
        if (e instanceof ApiError && e.status === 401) this.onChange();
      }
    }
    say(text, tone) {
      this.message.className = `message ${tone}`;
      this.message.textContent = text;
    }
  };

  // src/views/others.ts
  function mirror(m) {
    const rows = m.diffs.slice(0, 10).map((d) => [
      td("num", clock(d.time_ms)),
      td("name", d.route),
      td("", d.kinds.map((k) => badge(k, "warn"))),
      td("num", d.similarity === void 0 ? "–" : num(d.similarity)),
      td("num", `${d.primary.status} / ${d.shadow.status}`),
      td("num", d.latency_ratio === void 0 ? "–" : `×${num(d.latency_ratio)}`),
      td("muted", `${d.shadow.cluster} #${d.copy}`)
    ]);
    return h(
      "div",
      {},
      h("p", { class: "muted" }, `${m.total} differing pair${m.total === 1 ? "" : "s"} recorded (the last ${m.capacity} kept)`),
      table(["time", "route", "differs in", "similarity", "status p/s", "latency", "shadow"], rows)
    );
  }
  var GIB = 1024 ** 3;
  function gauges(gpu, upstreams) {
    const devices = gpu.devices.map((d) => [
      td("name", `#${d.index} ${d.name ?? ""}`),
      td("num", d.utilization_gpu_percent === void 0 ? "–" : `${d.utilization_gpu_percent}%`),
      td(
        "num",
        d.memory_used_bytes === void 0 || d.memory_total_bytes === void 0 ? "–" : `${num(d.memory_used_bytes / GIB)} / ${num(d.memory_total_bytes / GIB)} GiB`
      ),
      td("num", d.temperature_celsius === void 0 ? "–" : `${d.temperature_celsius} °C`),
      td("num", d.power_watts === void 0 ? "–" : `${num(d.power_watts)} W`)
    ]);
    const clusters2 = upstreams.clusters.map((c) => [
      td("name", c.cluster),
      td("num", `${c.load.endpoints_up}/${c.endpoints.length}`),
      td("num", num(c.load.running)),
      td("num", num(c.load.waiting)),
      td("num", pct(c.load.kv_cache_usage))
    ]);
    return h(
      "div",
      { class: "gauges" },
      h("h3", {}, "GPUs"),
      gpu.available ? table(["device", "util", "memory", "temp", "power"], devices) : none(`none: ${gpu.reason ?? "not watched"}`),
      h("h3", {}, "Upstreams"),
      table(["cluster", "up", "running", "waiting", "KV cache"], clusters2)
    );
  }
  var RUN_TONES = { running: "info", done: "good", interrupted: "warn" };
  function loadRuns(runs) {
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
      td("num", `${duration(r.elapsed_s * 1e3)} / ${duration(r.duration_s * 1e3)}`)
    ]);
    return table(["scenario", "state", "stage", "rate", "done", "failed", "TTFT p95", "errors", "thresholds", "elapsed"], rows);
  }
  function audit(events) {
    const rows = [...events].sort((a, b) => b.seq - a.seq).slice(0, 10).map((e) => [
      td("num", clock(e.time_ms)),
      td("muted", e.token ? `${e.source} (${e.token})` : e.source),
      td("", e.action),
      td(e.result === "applied" ? "" : "bad", e.result)
    ]);
    return table(["time", "by", "action", "result"], rows);
  }

  // src/main.ts
  var POLL_MS = 1e3;
  var STALE_MS = 3500;
  var root = document.getElementById("app");
  function panel(title, id, className = "") {
    const body = h("div", { class: "panel-body" }, h("p", { class: "none" }, "loading…"));
    const el = h("section", { class: `panel ${className}`, id }, h("h2", {}, title), body);
    return { el, body };
  }
  var Console = class {
    constructor(onLoggedOut) {
      this.onLoggedOut = onLoggedOut;
      this.history = new History();
      this.faults = new FaultsView(() => void this.poll());
      this.live = h("span", { class: "live stale" }, "connecting");
      // In the grid's order: what changes under an operator's hands first.
      this.panels = {
        routes: panel("Routes & weights", "routes"),
        faults: panel("Fault experiments", "faults"),
        gauges: panel("GPU & upstreams", "gauges"),
        clusters: panel("Clusters", "clusters", "wide"),
        rollouts: panel("Rollouts", "rollouts", "wide"),
        mirror: panel("Mirror diffs", "mirror"),
        audit: panel("Changes", "audit", "double"),
        loadRuns: panel("Load runs", "load-runs", "wide")
      };
      this.lastGood = 0;
      this.timer = 0;
      this.polling = false;
      /// Signed out: a round still in flight draws nothing and signs out no one.
      this.stopped = false;
    }
    mount() {
      const logout = h("button", { type: "button", class: "ghost" }, "sign out");
      logout.addEventListener("click", () => this.stop("signed out", "muted"));
      const header = h(
        "header",
        { class: "top" },
        h("h1", {}, "sluice"),
        h("span", { class: "instance", title: "the control API this page reads" }, location.host),
        this.live,
        h("span", { class: "spacer" }),
        logout
      );
      this.panels.faults.body.replaceChildren(this.faults.el);
      root.replaceChildren(header, h("main", { class: "grid" }, Object.values(this.panels).map((p) => p.el)));
      void this.poll();
      this.timer = window.setInterval(() => {
        void this.poll();
      }, POLL_MS);
    }
    stop(message, tone) {
      if (this.stopped) return;
      this.stopped = true;
      window.clearInterval(this.timer);
      setToken(null);
      this.onLoggedOut(message, tone);
    }
    /// One round: every read at once; a 401 on any signs out, another
    /// failure shows in its own panel only.
    async poll() {
      if (this.polling || this.stopped) return;
      this.polling = true;
      try {
        await this.round();
      } finally {
        this.polling = false;
      }
    }
    async round() {
      const reads = await Promise.allSettled([
        get("/v1/stats"),
        get("/v1/routes"),
        get("/v1/rollouts").then(
          (list) => (
            // The list leaves out each rollout's events: read them one by one.
            Promise.all(list.map((r) => get(`/v1/rollouts/${encodeURIComponent(r.name)}`)))
          )
        ),
        get("/v1/faults"),
        get("/v1/mirror/diffs"),
        get("/v1/gpu"),
        get("/v1/upstreams"),
        get("/v1/load-runs"),
        get("/v1/events")
      ]);
      if (this.stopped) return;
      const unauthorized = reads.find((r) => r.status === "rejected" && r.reason instanceof ApiError && r.reason.status === 401);
      if (unauthorized !== void 0 && unauthorized.status === "rejected") {
        this.stop(`signed out: ${unauthorized.reason.message}`, "bad");
        return;
      }
      const now = Date.now();
      const [stats, routeList, rolloutList, faultList, diffs, gpu, upstreams, runs, events] = reads;
      const show = (read, into, draw) => {
        if (read.status === "fulfilled") into.replaceChildren(draw(read.value));
        else into.replaceChildren(h("p", { class: "message bad" }, `unavailable: ${String(read.reason?.message ?? read.reason)}`));
      };
      if (stats.status === "fulfilled") this.history.add(now, figuresByCluster(stats.value.stats));
      const windowSeconds = stats.status === "fulfilled" ? stats.value.window_seconds : 0;
      show(stats, this.panels.clusters.body, () => clusters(this.history, now, windowSeconds));
      show(routeList, this.panels.routes.body, routes);
      show(rolloutList, this.panels.rollouts.body, rollouts);
      if (faultList.status === "fulfilled") this.faults.update(faultList.value.faults, now);
      show(diffs, this.panels.mirror.body, mirror);
      if (gpu.status === "fulfilled" && upstreams.status === "fulfilled") {
        this.panels.gauges.body.replaceChildren(gauges(gpu.value, upstreams.value));
      } else {
        show(gpu.status === "rejected" ? gpu : upstreams, this.panels.gauges.body, () => h("p"));
      }
      show(runs, this.panels.loadRuns.body, (r) => loadRuns(r.runs));
      show(events, this.panels.audit.body, (e) => audit(e.events));
      if (reads.every((r) => r.status === "fulfilled")) this.lastGood = now;
      this.showLiveness(now);
    }
    showLiveness(now) {
      const fresh = now - this.lastGood < STALE_MS;
      this.live.className = `live ${fresh ? "ok" : "stale"}`;
      this.live.textContent = this.lastGood === 0 ? "no data" : fresh ? `live · ${clock(this.lastGood)}` : `stale since ${clock(this.lastGood)}`;
    }
  };
  function login(message = "", tone = "bad") {
    const input = h("input", {
      type: "password",
      name: "token",
      id: "token",
      autocomplete: "current-password",
      placeholder: "bearer token",
      required: true
    });
    const note = h("p", { class: `message ${tone}`, role: "alert" }, message);
    const form = h(
      "form",
      { class: "login" },
      h("h1", {}, "sluice console"),
      h("p", { class: "muted" }, `control API at ${location.host}`),
      h("label", { for: "token" }, "Token"),
      input,
      h("button", { type: "submit" }, "Sign in"),
      note,
      h("p", { class: "muted small" }, "Kept in this tab's session storage only. A read token shows everything; stopping a fault needs write.")
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      void signIn(input.value.trim(), note);
    });
    root.replaceChildren(form);
    input.focus();
  }
  async function signIn(value, note) {
    setToken(value);
    try {
      await get("/v1/routes");
    } catch (e) {
      setToken(null);
      note.className = "message bad";
      note.textContent = e instanceof ApiError ? e.message : String(e);
      return;
    }
    start();
  }
  function start() {
    new Console(login).mount();
  }
  if (token() === null) login();
  else start();
})();
