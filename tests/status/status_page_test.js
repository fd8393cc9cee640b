// status.browser: staggerd's status page (--status_address) in a real
// browser. Debian's headless Chromium, driven by puppeteer-core (pinned in
// package-lock.json), against real staggerd processes on loopback:
//
//   stagger-1  a peer, serving gRPC health;
//   stagger-0  the replica under test (Retry-After windows up to 10 min:
//              a config file), --replicas stagger-0,stagger-1,
//              stagger-2, --status_peers naming stagger-1 only; seeded by
//              stagger_status_seed with an OPEN breaker (Admin
//              ForceBreaker), a Retry-After window (a RATE_LIMITED report
//              with retry_after), a pause (Admin Pause), a pause set
//              ahead of traffic on an untracked key, a prefix pause and a
//              disabled endpoint (Admin Disable), and fed decisions for
//              the chart while the test runs.
//
// Checks, in order: the replicas (SERVING, SERVING, UNKNOWN); the
// not-clear rows (exactly the four seeded tracked keys, the disabled one
// with its disable, shown as stored: their HTML stays text); every pause
// (the pre-emptive one and the prefix pause as rows of their own) and
// the disabled endpoint in their tables; the live events (the trip, the
// pauses and the disable, numbered); the decisions chart draws 4 x 600 points and moves on
// to a later second with more decisions; the search box and a row's link
// open the detail view (GetEndpoint's fields, the per-endpoint chart
// sampling); an untracked key shows a 404 in the detail; no console error
// or page error so far. Then failures: a page opened with a broken query
// (?page_size=5000) shows the server's 400 message in a banner and still
// draws the rest; stopping staggerd turns the banner to "cannot reach
// staggerd" with the last rows still on screen.
//
//   node status_page_test.js --staggerd BIN --seed BIN [--chromium BIN]
// STAGGER_STATUS_SCREENSHOT=docs/status-page.png also saves a screenshot
// (docs/STATUS_PAGE.md); a normal run writes nothing in the source tree.
// Every wait polls with a generous deadline; nothing sleeps and assumes.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { spawn, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { WAIT_MS, arg, startProcess, stop, textsOf, launchBrowser,
        watchedPage } = require("./browser_util");

const STAGGERD = arg("staggerd");
const SEED = arg("seed");
const CHROMIUM = arg("chromium", "/usr/bin/chromium");
const SCREENSHOT = process.env.STAGGER_STATUS_SCREENSHOT || "";

function startStaggerd(name, args) { return startProcess(STAGGERD, name, args); }

