// status.browser_agent: stagger-agent's status page (--status_address) in
// a real browser: Debian's headless Chromium, driven by puppeteer-core,
// against a real staggerd and real stagger-agents on loopback. staggerd is
// seeded first (stagger_status_seed: an OPEN breaker, a Retry-After window
// and a pause, on keys holding HTML), so its not-clear set has 3 entries;
// the agent is fed first attempts and successes on clear/0..19 (the
// seed's traffic, through the agent) so that it answers under its lease.
//
// Checks, in order: the coordinator's row (calls up, stream UP, an
// incarnation, the lease live with its time left, the copy's version and
// 3 entries); the agent id shown as text (it holds HTML); the not-clear
// entries as text, in target order, with why, replica and until, then
// paged by 2 (Next, First); decisions answered under the lease counted;
// the decisions chart draws 4 x 600 points and moves on; no console
// error, page error or failed request. Then: a page opened with a broken
// query (?page_size=5000) shows the agent's 400 in a banner and still
// draws the rest; a second agent naming two members is refused a lease in
// the coordinator's words (they hold its member's HTML name) and shows
// its other member's stream down; stopping staggerd turns the first
// agent's stream DOWN and its lease STREAM_DOWN, its copy's entries still
// shown; stopping the agent turns the banner to "cannot reach
// stagger-agent" with the last rows still on screen.
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

  // Retry-After windows up to 10 min (the seed asks for 10; the default
  // caps it at 30 s), so the seeded entries outlast a slow run. A 2 s
  // probe_timeout: the coordinator's learning period after its start (one
  // ttl, at least the longest probe_timeout) takes 2 s, not 10.
  const config = path.join(scratch, "config.textproto");
  fs.writeFileSync(config, "default_policy { backoff { retry_after_max { seconds: 600 } } " +
                           "breaker { probe_timeout { seconds: 2 } } }\n");
  const staggerd = startProcess(STAGGERD, "staggerd",
                                ["--address=127.0.0.1:0", "--metrics_address=",
                                 "--config=" + config]);
  procs.push(staggerd);
  const coordinator = "127.0.0.1:" + (await staggerd.ready).grpc;
  const keys = (await seed(coordinator)).sort();
  const agent = startAgent("agent", coordinator, AGENT_ID);
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

  await t.test("the coordinator, its lease stream, its lease and its set", async () => {
    await page.waitForFunction(() => {
      const rows = document.querySelectorAll("#replicas tr");
      return rows.length === 1 && rows[0].querySelector("td.stream").textContent === "UP";
    });
    const cells = await textsOf(page, "#replicas tr > td");
    assert.equal(cells[0], coordinator);
    assert.equal(cells[1], coordinator);
    assert.equal(cells[2], "up");
    assert.match(cells[5], /^\d+$/, "an incarnation");
    assert.equal(await page.$eval("#coordinator", (e) => e.textContent), coordinator);
    assert.equal(await page.$eval("#leases-on", (e) => e.textContent), "on");
    assert.equal(await page.$eval("#agent-id", (e) => e.textContent), AGENT_ID);
    assert.equal(await page.$$eval("#agent-id *", (els) => els.length), 0,
                 "the agent id's HTML became elements");
    // Past the coordinator's learning period, the lease lives.
    await page.waitForFunction(() =>
        document.querySelector("#replicas td.lease").dataset.state === "LIVE");
    const lease = await page.$eval("#replicas td.lease", (td) => ({
      word: td.querySelector(".word").textContent, why: td.querySelector(".why").textContent }));
    assert.match(lease.word, /^live, \d+(\.\d)? (ms|s) left$/);
    assert.equal(lease.why, "its keys outside the set are answered here");
    assert.match(await page.$eval("#replicas td.set", (e) => e.textContent),
                 /^v\d+, 3 entries$/, "the copy's version and size");
  });

  await t.test("the not-clear entries, as text, in target order", async () => {
    await page.waitForFunction(() => document.querySelectorAll("#not-clear tr[data-target]").length === 3);
    const rows = await entryRows(page);
    assert.deepEqual(rows.map((r) => r[0]), keys, "the seeded keys, as stored, in order");
    assert.equal(await page.$$eval("#not-clear td *", (els) => els.length), 0,
                 "a key's HTML became elements");
    const byKey = Object.fromEntries(rows.map((r) => [r[0], r]));
    const [openKey, retryAfterKey, pausedKey] = SEEDED;
    assert.deepEqual(byKey[openKey].slice(1, 4), ["endpoint", "BREAKER", coordinator]);
    assert.equal(byKey[openKey][4], "–", "a forced breaker has no until");
    assert.deepEqual(byKey[retryAfterKey].slice(1, 4), ["endpoint", "RETRY_AFTER", coordinator]);
    assert.match(byKey[retryAfterKey][4], /\(in \d+[sm]\)$/);
    assert.deepEqual(byKey[pausedKey].slice(1, 4), ["endpoint", "PAUSED", coordinator]);
    assert.match(byKey[pausedKey][4], /\(in \d+[sm]\)$/);
    assert.equal(await page.$eval("#not-clear-info", (e) => e.textContent),
                 "3 entries; 3 shown (pages of 100).");
  });

  await t.test("the entries paged by target: Next, then First", async () => {
    const paged = await browser.newPage();
    paged.setDefaultTimeout(WAIT_MS);
    await paged.goto(base + "?page_size=2", { waitUntil: "load" });
    await paged.waitForFunction(() => document.querySelectorAll("#not-clear tr[data-target]").length === 2);
    assert.deepEqual((await entryRows(paged)).map((r) => r[0]), keys.slice(0, 2));
    assert.equal(await paged.$eval("#not-clear-info", (e) => e.textContent),
                 "3 entries; 2 shown (pages of 2), 1 more on the next pages.");
    assert.equal(await paged.$eval("#first-page", (b) => b.disabled), true);
    await paged.click("#next-page");
    await paged.waitForFunction((last) => {
      const rows = document.querySelectorAll("#not-clear tr[data-target]");
      return rows.length === 1 && rows[0].dataset.target === last;
    }, {}, keys[2]);
    assert.equal(await paged.$eval("#not-clear-info", (e) => e.textContent),
                 "1 entry after " + JSON.stringify(keys[1]) + "; 1 shown (pages of 2).");
    assert.equal(await paged.$eval("#next-page", (b) => b.disabled), true);
    assert.equal(await paged.$eval("#first-page", (b) => b.disabled), false);
    await paged.click("#first-page");
    await paged.waitForFunction(() => document.querySelectorAll("#not-clear tr[data-target]").length === 2);
    assert.deepEqual((await entryRows(paged)).map((r) => r[0]), keys.slice(0, 2));
    await paged.close();
  });

  await t.test("decisions answered under the lease are counted", async () => {
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

  await t.test("an agent naming other members is refused, in the coordinator's words", async () => {
    // Two members: the coordinator (named with HTML), and one nothing
    // listens on. The coordinator serves alone, so it grants no lease.
    const member = "c<b>1</b>";
    const second = startAgent("agent-b", member + "=" + coordinator + ",other=127.0.0.1:1",
                              "node-8");
    procs.push(second);
    const secondPorts = await second.ready;
    const other = await browser.newPage();
    other.setDefaultTimeout(WAIT_MS);
    await other.goto("http://127.0.0.1:" + secondPorts.status + "/", { waitUntil: "load" });
    await other.waitForFunction(() => {
      const states = [...document.querySelectorAll("#replicas td.lease")].map((td) => td.dataset.state);
      return states.join() === "REFUSED,STREAM_DOWN";
    });
    const rows = await other.$$eval("#replicas tr", (trs) => trs.map((tr) => ({
      name: tr.cells[0].textContent, stream: tr.cells[4].textContent,
      word: tr.querySelector("td.lease .word").textContent,
      why: tr.querySelector("td.lease .why").textContent })));
    assert.deepEqual(rows.map((r) => [r.name, r.stream]), [[member, "UP"], ["other", "DOWN"]]);
    assert.equal(rows[0].word, "refused");
    assert.equal(rows[0].why, "no lease: this coordinator's members are [], the agent's [" +
                 member + ",other]");
    assert.equal(rows[1].word, "none: stream down");
    assert.equal(await other.$$eval("#replicas td *:not(span)", (els) => els.length), 0,
                 "the member's HTML became elements");
    // The refused stream still brings the set: its entries, by that member.
    await other.waitForFunction(() => document.querySelectorAll("#not-clear tr[data-target]").length === 3);
    assert.deepEqual((await entryRows(other)).map((r) => r[3]), [member, member, member]);
    await other.close();
    await stop(second);
  });

  await t.test("stopping the coordinator: the stream goes DOWN, the lease ends, the copy stays", async () => {
    await stop(staggerd);
    await page.waitForFunction(() => {
      const td = document.querySelector("#replicas td.lease");
      return td.dataset.state === "STREAM_DOWN" &&
             document.querySelector("#replicas td.stream").textContent === "DOWN";
    });
    assert.equal(await page.$eval("#replicas td.lease .word", (e) => e.textContent),
                 "none: stream down");
    assert.deepEqual((await entryRows(page)).map((r) => r[0]), keys,
                     "the copy of the set is kept (the fallback honours it)");
  });

  await t.test("stopping the agent turns the banner on, the rows stay", async () => {
    traffic.kill("SIGKILL");
    traffic = null;
    await stop(agent);
    await page.waitForFunction(() => {
      const b = document.getElementById("banner");
      return !b.hidden && b.textContent.includes("cannot reach stagger-agent");
    });
    assert.equal(await page.$$eval("#not-clear tr[data-target]", (r) => r.length), 3,
                 "the last rows stay");
  });
});

