// Checks of deploy/Dockerfile, which cannot be built here (no Docker
// engine). One mode per ctest test:
//   node check_dockerfile.js lint          dockerfilelint passes (and
//                                          rejects a broken Dockerfile)
//   node check_dockerfile.js structure     two Debian 12 stages; the build
//                                          stage runs scripts/setup and
//                                          scripts/build; the runtime stage
//                                          installs real, non -dev packages,
//                                          copies only staggerd, numeric
//                                          USER, EXPOSE 50051 9464,
//                                          ENTRYPOINT staggerd; the
//                                          .dockerignore; mutated
//                                          Dockerfiles prove each rule bites
//   node check_dockerfile.js runtime-libs STAGGERD
//                                          every shared library STAGGERD
//                                          links is in a runtime package or
//                                          their Depends, or in the
//                                          bookworm-slim base; proven on
//                                          system libraries too. A STAGGERD
//                                          that is missing (not built) fails
//                                          the check, naming the path.
//   node check_dockerfile.js setup-build   the build stage's
//                                          `scripts/setup --build` succeeds
//                                          on a machine without kubectl and
//                                          without touching npm.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const REPO = path.resolve(__dirname, "..", "..");
const DOCKERFILE = path.join(REPO, "deploy", "Dockerfile");
const TEXT = fs.readFileSync(DOCKERFILE, "utf8");
const LINT = path.join(__dirname, "node_modules", ".bin", "dockerfilelint");

// Instructions with continuation lines joined and comments dropped:
// [{ op, args, stage }] (stage: index of the FROM it belongs to).
function instructions(text) {
  const out = [];
  let stage = -1;
  let buf = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!buf && (line === "" || line.startsWith("#"))) continue;
    if (buf && line.startsWith("#")) continue;
    if (line.endsWith("\\")) { buf += line.slice(0, -1) + " "; continue; }
    const full = (buf + line).trim();
    buf = "";
    const m = /^([A-Za-z]+)\s+(.*)$/.exec(full);
    if (!m) continue;
    const op = m[1].toUpperCase();
    if (op === "FROM") stage++;
    out.push({ op, args: m[2].replace(/\s+/g, " ").trim(), stage });
  }
  return out;
}

// Packages named by `apt-get install` in the given RUN instructions.
function aptPackages(runs) {
  const pkgs = [];
  for (const r of runs) {
    for (const part of r.args.split(/&&|;/)) {
      const m = /apt-get\s+(?:-\S+\s+)*install\s+(.*)$/.exec(part.trim());
      if (m) pkgs.push(...m[1].split(/\s+/).filter((t) => t && !t.startsWith("-")));
    }
  }
  return pkgs;
}

// dpkg metadata of installed packages: name -> { depends: [[alternatives]], essential, priority }
let dpkgCache;
function dpkg() {
  if (dpkgCache) return dpkgCache;
  const out = execFileSync("dpkg-query", ["-W", "-f=${Package}\t${Status}\t${Priority}\t${Essential}\t${Pre-Depends}\t${Depends}\n"], { encoding: "utf8", maxBuffer: 64 << 20 });
  dpkgCache = new Map();
  for (const line of out.split("\n")) {
    const [name, status, priority, essential, pre, dep] = line.split("\t");
    if (!name || !/install ok installed/.test(status)) continue;
    const rel = [pre, dep].filter(Boolean).join(", ");
    const depends = rel
      ? rel.split(",").map((alt) => alt.split("|").map((p) => p.trim().replace(/\s*\(.*\)$/, "").replace(/:any$/, "")).filter(Boolean))
      : [];
    dpkgCache.set(name, { depends, essential: essential === "yes", priority });
  }
  return dpkgCache;
}

// Installed packages reachable from `roots` through Pre-Depends/Depends
// (of `a | b` the first installed alternative; a virtual name with no
// installed package of that name is skipped, which can only make the
// closure smaller, i.e. the check stricter).
function closure(roots) {
  const db = dpkg();
  const seen = new Set();
  const stack = [...roots];
  while (stack.length) {
    const p = stack.pop();
    if (seen.has(p) || !db.has(p)) continue;
    seen.add(p);
    for (const alts of db.get(p).depends) {
      const pick = alts.find((a) => db.has(a));
      if (pick) stack.push(pick);
    }
  }
  return seen;
}

