// Drives the sluice web console in Debian's Chromium with playwright-core, for
// tests/e2e/console.rs. Reads CONSOLE_URL, ADMIN_TOKEN, READ_TOKEN, SHOTS (a folder for
// the screenshots) and CHROMIUM. Talks to the test on stdout, one line each:
// `SLOW_CANARY` when the rollout has been seen mid-step (the test then slows the canary
// down), and `RESULT {json}` at the end with every assertion that held. Any failed
// assertion exits 1 with the reason on stderr.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

const env = process.env;
const base = env.CONSOLE_URL;
const shots = env.SHOTS;
const held = [];
let page = null;

function check(condition, what) {
  if (!condition) throw new Error(`assertion failed: ${what}`);
  held.push(what);
}

function say(line) {
  process.stdout.write(`${line}\n`);
}

async function apiFaults() {
  const r = await fetch(`${base}/v1/faults`, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } });
  return (await r.json()).faults.map((f) => f.id);
}

async function signIn(page, token) {
  await page.fill("#token", token);
  await page.click("form.login button[type=submit]");
}

async function main() {
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  page = await context.newPage();
  page.setDefaultTimeout(30000);
  const errors = [];
  const foreign = [];
  page.on("console", (m) => {
    // The refused calls the test makes on purpose (a wrong token, a read token's stop).
    if (m.type() === "error" && !/status of 40[13]/.test(m.text())) errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("request", (r) => {
    if (new URL(r.url()).host !== new URL(base).host) foreign.push(r.url());
  });

  const answer = await page.goto(`${base}/ui`);
  check(answer.status() === 200, "GET /ui answers 200 without a token");
  const policy = answer.headers()["content-security-policy"] || "";
  check(policy.includes("default-src 'self'"), `the page is served with CSP default-src 'self' (${policy})`);
  await page.waitForSelector("form.login #token");
  await page.screenshot({ path: path.join(shots, "console-login.png") });

  await signIn(page, "not-a-token");
  await page.waitForSelector("form.login .message.bad >> text=missing or wrong bearer token");
  check(true, "a wrong token stays on the login form with the 401's message");

  // A read token sees everything; its stop is refused with the API's 403, said on the page.
  await signIn(page, env.READ_TOKEN);
  const chaos = page.locator('tr[data-fault="chaos-503"]');
  await chaos.waitFor();
  await chaos.locator("button.stop").click();
  const refused = await page.locator("#faults .message.bad").textContent({ timeout: 10000 });
  check(/needs scope write/.test(refused), `a read token's stop shows the 403: "${refused}"`);
  check((await apiFaults()).includes("chaos-503"), "the refused stop left the fault running");
  await page.click("header.top button.ghost");
  await page.waitForSelector("form.login");
  check((await page.evaluate(() => sessionStorage.getItem("sluice.token"))) === null, "signing out forgets the token");

  await signIn(page, env.ADMIN_TOKEN);
  const card = page.locator('[data-rollout="chat-v2"]');
  await card.waitFor();
  check(
    (await page.evaluate(() => sessionStorage.getItem("sluice.token"))) === env.ADMIN_TOKEN,
    "the token is kept in session storage",
  );
  // From here on the page must change in place: a reload or navigation would be seen
  // here, and would also drop the marker set on this document.
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations += 1;
  });
  await page.evaluate(() => {
    window.consoleTestMarker = "this document";
  });

  await page.waitForSelector('[data-rollout="chat-v2"][data-state="progressing"]');
  const step = await card.locator(".step").textContent();
  check(/^step [1-9]\d*\/3$/.test(step), `the rollout shows its step mid-way: "${step}"`);
  // Both versions have traffic and ten seconds of history drawn.
  await page.waitForFunction(
    () => document.querySelectorAll("table.clusters tbody tr").length === 2,
  );
  await page.waitForTimeout(10000);
  const lines = await page.locator("table.clusters svg.spark path.line").count();
  check(lines >= 8, `the clusters' sparklines are drawn (${lines} lines)`);
  const weights = await page.locator('#routes .weight[data-cluster="canary"] b').textContent();
  check(weights !== "0%", `the route shows the canary's weight (${weights})`);
  await page.screenshot({ path: path.join(shots, "console-rollout.png"), fullPage: true });

  say("SLOW_CANARY");
  await page.waitForSelector('[data-rollout="chat-v2"][data-state="rolled_back"]', { timeout: 90000 });
  const reason = await card.locator(".reason").textContent();
  check(/ttft_p95/.test(reason), `the rollback reason names the gate: "${reason}"`);
  check((await card.locator(".weight").textContent()) === "0%", "the rolled back canary shows weight 0%");
  check((await page.locator('#routes .weight[data-cluster="canary"] b').textContent()) === "0%", "the route's canary weight is back to 0%");
  check(
    navigations === 0 && (await page.evaluate(() => window.consoleTestMarker)) === "this document",
    "the rollback appeared without a reload or navigation",
  );
  await page.screenshot({ path: path.join(shots, "console-rollback.png"), fullPage: true });

  await chaos.locator("button.stop").click();
  await chaos.waitFor({ state: "detached" });
  const stopped = await page.locator("#faults .message.good").textContent();
  check(stopped === "stopped chaos-503", `the stop is confirmed on the page: "${stopped}"`);
  const left = await apiFaults();
  check(!left.includes("chaos-503") && left.includes("slow-probe"), `GET /v1/faults no longer has it: ${left}`);
  // A later poll does not bring it back.
  await page.waitForTimeout(2500);
  check((await chaos.count()) === 0, "the stopped fault stays off the page");
  check((await page.locator('tr[data-fault="slow-probe"]').count()) === 1, "the other fault is still listed");
  await page.locator("#faults").screenshot({ path: path.join(shots, "console-faults.png") });

  check(errors.length === 0, `no script error or console error: ${errors.join(" | ")}`);
  check(foreign.length === 0, `every request went to sluice itself: ${foreign.join(" ")}`);
  say(`RESULT ${JSON.stringify({ held, navigations })}`);
  await browser.close();
}

main().then(
  () => process.exit(0),
  async (e) => {
    process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
    // What the page showed when it went wrong, beside the other screenshots.
    if (page !== null) await page.screenshot({ path: path.join(shots, "console-failure.png"), fullPage: true }).catch(() => {});
    process.exit(1);
  },
);