// The seed's three keys (stagger_status_seed seed), as it prints them.
const SEEDED = ["orders/<b>open</b> & \"quoted\"", "pay/<i>rate-limited</i>",
                "ship/paused 'now'"];

// Seeds staggerd at `coordinator`; resolves with the keys it printed.
function seed(coordinator) {
  return new Promise((resolve, reject) => {
    const child = spawn(SEED, [coordinator, "seed"], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => { out += d.toString(); });
    child.on("exit", (code) => {
      const keys = out.split("\n").filter((l) => l !== "");
      if (code !== 0) reject(new Error("stagger_status_seed seed exited with " + code));
      else if (JSON.stringify(keys) !== JSON.stringify(SEEDED)) {
        reject(new Error("stagger_status_seed printed " + JSON.stringify(keys)));
      } else resolve(keys);
    });
  });
}

function startAgent(name, coordinator, agentId) {
  return startProcess(AGENT, name, [
    "--listen=127.0.0.1:0", "--coordinator=" + coordinator, "--metrics_address=",
    "--status_address=127.0.0.1:0", "--agent_id=" + agentId,
    // A loaded machine: the coordinator's answers may take longer than 50 ms.
    "--call_deadline=5s"]);
}

// The not-clear table's rows, each as its cells' texts.
function entryRows(page) {
  return page.$$eval("#not-clear tr[data-target]", (trs) => trs.map(
      (tr) => [...tr.cells].map((c) => c.textContent)));
}
