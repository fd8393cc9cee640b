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
//              with retry_after) and a pause (Admin Pause), and fed
//              decisions for the chart while the test runs.
//
// Checks, in order: the replicas (SERVING, SERVING, UNKNOWN); the
// not-clear rows (exactly the three seeded keys, shown as stored: their
// HTML stays text); the decisions chart draws 4 x 600 points and moves on
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
  assert.equal(keys.length, 3);
  const [openKey, retryAfterKey, pausedKey] = keys;
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
    await page.waitForFunction(() => document.querySelectorAll("#endpoints tr").length === 3);
    assert.deepEqual(await textsOf(page, "#endpoints tr td:first-child"),
                     [openKey, retryAfterKey, pausedKey].sort());
    assert.equal(await page.$$eval("#endpoints b, #endpoints i", (els) => els.length), 0,
                 "a key's HTML became elements");
    const rows = await page.$$eval("#endpoints tr", (trs) => Object.fromEntries(trs.map(
        (tr) => [tr.cells[0].textContent, [...tr.cells].map((c) => c.textContent)])));
    assert.match(rows[openKey][1], /^OPEN, half-opens /);
    assert.match(rows[retryAfterKey][2], /\(in \d+[sm]\)$/);
    assert.match(rows[pausedKey][3], /by .*: deploy 42$/);
    assert.match(await page.$eval("#endpoints-info", (e) => e.textContent),
                 /Showing 3 \(not_clear, page size 100\); 0 more on later pages; scanned 23 of 23 tracked\./);
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
    assert.equal(await page.$$eval("#endpoints tr", (r) => r.length), 3);
  });
});
