// Rollouts: state, step and weight, each gate against its bound, and the
// history of transitions with their reasons.

import { badge, clock, h, none, num, table, td } from "../dom";
import type { GateReading, Rollout } from "../api";

const STATE_TONES: Record<string, string> = {
  pending: "idle",
  progressing: "info",
  paused: "warn",
  promoted: "good",
  rolled_back: "bad",
  aborted: "idle",
};

export function stateBadge(state: string): HTMLElement {
  return badge(state, STATE_TONES[state] ?? "idle");
}

function reading(value: number | null, unit: string): string {
  if (value === null) return "–";
  if (unit === "usd") return `$${num(value)}`;
  if (unit === "%") return `${num(value)}%`;
  if (unit === "ms") return `${num(value)} ms`;
  return num(value);
}

function gateRow(g: GateReading): Node[] {
  const verdict = g.ok === null ? ["not judged", "idle"] : g.ok ? ["ok", "good"] : ["breached", "bad"];
  return [
    td("name", g.gate),
    td(`num ${g.ok === false ? "bad" : ""}`, reading(g.value, g.unit)),
    // `*_min` gates hold a floor; the others a ceiling.
    td("num muted", `${g.gate.endsWith("_min") ? "≥" : "≤"} ${reading(g.bound, g.unit)}`),
    td("num muted", String(g.samples)),
    td("", badge(verdict[0], verdict[1])),
  ];
}

/// The weight bar: the canary's share filled, a tick at each step.
function progress(r: Rollout): HTMLElement {
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

function card(r: Rollout): HTMLElement {
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
        h("span", { class: "muted" }, ` route ${r.route}: ${r.stable} → ${r.canary}`),
      ),
      h(
        "div",
        { class: "step-line" },
        h("span", { class: "step" }, `step ${r.step}/${r.steps.length}`),
        h("span", {}, ` canary weight `),
        h("b", { class: "weight" }, `${r.weight}%`),
        h("span", { class: "muted" }, ` · steps ${r.steps.join(", ")}%`),
        r.breaches ? h("span", { class: "bad" }, ` · ${r.breaches} breach${r.breaches === 1 ? "" : "es"} in a row`) : null,
      ),
      progress(r),
      r.state === "rolled_back" && last
        ? h("div", { class: "callout bad reason" }, h("b", {}, "rolled back: "), last.reason)
        : null,
      gates.length === 0 ? none("no gate read yet") : table(["gate", "canary", "bound", "samples", ""], gates.map(gateRow), "gates"),
    ),
    h(
      "ol",
      { class: "timeline" },
      [...events].reverse().slice(0, 12).map((e) =>
        h(
          "li",
          { class: e.to === "rolled_back" ? "bad" : "" },
          h("time", {}, clock(e.time_ms)),
          h("span", { class: "transition" }, `${e.from} → ${e.to}`),
          h("span", { class: "muted" }, ` step ${e.step}, ${e.weight}%`),
          h("div", { class: "event-reason" }, e.reason),
        ),
      ),
    ),
  );
}

export function rollouts(list: Rollout[]): Node {
  if (list.length === 0) return none();
  return h("div", { class: "rollouts" }, list.map(card));
}