// What debian:bookworm-slim holds: the Essential and Priority: required
// packages (debootstrap's minbase) and what they depend on.
let baseCache;
function baseImagePackages() {
  if (!baseCache) {
    const roots = [...dpkg()].filter(([, v]) => v.essential || v.priority === "required").map(([k]) => k);
    baseCache = closure(roots);
  }
  return baseCache;
}

// path -> owning Debian package, for many library paths in one dpkg-query
// call (merged-/usr aware: dpkg may know a file as /lib/... or /usr/lib/...).
function owners(files) {
  const aliases = new Map(); // candidate path -> original path
  for (const file of files) {
    const cands = new Set([file, fs.realpathSync(file)]);
    for (const f of [...cands]) {
      if (f.startsWith("/usr/lib/")) cands.add(f.slice(4));
      else if (f.startsWith("/lib/")) cands.add("/usr" + f);
    }
    for (const c of cands) aliases.set(c, file);
  }
  const r = spawnSync("dpkg-query", ["-S", ...aliases.keys()], { encoding: "utf8", maxBuffer: 16 << 20 });
  const out = new Map();
  for (const line of r.stdout.split("\n")) {
    const m = /^([^:]+)(?::[a-z0-9]+)?: (\S+)$/.exec(line.trim());
    if (m && aliases.has(m[2])) out.set(aliases.get(m[2]), m[1]);
  }
  return out;
}

// Libraries `binary` needs that neither `packages` (with their Depends) nor
// the base image provide. [] when all are covered.
function uncoveredLibs(binary, packages) {
  const ldd = execFileSync("ldd", [binary], { encoding: "utf8" });
  const have = new Set([...closure(packages), ...baseImagePackages()]);
  const missing = [];
  const libs = [];
  for (const line of ldd.split("\n")) {
    const m = /^\s*(\S+)\s+=>\s+(\S+)/.exec(line);
    if (!m) continue;
    if (m[2] === "not") missing.push(`${m[1]} (not found on this machine)`);
    else libs.push(m);
  }
  const own = owners(libs.map((m) => m[2]));
  for (const [, name, file] of libs) {
    const pkg = own.get(file);
    if (!pkg) missing.push(`${name} (${file} belongs to no package)`);
    else if (!have.has(pkg)) missing.push(`${name} (package ${pkg})`);
  }
  return missing;
}

// The packages deploy/Dockerfile's last (runtime) stage installs.
const runtimePackages = (() => {
  const all = instructions(TEXT);
  const last = all.filter((i) => i.op === "FROM").length - 1;
  return aptPackages(all.filter((i) => i.stage === last && i.op === "RUN"));
})();

const mode = process.argv[2];
const MODES = ["lint", "structure", "runtime-libs", "setup-build"];
if (!MODES.includes(mode)) {
  console.error(`usage: node check_dockerfile.js ${MODES.join("|")} [STAGGERD]` +
    " (STAGGERD: runtime-libs only, and required there)");
  process.exit(2);
}

