// What the status pages' browser tests share (status_page_test.js for
// staggerd, agent_page_test.js for stagger-agent): arguments, child
// processes whose stderr gives their ports, headless Chromium, and a page
// that records console errors. Every wait polls with WAIT_MS as its
// deadline.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");
const puppeteer = require("puppeteer-core");

const WAIT_MS = 45000;  // any single wait; the machine may be slow and busy

function arg(name, fallback) {
  const i = process.argv.indexOf("--" + name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback !== undefined) return fallback;
  throw new Error("missing --" + name);
}

// A staggerd or stagger-agent child; its stderr is forwarded and scanned
// for the lines that give its ports. `ready` resolves with {grpc, status}
// at its "listening on" line.
function startProcess(bin, name, args) {
  const child = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  const lines = [];
  const ports = {};
  let buffered = "";
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(name + ": not listening after " +
        WAIT_MS + "ms:\n" + lines.join("\n"))), WAIT_MS);
    child.stderr.on("data", (chunk) => {
      buffered += chunk.toString();
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        lines.push(line);
        process.stderr.write("[" + name + "] " + line + "\n");
        let m;
        if ((m = /status page on port (\d+)/.exec(line))) ports.status = Number(m[1]);
        if ((m = /listening on [^ ]*:(\d+)/.exec(line))) {
          ports.grpc = Number(m[1]);
          clearTimeout(timer);
          resolve(ports);
        }
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(name + " exited with " + code + ":\n" + lines.join("\n")));
    });
  });
  return { child, ready };
}

function stop(proc) {
  return new Promise((resolve) => {
    if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) {
      resolve();
      return;
    }
    proc.child.once("exit", () => resolve());
    proc.child.kill("SIGTERM");
    setTimeout(() => proc.child.kill("SIGKILL"), WAIT_MS).unref();
  });
}

async function textsOf(page, selector) {
  return page.$$eval(selector, (els) => els.map((e) => e.textContent));
}

// Headless Chromium with a profile under `scratch`.
function launchBrowser(chromium, scratch) {
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: path.join(scratch, "chromium"),
    timeout: WAIT_MS * 2,
    protocolTimeout: WAIT_MS * 2,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--window-size=1200,1600"],
  });
}

// A new page whose console errors, page errors and failed requests are
// pushed to `problems`.
async function watchedPage(browser, problems) {
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT_MS);
  await page.setViewport({ width: 1200, height: 1600 });
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("requestfailed", (r) => problems.push("request failed: " + r.url()));
  return page;
}

module.exports = { WAIT_MS, arg, startProcess, stop, textsOf,
                   launchBrowser, watchedPage };
