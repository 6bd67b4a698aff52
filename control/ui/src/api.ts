// The control API as the console reads it: every call carries the bearer
// token kept in this tab's session storage (never in local storage: closing
// the tab forgets it), and a 401 anywhere sends the page back to the login.

const TOKEN_KEY = "sluice.token";

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/// A refused call: the status and the API's own `error` text.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function call<T>(method: string, path: string): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  const t = token();
  if (t !== null) headers.authorization = `Bearer ${t}`;
  const response = await fetch(path, { method, headers, cache: "no-store" });
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text === "" ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = (body as { error?: unknown } | null)?.error;
    throw new ApiError(response.status, typeof error === "string" ? error : `${method} ${path}: ${response.status}`);
  }
  return body as T;
}

export const get = <T>(path: string) => call<T>("GET", path);

export interface Latency {
  p50: number;
  p95: number;
  p99: number;
}

export interface StatsRow {
  route: string;
  cluster: string;
  version: string;
  requests: number;
  rps: number;
  errors: number;
  error_rate: number;
  latency_ms: Latency;
  ttft_ms?: Latency | null;
  gap_ms?: Latency | null;
  tpot_ms?: Latency | null;
  output_tokens: number;
  output_tokens_per_second: number;
}

export interface Stats {
  window_seconds: number;
  dropped_samples: number;
  stats: StatsRow[];
}

export interface Route {
  name: string;
  listener: string;
  split: Record<string, number>;
  sticky: { header: string } | null;
}

export interface GateReading {
  gate: string;
  value: number | null;
  bound: number;
  unit: string;
  samples: number;
  stable_samples?: number;
  ok: boolean | null;
}

export interface RolloutEvent {
  at_ms: number;
  time_ms: number;
  from: string;
  to: string;
  step: number;
  weight: number;
  reason: string;
  evidence?: GateReading[];
}

export interface Rollout {
  name: string;
  route: string;
  stable: string;
  canary: string;
  state: string;
  step: number;
  steps: number[];
  weight: number;
  breaches?: number;
  gates?: Record<string, GateReading>;
  events?: RolloutEvent[];
}

export interface Fault {
  id: string;
  kind: string;
  state: string;
  injected: number;
  active_requests?: number;
  time_left_ms: number;
  percent?: number;
  match?: { route?: string; cluster?: string; listener?: string; model?: string };
}

export interface DiffLeg {
  cluster: string;
  status: number;
  latency_ms: number;
}

export interface Diff {
  seq: number;
  time_ms: number;
  route: string;
  path: string;
  copy: number;
  kinds: string[];
  similarity?: number;
  latency_ratio?: number;
  primary: DiffLeg;
  shadow: DiffLeg;
}

export interface MirrorDiffs {
  capacity: number;
  total: number;
  diffs: Diff[];
}

export interface GpuDevice {
  index: number;
  name?: string;
  memory_used_bytes?: number;
  memory_total_bytes?: number;
  utilization_gpu_percent?: number;
  temperature_celsius?: number;
  power_watts?: number;
  power_limit_watts?: number;
}

export interface Gpu {
  available: boolean;
  reason?: string;
  devices: GpuDevice[];
}

export interface UpstreamLoad {
  running?: number | null;
  waiting?: number | null;
  kv_cache_usage?: number | null;
  endpoints_up: number;
}

export interface Upstreams {
  clusters: { cluster: string; load: UpstreamLoad; endpoints: { endpoint: string; up: boolean; error?: string }[] }[];
}

export interface LoadRun {
  run_id: string;
  scenario: string;
  state: string;
  shard: string;
  stage: number | null;
  stages: number;
  offered_rate: number | null;
  achieved_rate: number;
  sent: number;
  done: number;
  failed: number;
  ttft_p95_ms: number | null;
  error_rate: number | null;
  passed: boolean;
  elapsed_s: number;
  duration_s: number;
}

export interface AuditEvent {
  seq: number;
  time_ms: number;
  source: string;
  action: string;
  result: string;
  token?: string;
}