if (mode === "lint") {
  test("dockerfilelint: deploy/Dockerfile has no issues", () => {
    const r = spawnSync(LINT, ["--json", DOCKERFILE], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.equal(JSON.parse(r.stdout).totalIssues, 0, r.stdout);
  });
  test("dockerfilelint: rejects a broken Dockerfile", () => {
    const broken = TEXT.replace("apt-get install -y --no-install-recommends", "apt-get install").replace("FROM debian:bookworm-slim", "FROM debian:latest");
    assert.notEqual(broken, TEXT);
    const r = spawnSync(LINT, ["--json", broken], { encoding: "utf8" });
    assert.notEqual(r.status, 0);
    const titles = JSON.parse(r.stdout).files.flatMap((f) => f.issues.map((i) => i.title));
    assert.ok(titles.some((t) => /latest/i.test(t)), titles.join("; "));
    assert.ok(titles.some((t) => /apt-get/.test(t)), titles.join("; "));
  });
}

// Structural rules for a Dockerfile text; returns error strings.
function structureErrors(text) {
  const errors = [];
  const err = (m) => errors.push(m);
  const all = instructions(text);
  const fr = all.filter((i) => i.op === "FROM");
  const last = fr.length - 1;
  const rt = all.filter((i) => i.stage === last);
  const bld = all.filter((i) => i.stage >= 0 && i.stage < last);

  if (fr.length < 2) err("not multi-stage");
  for (const f of fr) if (!/^debian:bookworm(-slim)?(\s+AS\s+\S+)?$/i.test(f.args)) err(`FROM ${f.args}: not Debian 12`);
  if (last >= 0 && !/^debian:bookworm-slim\b/.test(fr[last].args)) err("runtime stage is not debian:bookworm-slim");

  // Build stage: the repo's own scripts (scripts/setup, scripts/build, what
  // scripts/start and scripts/test run), and nothing no test exercises.
  const runs = bld.filter((i) => i.op === "RUN").map((i) => i.args);
  const setup = runs.findIndex((r) => /(^|\s)scripts\/setup\b/.test(r));
  const make = runs.findIndex((r) => /(^|\s)scripts\/build Release\b/.test(r));
  if (!(setup >= 0 && make > setup)) err("build stage must RUN scripts/setup, then scripts/build Release");
  for (const r of runs) {
    for (const sc of r.matchAll(/(?:^|\s)(scripts\/[A-Za-z0-9_-]+)/g)) {
      const p = path.join(REPO, sc[1]);
      try { fs.accessSync(p, fs.constants.X_OK); } catch { err(`${sc[1]} is not an executable script of the repo`); }
    }
    for (const cmd of r.split(/&&/).map((c) => c.trim().replace(/^([A-Z_]+=\S+\s+)+/, ""))) {
      if (!/^(scripts\/(setup|build)\b|install\s)/.test(cmd)) err(`unexpected build step: ${cmd}`);
    }
  }

  // Runtime stage: real, non -dev packages, including the five libraries.
  const pkgs = aptPackages(rt.filter((i) => i.op === "RUN"));
  for (const p of pkgs) {
    if (/-dev$|^build-essential$|^g\+\+|^gcc|^cmake$/.test(p)) err(`runtime package ${p} is a build package`);
    else if (!dpkg().has(p)) err(`runtime package ${p} is not an installed Debian package here (misspelled?)`);
  }
  for (const want of ["libgrpc++1.51", "libprotobuf32", "libabsl20220623", "libprometheus-cpp-core1.0", "libprometheus-cpp-pull1.0"]) {
    if (!pkgs.includes(want)) err(`runtime stage does not install ${want}`);
  }
  const copies = rt.filter((i) => i.op === "COPY" || i.op === "ADD");
  if (!copies.length) err("runtime stage copies nothing");
  for (const c of copies) {
    if (!/^--from=\S+ \S*staggerd \/usr\/local\/bin\/staggerd$/.test(c.args)) err(`runtime stage copies more than staggerd: ${c.op} ${c.args}`);
  }
  const user = rt.filter((i) => i.op === "USER").pop();
  if (!user || !/^[1-9][0-9]*(:[1-9][0-9]*)?$/.test(user.args)) err(`USER must be a numeric non-root UID, got ${user ? user.args : "none"}`);
  const ports = rt.filter((i) => i.op === "EXPOSE").flatMap((i) => i.args.split(" "));
  for (const p of ["50051", "9464"]) if (!ports.includes(p)) err(`EXPOSE lacks ${p}`);
  const ep = rt.filter((i) => i.op === "ENTRYPOINT").pop();
  let epArgs = null;
  try { epArgs = ep && JSON.parse(ep.args); } catch { /* shell form */ }
  if (!Array.isArray(epArgs) || epArgs[0] !== "/usr/local/bin/staggerd") err("ENTRYPOINT must be the exec form [\"/usr/local/bin/staggerd\"]");
  return errors;
}

if (mode === "structure") {
  test("deploy/Dockerfile passes the structural rules", () => {
    assert.deepEqual(structureErrors(TEXT), []);
  });
  test("Dockerfile.dockerignore keeps host builds and node_modules out", () => {
    const f = path.join(REPO, "deploy", "Dockerfile.dockerignore");
    const pats = fs.readFileSync(f, "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    for (const want of ["build", "build-*", "tests/deploy/node_modules", ".git"]) assert.ok(pats.includes(want), `missing ${want}`);
    // Nothing the build needs may be excluded.
    for (const need of ["proto", "server", "client", "scripts", "tests", "bench", "CMakeLists.txt"]) {
      assert.ok(!pats.includes(need) && !pats.includes(`${need}/`), `${need} excluded`);
    }
  });
  // Each mutant breaks one rule; the checker must name it.
  const mutants = [
    ["Ubuntu base", (t) => t.replace("FROM debian:bookworm AS build", "FROM ubuntu:22.04 AS build"), /FROM ubuntu:22.04 AS build: not Debian 12/],
    ["full runtime base", (t) => t.replace("FROM debian:bookworm-slim AS runtime", "FROM debian:bookworm AS runtime"), /runtime stage is not debian:bookworm-slim/],
    ["single stage", (t) => t.slice(t.indexOf("FROM debian:bookworm-slim")), /not multi-stage/],
    ["no scripts/setup", (t) => t.replace("RUN scripts/setup --build", "RUN true"), /must RUN scripts\/setup, then scripts\/build Release|unexpected build step: true/],
    ["an untested build step", (t) => t.replace("RUN scripts/setup --build", "RUN scripts/setup --build && make -j8"), /unexpected build step: make -j8/],
    ["-dev package at runtime", (t) => t.replace("libgrpc++1.51 \\", "libgrpc++-dev \\"), /runtime package libgrpc\+\+-dev is a build package/],
    ["misspelled package", (t) => t.replace("libprotobuf32 \\", "libprotobuf23 \\"), /libprotobuf23 is not an installed Debian package/],
    ["whole repo in the runtime", (t) => t.replace("COPY --from=build /out/staggerd /usr/local/bin/staggerd", "COPY . /src"), /copies more than staggerd/],
    ["root user", (t) => t.replace("USER 65532:65532", "USER root"), /USER must be a numeric non-root UID/],
    ["metrics port not exposed", (t) => t.replace("EXPOSE 50051 9464", "EXPOSE 50051"), /EXPOSE lacks 9464/],
    ["shell-form ENTRYPOINT", (t) => t.replace('ENTRYPOINT ["/usr/local/bin/staggerd"]', "ENTRYPOINT staggerd"), /ENTRYPOINT must be the exec form/],
  ];
  for (const [name, mutate, want] of mutants) {
    test(`rejects: ${name}`, () => {
      const broken = mutate(TEXT);
      assert.notEqual(broken, TEXT, "mutation did not apply");
      const errors = structureErrors(broken);
      assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
    });
  }
}

if (mode === "runtime-libs") {
  const lib = (name) => path.join("/usr/lib/x86_64-linux-gnu", name);
  test("the checker accepts what the runtime packages provide", () => {
    // libprometheus-cpp-pull links civetweb, zlib, libstdc++, ...;
    // libgrpc++ links libgrpc, re2, c-ares, OpenSSL, Abseil, ...
    for (const f of ["libprometheus-cpp-pull.so.1.0", "libgrpc++.so.1.51"]) {
      assert.deepEqual(uncoveredLibs(lib(f), runtimePackages), [], f);
    }
  });
  test("the checker rejects a library no runtime package provides", () => {
    const without = runtimePackages.filter((p) => p !== "libprometheus-cpp-pull1.0" && p !== "libprometheus-cpp-core1.0");
    const missing = uncoveredLibs(lib("libprometheus-cpp-pull.so.1.0"), without);
    assert.ok(missing.some((m) => /libprometheus-cpp-core/.test(m)), missing.join("; "));
    // curl (installed by scripts/setup) links libcurl, which no runtime
    // package brings.
    assert.ok(uncoveredLibs("/usr/bin/curl", runtimePackages).some((m) => /libcurl\.so.*libcurl4/.test(m)));
  });
  // The binary is this check's subject: without it the check fails (never
  // skips), saying what to build.
  const bin = process.argv[3];
  test("every library the built staggerd links is in the runtime image", () => {
    assert.ok(bin, "no staggerd path given: node check_dockerfile.js runtime-libs STAGGERD");
    assert.ok(fs.existsSync(bin), `${bin}: no such file; build staggerd first (scripts/build)`);
    assert.deepEqual(uncoveredLibs(bin, runtimePackages), []);
  });
}

if (mode === "setup-build") {
  // A machine like the build stage: every Debian package reported
  // installed (so apt is not needed), no kubectl, an npm that must not run.
  function sandbox() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-setup-"));
    const bin = path.join(dir, "bin");
    const repo = path.join(dir, "repo");
    fs.mkdirSync(bin);
    fs.mkdirSync(path.join(repo, "scripts"), { recursive: true });
    fs.mkdirSync(path.join(repo, "tests", "deploy"), { recursive: true });
    fs.copyFileSync(path.join(REPO, "scripts", "setup"), path.join(repo, "scripts", "setup"));
    fs.chmodSync(path.join(repo, "scripts", "setup"), 0o755);
    // package.json without node_modules: the full setup would npm install.
    fs.copyFileSync(path.join(__dirname, "package.json"), path.join(repo, "tests", "deploy", "package.json"));
    for (const tool of ["bash", "env", "dirname", "id", "grep", "cat", "sed", "tr", "head", "basename", "printf", "test", "true", "false"]) {
      const found = ["/usr/bin", "/bin"].map((d) => path.join(d, tool)).find((p) => fs.existsSync(p));
      if (found) fs.symlinkSync(found, path.join(bin, tool));
    }
    const stub = (name, body) => fs.writeFileSync(path.join(bin, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
    stub("dpkg-query", "printf 'install ok installed'");
    stub("apt-get", `echo "apt-get $* called" >> ${dir}/calls; exit 1`);
    stub("sudo", `echo "sudo $* called" >> ${dir}/calls; exit 1`);
    stub("npm", `echo "npm $* called" >> ${dir}/calls; exit 1`);
    return { dir, bin, repo };
  }
  const run = (sb, args) => spawnSync(path.join(sb.repo, "scripts", "setup"), args, {
    encoding: "utf8", env: { PATH: sb.bin, HOME: sb.dir }, cwd: sb.dir,
  });
  const calls = (sb) => (fs.existsSync(path.join(sb.dir, "calls")) ? fs.readFileSync(path.join(sb.dir, "calls"), "utf8") : "");

  test("control: the full scripts/setup fails there (no kubectl)", () => {
    const sb = sandbox();
    try {
      const r = run(sb, []);
      assert.notEqual(r.status, 0, "the sandbox has no kubectl, so the full setup must fail");
      assert.match(r.stderr, /kubectl/);
    } finally {
      fs.rmSync(sb.dir, { recursive: true, force: true });
    }
  });
  test("scripts/setup --build (deploy/Dockerfile) succeeds without kubectl or npm", () => {
    const sb = sandbox();
    try {
      const r = run(sb, ["--build"]);
      assert.equal(r.status, 0, "deploy/Dockerfile runs `scripts/setup --build`: scripts/setup needs that " +
        `mode (Debian packages only; no kubectl check, no npm). It failed:\n${r.stdout}${r.stderr}`);
      assert.equal(calls(sb), "", "no apt-get, sudo or npm expected");
    } finally {
      fs.rmSync(sb.dir, { recursive: true, force: true });
    }
  });
}
