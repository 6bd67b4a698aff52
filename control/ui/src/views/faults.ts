// Fault experiments: their time left counting down between polls, and a
// stop button (`DELETE /v1/faults/{id}`, scope write). Rows are kept by id
// and updated in place, so a click never lands on a row being replaced.

import { ApiError, call, type Fault } from "../api";
import { badge, duration, h, none } from "../dom";

const FAULT_TONES: Record<string, string> = { active: "warn", halted: "bad", expired: "idle" };

interface Row {
  el: HTMLElement;
  state: HTMLElement;
  injected: HTMLElement;
  left: HTMLElement;
  /// When the experiment ends, on this page's clock.
  endsAt: number;
}

function target(f: Fault): string {
  const m = f.match ?? {};
  const parts = Object.entries(m)
    .filter(([, v]) => typeof v === "string")
    .map(([k, v]) => `${k} ${v}`);
  return parts.length === 0 ? "all traffic" : parts.join(", ");
}

export class FaultsView {
  readonly el = h("div", { class: "faults" });
  private readonly message = h("p", { class: "message", role: "status" });
  private readonly body = h("tbody");
  private readonly table = h(
    "table",
    { class: "faults" },
    h("thead", {}, h("tr", {}, ["id", "action", "match", "state", "injected", "time left", ""].map((x) => h("th", {}, x)))),
    this.body,
  );
  private readonly empty = none();
  private rows = new Map<string, Row>();

  constructor(private readonly onChange: () => void) {
    this.el.append(this.message, this.empty);
  }

  update(faults: Fault[], now: number): void {
    const seen = new Set<string>();
    for (const f of faults) {
      seen.add(f.id);
      let row = this.rows.get(f.id);
      if (row === undefined) {
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
  tick(now: number): void {
    for (const row of this.rows.values()) row.left.textContent = duration(row.endsAt - now);
  }

  private row(f: Fault): Row {
    const state = h("td");
    const injected = h("td", { class: "num" });
    const left = h("td", { class: "num countdown" });
    const stop = h("button", { class: "stop", type: "button", title: `DELETE /v1/faults/${f.id}` }, "stop");
    stop.addEventListener("click", () => void this.stop(f.id, stop as HTMLButtonElement));
    const el = h(
      "tr",
      { "data-fault": f.id },
      h("td", { class: "name" }, f.id),
      h("td", {}, f.kind, h("div", { class: "muted" }, `${f.percent ?? 100}% of requests`)),
      h("td", { class: "muted" }, target(f)),
      state,
      injected,
      left,
      h("td", {}, stop),
    );
    return { el, state, injected, left, endsAt: 0 };
  }

  private async stop(id: string, button: HTMLButtonElement): Promise<void> {
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
      // A read-only token: the API's own words, which name the scope needed.
      const text = e instanceof ApiError ? `cannot stop ${id}: ${e.message}` : `cannot stop ${id}: ${String(e)}`;
      this.say(text, "bad");
      if (e instanceof ApiError && e.status === 401) this.onChange();
    }
  }

  private say(text: string, tone: string): void {
    this.message.className = `message ${tone}`;
    this.message.textContent = text;
  }
}