test("staggerd's status page in headless Chromium", { timeout: 8 * WAIT_MS }, async (t) => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-status-"));
  const procs = [];
  let browser = null;
  let traffic = null;
  t.after(async () => {
    if (browser) await browser.close().catch(() => {});
    if (traffic) traffic.kill("SIGKILL");
    for (const p of procs) await stop(p);
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  // Retry-After windows as long as the seed's (10 min): the default clamps
  // them to the backoff cap (30 s), shorter than a slow run of this test.
  const config = path.join(scratch, "config.textproto");
  fs.writeFileSync(config, "default_policy { backoff { retry_after_max { seconds: 600 } } }\n");
  const common = ["--metrics_address=", "--replicas=stagger-0,stagger-1,stagger-2",
                  "--config=" + config];
  const peer = startStaggerd("stagger-1", ["--address=127.0.0.1:0", ...common,
                                           "--replica_name=stagger-1"]);
  procs.push(peer);
  const peerPorts = await peer.ready;
  const server = startStaggerd("stagger-0", [
    "--address=127.0.0.1:0", ...common, "--replica_name=stagger-0",
    "--status_address=127.0.0.1:0",
    "--status_peers=stagger-1=127.0.0.1:" + peerPorts.grpc]);
  procs.push(server);
  const ports = await server.ready;
  assert.ok(ports.status > 0, "the 'status page on port N' line");
  const grpcAddress = "127.0.0.1:" + ports.grpc;
  const base = "http://127.0.0.1:" + ports.status + "/";

  const keys = execFileSync(SEED, [grpcAddress, "seed"], { encoding: "utf8", timeout: WAIT_MS })
      .trim().split("\n");
  assert.equal(keys.length, 6);
  const [openKey, retryAfterKey, pausedKey, aheadKey, prefix, disabledKey] = keys;
  traffic = spawn(SEED, [grpcAddress, "traffic", "300"], { stdio: "inherit" });

  browser = await launchBrowser(CHROMIUM, scratch);
  const problems = [];
  const page = await watchedPage(browser, problems);
  await page.goto(base, { waitUntil: "load" });

  await t.test("replicas and their health", async () => {
    await page.waitForFunction(() => {
      const cells = [...document.querySelectorAll("#replicas tr td:nth-child(2)")];
      return cells.map((c) => c.textContent).join(",") === "SERVING,SERVING,UNKNOWN";
    });
    assert.deepEqual(await textsOf(page, "#replicas tr td:first-child"),
                     ["stagger-0", "stagger-1", "stagger-2"]);
    assert.match(await page.$eval("#replica", (e) => e.textContent), /stagger-0/);
  });

  await t.test("the not-clear rows, keys shown as stored", async () => {
    await page.waitForFunction(() => document.querySelectorAll("#endpoints tr").length === 4);
    assert.deepEqual(await textsOf(page, "#endpoints tr td:first-child"),
                     [openKey, retryAfterKey, pausedKey, disabledKey].sort());
    assert.equal(await page.$$eval("#endpoints b, #endpoints i", (els) => els.length), 0,
                 "a key's HTML became elements");
    const rows = await page.$$eval("#endpoints tr", (trs) => Object.fromEntries(trs.map(
        (tr) => [tr.cells[0].textContent, [...tr.cells].map((c) => c.textContent)])));
    assert.match(rows[openKey][1], /^OPEN, half-opens /);
    assert.match(rows[retryAfterKey][2], /\(in \d+[sm]\)$/);
    assert.match(rows[pausedKey][3], /by .*: deploy 42$/);
    assert.match(rows[disabledKey][4], /^OPERATOR since .*: gone 410$/);
    assert.match(await page.$eval("#endpoints-info", (e) => e.textContent),
                 /Showing 4 \(not_clear, page size 100\); 0 more on later pages; scanned 24 of 24 tracked\./);
  });

  await t.test("every pause, one set ahead of traffic and a prefix's, and the disabled", async () => {
    await page.waitForFunction(() => document.querySelectorAll("#pauses tr").length === 3);
    const pauses = await page.$$eval("#pauses tr", (trs) => trs.map(
        (tr) => [...tr.cells].map((c) => c.textContent)));
    const byTarget = Object.fromEntries(pauses.map((r) => [r[0], r]));
    assert.deepEqual(Object.keys(byTarget).sort(), [aheadKey, pausedKey, prefix + "*"].sort());
    assert.equal(byTarget[aheadKey][1], "endpoint");
    assert.equal(byTarget[aheadKey][3], "their maintenance");
    assert.equal(byTarget[prefix + "*"][1], "prefix");
    assert.equal(byTarget[prefix + "*"][3], "partner migration");
    assert.match(await page.$eval("#pauses-info", (e) => e.textContent), /^3 in force\.$/);
    await page.waitForFunction(() => document.querySelectorAll("#disabled tr").length === 1);
    const disabled = await page.$$eval("#disabled tr td", (tds) => tds.map((c) => c.textContent));
    assert.equal(disabled[0], disabledKey);
    assert.equal(disabled[1], "OPERATOR");
    assert.equal(disabled[3], "gone 410");
    assert.equal(await page.$$eval("#pauses u, #pauses s, #disabled em", (e) => e.length), 0,
                 "a key's HTML became elements");
  });

  await t.test("the live events, numbered, newest first", async () => {
    await page.waitForFunction((key) => [...document.querySelectorAll("#events tr")]
        .some((tr) => tr.cells[2].textContent === "DISABLED" && tr.cells[3].textContent === key),
    {}, disabledKey);
    const events = await page.$$eval("#events tr", (trs) => trs.map(
        (tr) => [Number(tr.cells[0].textContent), tr.cells[2].textContent, tr.cells[3].textContent]));
    const seqs = events.map((e) => e[0]);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => b - a), "newest first");
    for (let i = 1; i < seqs.length; ++i) assert.equal(seqs[i - 1] - seqs[i], 1, "contiguous");
    const has = (kind, target) => events.some((e) => e[1] === kind && e[2] === target);
    assert.ok(has("BREAKER_OPENED", openKey), JSON.stringify(events));
    assert.ok(has("RETRY_AFTER_SET", retryAfterKey), JSON.stringify(events));
    assert.ok(has("PAUSED", aheadKey), JSON.stringify(events));
    assert.ok(has("PAUSED", prefix + "*"), JSON.stringify(events));
    assert.ok(has("DISABLED", disabledKey), JSON.stringify(events));
    assert.match(await page.$eval("#events-info", (e) => e.textContent), /^Replica stagger-0, events 1\.\.\d+ held\.$/);
  });

  await t.test("the decisions chart draws and moves on", async () => {
    await page.waitForFunction(() => {
      const svg = document.getElementById("decisions-chart");
      return svg.querySelectorAll("polyline").length === 4 &&
             svg.dataset.points === "2400" && Number(svg.dataset.total) > 0;
    });
    const before = await page.$eval("#decisions-chart", (s) => ({
      second: Number(s.dataset.lastSecond), total: Number(s.dataset.total) }));
    await page.waitForFunction((b) => {
      const s = document.getElementById("decisions-chart").dataset;
      return Number(s.lastSecond) > b.second && Number(s.total) > b.total;
    }, { timeout: WAIT_MS }, before);
    const points = await page.$eval("#decisions-chart polyline.series-DONE",
                                    (p) => p.getAttribute("points").split(" ").length);
    assert.equal(points, 600);
  });

  await t.test("the search box shows GetEndpoint's fields and samples them", async () => {
    await page.type("#search-key", openKey);
    await page.keyboard.press("Enter");
    await page.waitForFunction((key) => !document.getElementById("detail").hidden &&
        document.getElementById("detail-key").textContent === key, {}, openKey);
    await page.waitForFunction(() => {
      const dts = [...document.querySelectorAll("#detail-fields dt")];
      const i = dts.findIndex((d) => d.textContent === "breaker_state");
      return i >= 0 && dts[i].nextElementSibling.textContent === "OPEN";
    });
    await page.waitForFunction(() =>
        Number(document.getElementById("endpoint-chart").dataset.samples) >= 3);
    assert.equal(await page.$$eval("#endpoint-chart polyline", (p) => p.length), 2);
    if (SCREENSHOT) await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  await t.test("a row's link opens its detail; an unknown key says 404", async () => {
    const links = await page.$$("#endpoints tr td:first-child a");
    const texts = await textsOf(page, "#endpoints tr td:first-child a");
    await links[texts.indexOf(pausedKey)].click();
    await page.waitForFunction((key) =>
        document.getElementById("detail-key").textContent === key &&
        [...document.querySelectorAll("#detail-fields dt")]
            .some((d) => d.textContent === "pause.reason"), {}, pausedKey);
    await page.$eval("#search-key", (e) => { e.value = ""; });
    await page.type("#search-key", "nobody/<script>");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => {
      const e = document.getElementById("detail-error");
      return !e.hidden && /HTTP 404: endpoint: not tracked/.test(e.textContent);
    });
    assert.equal(await page.$$eval("#detail script", (s) => s.length), 0);
  });

  await t.test("no console errors while staggerd answers", async () => {
    assert.deepEqual(problems.filter((p) => !p.includes("404")), []);
    // The one 404 is the unknown key's, which the page shows as an answer.
    assert.ok(problems.length <= 1, problems.join("\n"));
    assert.equal(await page.$eval("#banner", (b) => b.hidden), true);
  });

  await t.test("a broken query shows the server's message, not a blank page", async () => {
    const broken = await browser.newPage();
    broken.setDefaultTimeout(WAIT_MS);
    await broken.goto(base + "?page_size=5000", { waitUntil: "load" });
    await broken.waitForFunction(() => {
      const b = document.getElementById("banner");
      return !b.hidden && b.textContent.includes(
          "endpoints: HTTP 400: query: page_size: want an integer in [1, 1000], got \"5000\"");
    });
    await broken.waitForFunction(() => document.querySelectorAll("#replicas tr").length === 3 &&
        document.getElementById("decisions-chart").dataset.points === "2400");
    await broken.close();
  });

  await t.test("stopping staggerd turns the banner on, the rows stay", async () => {
    traffic.kill("SIGKILL");
    traffic = null;
    await stop(server);
    await page.waitForFunction(() => {
      const b = document.getElementById("banner");
      return !b.hidden && b.textContent.includes("cannot reach staggerd");
    });
    assert.equal(await page.$$eval("#endpoints tr", (r) => r.length), 4);
  });
});
