// The console: a login form that keeps the token in session storage, then
// every second one round of reads of the control API, drawn into fixed
// panels. Nothing here reloads the page: the state changes in place.

import { ApiError, get, setToken, token } from "./api";
import type { AuditEvent, Fault, Gpu, LoadRun, MirrorDiffs, Rollout, Route, Stats, Upstreams } from "./api";
import { clock, h } from "./dom";
import { History, figuresByCluster } from "./series";
import { clusters, routes } from "./views/traffic";
import { rollouts } from "./views/rollouts";
import { FaultsView } from "./views/faults";
import { audit, gauges, loadRuns, mirror } from "./views/others";

const POLL_MS = 1000;
/// Past this without a good round, the header says the figures are stale.
const STALE_MS = 3500;

const root = document.getElementById("app") as HTMLElement;

function panel(title: string, id: string, className = ""): { el: HTMLElement; body: HTMLElement } {
  const body = h("div", { class: "panel-body" }, h("p", { class: "none" }, "loading…"));
  const el = h("section", { class: `panel ${className}`, id }, h("h2", {}, title), body);
  return { el, body };
}

class Console {
  private readonly history = new History();
  private readonly faults = new FaultsView(() => void this.poll());
  private readonly live = h("span", { class: "live stale" }, "connecting");
  // In the grid's order: what changes under an operator's hands first.
  private readonly panels = {
    routes: panel("Routes & weights", "routes"),
    faults: panel("Fault experiments", "faults"),
    gauges: panel("GPU & upstreams", "gauges"),
    clusters: panel("Clusters", "clusters", "wide"),
    rollouts: panel("Rollouts", "rollouts", "wide"),
    mirror: panel("Mirror diffs", "mirror"),
    audit: panel("Changes", "audit", "double"),
    loadRuns: panel("Load runs", "load-runs", "wide"),
  };
  private lastGood = 0;
  private timer = 0;
  private polling = false;
  /// Signed out: a round still in flight draws nothing and signs out no one.
  private stopped = false;

  constructor(private readonly onLoggedOut: (message: string, tone: string) => void) {}

  mount(): void {
    const logout = h("button", { type: "button", class: "ghost" }, "sign out");
    logout.addEventListener("click", () => this.stop("signed out", "muted"));
    const header = h(
      "header",
      { class: "top" },
      h("h1", {}, "sluice"),
      h("span", { class: "instance", title: "the control API this page reads" }, location.host),
      this.live,
      h("span", { class: "spacer" }),
      logout,
    );
    this.panels.faults.body.replaceChildren(this.faults.el);
    root.replaceChildren(header, h("main", { class: "grid" }, Object.values(this.panels).map((p) => p.el)));
    void this.poll();
    this.timer = window.setInterval(() => {
      void this.poll();
    }, POLL_MS);
  }

  private stop(message: string, tone: string): void {
    if (this.stopped) return;
    this.stopped = true;
    window.clearInterval(this.timer);
    setToken(null);
    this.onLoggedOut(message, tone);
  }

  /// One round: every read at once; a 401 on any signs out, another
  /// failure shows in its own panel only.
  async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      await this.round();
    } finally {
      this.polling = false;
    }
  }

  private async round(): Promise<void> {
    const reads = await Promise.allSettled([
      get<Stats>("/v1/stats"),
      get<Route[]>("/v1/routes"),
      get<Rollout[]>("/v1/rollouts").then((list) =>
        // The list leaves out each rollout's events: read them one by one.
        Promise.all(list.map((r) => get<Rollout>(`/v1/rollouts/${encodeURIComponent(r.name)}`))),
      ),
      get<{ faults: Fault[] }>("/v1/faults"),
      get<MirrorDiffs>("/v1/mirror/diffs"),
      get<Gpu>("/v1/gpu"),
      get<Upstreams>("/v1/upstreams"),
      get<{ runs: LoadRun[] }>("/v1/load-runs"),
      get<{ events: AuditEvent[] }>("/v1/events"),
    ]);
    if (this.stopped) return;
    const unauthorized = reads.find((r) => r.status === "rejected" && r.reason instanceof ApiError && r.reason.status === 401);
    if (unauthorized !== undefined && unauthorized.status === "rejected") {
      this.stop(`signed out: ${(unauthorized.reason as ApiError).message}`, "bad");
      return;
    }
    const now = Date.now();
    const [stats, routeList, rolloutList, faultList, diffs, gpu, upstreams, runs, events] = reads;
    const show = <T>(read: PromiseSettledResult<T>, into: HTMLElement, draw: (value: T) => Node) => {
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

  private showLiveness(now: number): void {
    const fresh = now - this.lastGood < STALE_MS;
    this.live.className = `live ${fresh ? "ok" : "stale"}`;
    this.live.textContent = this.lastGood === 0 ? "no data" : fresh ? `live · ${clock(this.lastGood)}` : `stale since ${clock(this.lastGood)}`;
  }
}

function login(message = "", tone = "bad"): void {
  const input = h("input", {
    type: "password",
    name: "token",
    id: "token",
    autocomplete: "current-password",
    placeholder: "bearer token",
    required: true,
  }) as HTMLInputElement;
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
    h("p", { class: "muted small" }, "Kept in this tab's session storage only. A read token shows everything; stopping a fault needs write."),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void signIn(input.value.trim(), note);
  });
  root.replaceChildren(form);
  input.focus();
}

async function signIn(value: string, note: HTMLElement): Promise<void> {
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

function start(): void {
  new Console(login).mount();
}

if (token() === null) login();
else start();
