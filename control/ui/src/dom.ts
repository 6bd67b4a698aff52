// Building DOM nodes without innerHTML: every value from the API lands in a
// text node, so a route or fault named like markup stays text.

export type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((e: Event) => void)>;

export function h(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElement {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): SVGElement {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") {
      el.addEventListener(name.replace(/^on/, ""), value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(el: Element, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "number" ? String(child) : child);
  }
}

/// A table with a header row; `rows` empty gives the plain word "none".
export function table(headers: string[], rows: Node[][], className = ""): HTMLElement {
  if (rows.length === 0) return none();
  return h(
    "table",
    { class: className },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => (c instanceof HTMLTableCellElement ? c : h("td", {}, c)))))),
  );
}

export function td(className: string, ...children: (Child | Child[])[]): HTMLTableCellElement {
  return h("td", { class: className }, ...children) as HTMLTableCellElement;
}

export function none(what = "none"): HTMLElement {
  return h("p", { class: "none" }, what);
}

export function badge(text: string, tone: string): HTMLElement {
  return h("span", { class: `badge ${tone}` }, text);
}

/// `12.3`, `0.5`, `1234`: three significant figures, no trailing zeros.
export function num(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (value === 0) return "0";
  const abs = Math.abs(value);
  if (abs >= 10 ** digits) return Math.round(value).toString();
  return Number(value.toPrecision(digits)).toString();
}

export function pct(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return "–";
  return `${num(ratio * 100)}%`;
}

export function clock(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/// `4m 05s`, `59s`, `1h 02m`.
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}
