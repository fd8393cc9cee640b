// status.browser_agent: stagger-agent's status page (--status_address) in
// a real browser: Debian's headless Chromium, driven by puppeteer-core,
// against a real staggerd and a real stagger-agent on loopback, the agent
// fed first attempts and successes on clear/0..19 (stagger_status_seed's
// traffic, through the agent) so that it asks for leases and answers under
// them.
//
// Checks, in order: the coordinator's row (calls up, lease stream UP, an
// incarnation); the agent id shown as text (it holds HTML); lease rows for
// clear/* with an expiry ahead and an allowance; decisions answered under
// a lease counted; the decisions chart draws 4 x 600 points and moves on;
// no console error, page error or failed request. Then failures: a page
// opened with a broken query (?page_size=5000) shows the agent's 400 in a
// banner and still draws the rest; stopping the agent turns the banner to
// "cannot reach stagger-agent" with the last rows still on screen.
//
//   node agent_page_test.js --staggerd BIN --agent BIN --seed BIN
//                           [--chromium BIN]
// STAGGER_AGENT_STATUS_SCREENSHOT=docs/agent-status-page.png also saves a
// screenshot (docs/STATUS_PAGE.md); a normal run writes nothing in the
// source tree. Every wait polls with a generous deadline.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { WAIT_MS, arg, startProcess, stop, textsOf, launchBrowser,
        watchedPage } = require("./browser_util");

const STAGGERD = arg("staggerd");
const AGENT = arg("agent");
const SEED = arg("seed");
const CHROMIUM = arg("chromium", "/usr/bin/chromium");
const SCREENSHOT = process.env.STAGGER_AGENT_STATUS_SCREENSHOT || "";
const AGENT_ID = "node-7 <b>bold</b> & co";

test("stagger-agent's status page in headless Chromium", { timeout: 8 * WAIT_MS }, async (t) => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-agent-status-"));
  const procs = [];
  let browser = null;
  let traffic = null;
  t.after(async () => {
    if (browser) await browser.close().catch(() => {});
    if (traffic) traffic.kill("SIGKILL");
    for (const p of procs.reverse()) await stop(p);
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  const staggerd = startProcess(STAGGERD, "staggerd",
                                ["--address=127.0.0.1:0", "--metrics_address="]);
  procs.push(staggerd);
  const coordinator = "127.0.0.1:" + (await staggerd.ready).grpc;
  const agent = startProcess(AGENT, "agent", [
    "--listen=127.0.0.1:0", "--coordinator=" + coordinator, "--metrics_address=",
    "--status_address=127.0.0.1:0", "--agent_id=" + AGENT_ID,
    // A loaded machine: the coordinator's answers may take longer than 50 ms.
    "--call_deadline=5s"]);
  procs.push(agent);
  const ports = await agent.ready;
  assert.ok(ports.status > 0, "the 'status page on port N' line");
  const base = "http://127.0.0.1:" + ports.status + "/";
  // Through the agent: first attempts and successes on 20 clear endpoints.
  traffic = spawn(SEED, ["127.0.0.1:" + ports.grpc, "traffic", "300"], { stdio: "inherit" });

  browser = await launchBrowser(CHROMIUM, scratch);
  const problems = [];
  const page = await watchedPage(browser, problems);
  await page.goto(base, { waitUntil: "load" });

  await t.test("the coordinator and its lease stream", async () => {
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll("#replicas tr");
      return rows.length === 1 && rows[0].querySelector("td.stream").textContent === "UP";
    });
    const cells = await textsOf(page, "#replicas tr td");
    assert.equal(cells[0], coordinator);
    assert.equal(cells[1], coordinator);
    assert.equal(cells[2], "up");
    assert.match(cells[5], /^\d+$/, "an incarnation");
    assert.equal(await page.$eval("#coordinator", (e) => e.textContent), coordinator);
    assert.equal(await page.$eval("#leases-on", (e) => e.textContent), "on");
    assert.equal(await page.$eval("#agent-id", (e) => e.textContent), AGENT_ID);
    assert.equal(await page.$$eval("#agent-id *", (els) => els.length), 0,
                 "the agent id's HTML became elements");
  });

  await t.test("the leases held, and decisions answered under them", async () => {
    await page.waitForFunction(() => {
      const keys = [...document.querySelectorAll("#leases tr td:first-child")];
      return keys.length > 0 && keys.every((k) => k.textContent.startsWith("clear/"));
    });
    const rows = await page.$$eval("#leases tr", (trs) => trs.map(
        (tr) => [...tr.cells].map((c) => c.textContent)));
    const keys = rows.map((r) => r[0]);
    assert.deepEqual(keys, [...keys].sort(), "in endpoint order");
    for (const r of rows) {
      // One host:port target: the replica is named by it (client/members.h).
      assert.equal(r[1], coordinator, "the granting replica's name: " + r);
      assert.match(r[2], /^\d+$/, "epoch: " + r);
      assert.match(r[3], /\(in \d+[sm]\)$/, "expires ahead: " + r);
      assert.match(r[4], /^\d+ of \d+$/, "allowance: " + r);
    }
    assert.match(await page.$eval("#leases-info", (e) => e.textContent),
                 /^\d+ live lease\(s\); \d+ shown \(pages of 100\)\./);
    await page.waitForFunction(() => {
      const total = document.querySelector("#decision-counts tr[data-source=lease] td.total");
      return total !== null && Number(total.textContent) > 0;
    });
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
    if (SCREENSHOT) await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  await t.test("no console errors while the agent answers", async () => {
    assert.deepEqual(problems, []);
    assert.equal(await page.$eval("#banner", (b) => b.hidden), true);
  });

  await t.test("a broken query shows the agent's message, not a blank page", async () => {
    const broken = await browser.newPage();
    broken.setDefaultTimeout(WAIT_MS);
    await broken.goto(base + "?page_size=5000", { waitUntil: "load" });
    await broken.waitForFunction(() => {
      const b = document.getElementById("banner");
      return !b.hidden && b.textContent.includes(
          "agent: HTTP 400: query: page_size: want an integer in [1, 1000], got \"5000\"");
    });
    await broken.waitForFunction(() =>
        document.getElementById("decisions-chart").dataset.points === "2400");
    await broken.close();
  });

  await t.test("stopping the agent turns the banner on, the rows stay", async () => {
    traffic.kill("SIGKILL");
    traffic = null;
    await stop(agent);
    await page.waitForFunction(() => {
      const b = document.getElementById("banner");
      return !b.hidden && b.textContent.includes("cannot reach stagger-agent");
    });
    assert.ok(await page.$$eval("#leases tr", (r) => r.length) > 0, "the last rows stay");
  });
});
