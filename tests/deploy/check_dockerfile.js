// Checks of deploy/Dockerfile, which cannot be built here (no Docker
// engine). It makes two images from one build stage: staggerd (the last
// stage, what `docker build` makes without --target) and stagger-agent
// (--target stagger-agent), both on a shared runtime stage. One mode per
// ctest test:
//   node check_dockerfile.js lint          dockerfilelint passes (and
//                                          rejects a broken Dockerfile)
//   node check_dockerfile.js structure     Debian 12 stages; the build
//                                          stage runs scripts/setup and
//                                          scripts/build; the runtime stage
//                                          installs real, non -dev packages;
//                                          each image copies only its
//                                          program (the agent's also its
//                                          health probe), numeric USER,
//                                          its EXPOSE, its exec-form
//                                          ENTRYPOINT; the .dockerignore;
//                                          mutated Dockerfiles prove each
//                                          rule bites
//   node check_dockerfile.js runtime-libs [BINARY...]
//                                          every shared library each given
//                                          built program (staggerd,
//                                          stagger-agent) links is in its
//                                          image's packages or their
//                                          Depends, or in the bookworm-slim
//                                          base, and every program the
//                                          agent's probe runs is too;
//                                          proven on system libraries. A
//                                          program the images ship but not
//                                          given (not built) fails the
//                                          check, naming it.
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

// The stages: [{ index, base, name, instructions }] ("FROM base AS name").
function stages(text) {
  const all = instructions(text);
  return all.filter((i) => i.op === "FROM").map((f) => {
    const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(f.args) || [];
    return { index: f.stage, base: m[1], name: m[2], instructions: all.filter((i) => i.stage === f.stage) };
  });
}

// A stage and the stages it is built on, itself first.
function chain(all, stage) {
  const out = [stage];
  for (let s = stage; s;) {
    s = all.find((x) => x.name === s.base && x.index < s.index);
    if (s) out.push(s);
  }
  return out;
}

// The images: stages that COPY a program out of the build stage
// ("COPY --from=build /out/NAME /usr/local/bin/NAME"): name -> stage.
function images(all) {
  const out = new Map();
  for (const st of all) {
    for (const c of st.instructions.filter((i) => i.op === "COPY")) {
      const m = /^--from=\S+ \/out\/(\S+) \/usr\/local\/bin\/(\S+)$/.exec(c.args);
      if (m && m[1] === m[2]) out.set(m[1], st);
    }
  }
  return out;
}

// The Debian packages an image gets: those of its stage and the stages
// under it.
const stagePackages = (all, stage) =>
  chain(all, stage).flatMap((s) => aptPackages(s.instructions.filter((i) => i.op === "RUN")));

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
// call (merged-/usr aware: dpkg may know a file as /lib/... or /usr/lib/...,
// /bin/... or /usr/bin/...).
function owners(files) {
  const aliases = new Map(); // candidate path -> original path
  for (const file of files) {
    const cands = new Set([file, fs.realpathSync(file)]);
    for (const f of [...cands]) {
      if (/^\/usr\/(lib|bin|sbin)\//.test(f)) cands.add(f.slice(4));
      else if (/^\/(lib|bin|sbin)\//.test(f)) cands.add("/usr" + f);
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

// Every program the agent's health probe (deploy/stagger-agent-health)
// runs: they must be in its image (check_agent_probe.js runs it with these
// alone on PATH).
const { PROBE_PROGRAMS } = require("./lib/agent_rules");
// The images and what each ships, as deploy/Dockerfile says.
const STAGES = stages(TEXT);
const IMAGES = images(STAGES);

const mode = process.argv[2];
const MODES = ["lint", "structure", "runtime-libs", "setup-build"];
if (!MODES.includes(mode)) {
  console.error(`usage: node check_dockerfile.js ${MODES.join("|")} [BINARY...]`);
  process.exit(2);
}

// dockerfilelint's issues for a Dockerfile text, less one false positive:
// dockerfilelint 1.8 reads `FROM runtime AS staggerd` (a stage defined
// earlier in the file) as an untagged image. Only that is dropped: an
// untagged real image (`FROM debian AS x`) is still an issue.
function lintIssues(text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-lint-"));
  let r;
  try {
    fs.writeFileSync(path.join(dir, "Dockerfile"), text);
    r = spawnSync(LINT, ["--json", path.join(dir, "Dockerfile")], { encoding: "utf8" });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const lines = text.split("\n");
  const defined = (line) => {
    const m = /^FROM\s+(\S+)/i.exec(lines[line - 1] || "");
    return m && lines.slice(0, line - 1).some((l) => new RegExp(`^FROM\\s+\\S+\\s+AS\\s+${m[1]}\\s*$`, "i").test(l));
  };
  const issues = JSON.parse(r.stdout).files.flatMap((f) => f.issues)
    .filter((i) => !(i.title === "Base Image Missing Tag" && defined(Number(i.line))));
  return { status: r.status, issues, raw: r.stdout + r.stderr };
}

if (mode === "lint") {
  test("dockerfilelint: deploy/Dockerfile has no issues", () => {
    const r = lintIssues(TEXT);
    assert.deepEqual(r.issues, [], r.raw);
  });
  test("dockerfilelint: rejects a broken Dockerfile", () => {
    const broken = TEXT.replace("apt-get install -y --no-install-recommends", "apt-get install").replace("FROM debian:bookworm-slim", "FROM debian:latest");
    assert.notEqual(broken, TEXT);
    const r = lintIssues(broken);
    assert.notEqual(r.status, 0);
    const titles = r.issues.map((i) => i.title);
    assert.ok(titles.some((t) => /latest/i.test(t)), titles.join("; "));
    assert.ok(titles.some((t) => /apt-get/.test(t)), titles.join("; "));
  });
  test("dockerfilelint: an untagged image is still an issue, only stage names are not", () => {
    const broken = TEXT.replace("FROM debian:bookworm-slim AS runtime", "FROM debian AS runtime");
    assert.notEqual(broken, TEXT);
    const line = TEXT.split("\n").indexOf("FROM debian:bookworm-slim AS runtime") + 1;
    assert.ok(line > 0);
    assert.deepEqual(lintIssues(broken).issues.map((i) => `${i.line} ${i.title}`), [`${line} Base Image Missing Tag`]);
  });
}

// What each image must be: its EXPOSEd ports, its exec-form ENTRYPOINT
// (checked by `entrypoint(args)`), and the exec-form CMD that makes each
// exposed port listen on all of the container's interfaces (the programs'
// own defaults are loopback).
const IMAGE_RULES = {
  staggerd: {
    ports: ["50051", "9464"],
    entrypoint: (e) => e.length === 1 && e[0] === "/usr/local/bin/staggerd",
    want: '["/usr/local/bin/staggerd"]',
    listen: { "50051": "--address", "9464": "--metrics_address" },
    // Files besides the program the image may copy from the context.
    extra: [],
    packages: [],
  },
  "stagger-agent": {
    ports: ["9465"],
    // The socket's mode comes from the umask; `exec` keeps the agent the
    // process that gets the signals; "$@" passes the arguments on.
    entrypoint: (e) => e.length === 4 && e[0] === "/bin/sh" && e[1] === "-c" &&
      /^umask 0007 && exec \/usr\/local\/bin\/stagger-agent "\$@"$/.test(e[2]) && e[3] === "stagger-agent",
    want: '["/bin/sh", "-c", "umask 0007 && exec /usr/local/bin/stagger-agent \\"$@\\"", "stagger-agent"]',
    listen: { "9465": "--metrics_address" },
    extra: ["deploy/stagger-agent-health /usr/local/bin/stagger-agent-health"],
    packages: ["curl"],
  },
};

// Structural rules for a Dockerfile text; returns error strings.
function structureErrors(text) {
  const errors = [];
  const err = (m) => errors.push(m);
  const all = stages(text);
  const named = (n) => all.find((s) => s.name === n);
  if (all.length < 2) err("not multi-stage");
  for (const st of all) {
    const earlier = all.some((x) => x.name === st.base && x.index < st.index);
    if (!earlier && !/^debian:bookworm(-slim)?$/.test(st.base)) err(`FROM ${st.base}${st.name ? " AS " + st.name : ""}: not Debian 12`);
  }
  const root = (st) => chain(all, st).pop().base;

  // The build stage: the repo's own scripts (scripts/setup, scripts/build,
  // what scripts/start and scripts/test run), and nothing no test exercises.
  const build = named("build");
  if (!build || build.base !== "debian:bookworm") err("no build stage (FROM debian:bookworm AS build)");
  else {
    const runs = build.instructions.filter((i) => i.op === "RUN").map((i) => i.args);
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
  }

  // The images: each on debian:bookworm-slim, the shared runtime stage's
  // libraries (real, non -dev packages, including the five), only its
  // program and files, a numeric USER, its ports and entrypoint.
  const imgs = images(all);
  const last = all[all.length - 1];
  for (const name of Object.keys(IMAGE_RULES)) if (!imgs.has(name)) err(`no image copies /out/${name} to /usr/local/bin/${name}`);
  if (last && last.name !== "staggerd") err(`the last stage (docker build without --target) must be staggerd, got ${last.name}`);
  for (const [name, st] of imgs) {
    const rule = IMAGE_RULES[name];
    if (!rule) { err(`stage ${st.name} ships ${name}, which is no Stagger program`); continue; }
    if (st.name !== name) err(`the image of ${name} must be the stage named ${name} (docker build --target ${name}), got ${st.name}`);
    if (root(st) !== "debian:bookworm-slim") err(`image ${name} is not built on debian:bookworm-slim`);
    const installs = build && build.instructions.some((i) => i.op === "RUN" && i.args.includes(`/tmp/stagger-build/bin/${name} /out/${name}`));
    if (!installs) err(`the build stage does not install ${name} into /out/${name}`);
    const pkgs = stagePackages(all, st);
    for (const p of pkgs) {
      if (/-dev$|^build-essential$|^g\+\+|^gcc|^cmake$/.test(p)) err(`runtime package ${p} is a build package`);
      else if (!dpkg().has(p)) err(`runtime package ${p} is not an installed Debian package here (misspelled?)`);
    }
    for (const want of ["libgrpc++1.51", "libprotobuf32", "libabsl20220623", "libprometheus-cpp-core1.0", "libprometheus-cpp-pull1.0", ...rule.packages]) {
      if (!pkgs.includes(want)) err(`image ${name} does not install ${want}`);
    }
    const own = chain(all, st).flatMap((s) => s.instructions);
    for (const c of own.filter((i) => i.op === "COPY" || i.op === "ADD")) {
      const ok = c.op === "COPY" && (c.args === `--from=build /out/${name} /usr/local/bin/${name}` || rule.extra.includes(c.args));
      if (!ok) err(`image ${name} copies more than ${name}: ${c.op} ${c.args}`);
    }
    for (const x of rule.extra) {
      if (!own.some((i) => i.op === "COPY" && i.args === x)) err(`image ${name} does not copy ${x}`);
      const src = path.join(REPO, x.split(" ")[0]);
      try { fs.accessSync(src, fs.constants.X_OK); } catch { err(`${x.split(" ")[0]} is not an executable file of the repo`); }
    }
    // The effective USER: the last of the image's own stage, else of the
    // nearest stage under it that has one.
    const user = chain(all, st).map((x) => x.instructions.filter((i) => i.op === "USER").pop()).find(Boolean);
    if (!user || !/^[1-9][0-9]*(:[1-9][0-9]*)?$/.test(user.args)) err(`image ${name}: USER must be a numeric non-root UID, got ${user ? user.args : "none"}`);
    const ports = own.filter((i) => i.op === "EXPOSE").flatMap((i) => i.args.split(" "));
    for (const p of rule.ports) if (!ports.includes(p)) err(`image ${name}: EXPOSE lacks ${p}`);
    const ep = st.instructions.filter((i) => i.op === "ENTRYPOINT").pop();
    let epArgs = null;
    try { epArgs = ep && JSON.parse(ep.args); } catch { /* shell form */ }
    if (!Array.isArray(epArgs) || !rule.entrypoint(epArgs)) err(`image ${name}: ENTRYPOINT must be the exec form ${rule.want}`);
    const cmd = st.instructions.filter((i) => i.op === "CMD").pop();
    let cmdArgs = null;
    try { cmdArgs = cmd && JSON.parse(cmd.args); } catch { /* shell form */ }
    for (const [port, flag] of Object.entries(rule.listen)) {
      const want = `${flag}=0.0.0.0:${port}`;
      if (!Array.isArray(cmdArgs) || !cmdArgs.includes(want)) {
        err(`image ${name}: CMD must be the exec form with ${want} (the program's own default is loopback, out of reach of the EXPOSEd port)`);
      }
    }
  }
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
    ["full runtime base", (t) => t.replace("FROM debian:bookworm-slim AS runtime", "FROM debian:bookworm AS runtime"), /image staggerd is not built on debian:bookworm-slim/],
    ["no build stage", (t) => t.slice(t.indexOf("FROM debian:bookworm-slim")), /no build stage/],
    ["single stage", (t) => "FROM debian:bookworm-slim AS staggerd\n" + t.slice(t.indexOf("COPY --from=build /out/staggerd")), /not multi-stage/],
    ["no scripts/setup", (t) => t.replace("RUN scripts/setup --build", "RUN true"), /must RUN scripts\/setup, then scripts\/build Release|unexpected build step: true/],
    ["an untested build step", (t) => t.replace("RUN scripts/setup --build", "RUN scripts/setup --build && make -j8"), /unexpected build step: make -j8/],
    ["stagger-agent not built into /out", (t) => t.replace(/\s*&& install -D -m 0755 \/tmp\/stagger-build\/bin\/stagger-agent \/out\/stagger-agent/, ""), /the build stage does not install stagger-agent/],
    ["-dev package at runtime", (t) => t.replace("libgrpc++1.51 \\", "libgrpc++-dev \\"), /runtime package libgrpc\+\+-dev is a build package/],
    ["misspelled package", (t) => t.replace("libprotobuf32 \\", "libprotobuf23 \\"), /libprotobuf23 is not an installed Debian package/],
    ["the agent's image without curl", (t) => t.replace("        curl \\", "        procps \\"), /image stagger-agent does not install curl/],
    ["whole repo in the staggerd image", (t) => t.replace("COPY --from=build /out/staggerd /usr/local/bin/staggerd", "$&\nCOPY . /src"), /image staggerd copies more than staggerd: COPY \. \/src/],
    ["staggerd in the agent's image", (t) => t.replace("COPY --from=build /out/stagger-agent /usr/local/bin/stagger-agent", "$&\nCOPY --from=build /out/staggerd /usr/local/bin/staggerd-too"), /image stagger-agent copies more than stagger-agent/],
    ["no probe in the agent's image", (t) => t.replace("COPY deploy/stagger-agent-health /usr/local/bin/stagger-agent-health\n", ""), /image stagger-agent does not copy deploy\/stagger-agent-health/],
    ["no agent image", (t) => t.replace("COPY --from=build /out/stagger-agent /usr/local/bin/stagger-agent", "COPY --from=build /out/stagger-agent /opt/agent"), /no image copies \/out\/stagger-agent/],
    ["staggerd not the default target", (t) => `${t}\nFROM runtime AS debug\n`, /the last stage .* must be staggerd, got debug/],
    ["root user (agent)", (t) => t.replace("USER 65532:65532", "USER root"), /image stagger-agent: USER must be a numeric non-root UID/],
    ["root user (staggerd)", (t) => { const i = t.lastIndexOf("USER 65532:65532"); return `${t.slice(0, i)}USER 0${t.slice(i + 16)}`; }, /image staggerd: USER must be a numeric non-root UID, got 0/],
    ["metrics port not exposed", (t) => t.replace("EXPOSE 50051 9464", "EXPOSE 50051"), /image staggerd: EXPOSE lacks 9464/],
    ["agent metrics port not exposed", (t) => t.replace("EXPOSE 9465", "EXPOSE 9466"), /image stagger-agent: EXPOSE lacks 9465/],
    ["shell-form ENTRYPOINT", (t) => t.replace('ENTRYPOINT ["/usr/local/bin/staggerd"]', "ENTRYPOINT staggerd"), /image staggerd: ENTRYPOINT must be the exec form/],
    ["agent entrypoint without the umask", (t) => t.replace("umask 0007 && ", ""), /image stagger-agent: ENTRYPOINT must be the exec form/],
    ["staggerd on its loopback default", (t) => t.replace('CMD ["--address=0.0.0.0:50051", "--metrics_address=0.0.0.0:9464"]', 'CMD ["--metrics_address=0.0.0.0:9464"]'), /image staggerd: CMD must be the exec form with --address=0.0.0.0:50051/],
    ["staggerd's metrics on loopback", (t) => t.replace("--metrics_address=0.0.0.0:9464", "--metrics_address=127.0.0.1:9464"), /image staggerd: CMD must be the exec form with --metrics_address=0.0.0.0:9464/],
    ["the agent's metrics on its loopback default", (t) => t.replace('CMD ["--metrics_address=0.0.0.0:9465"]\n', ""), /image stagger-agent: CMD must be the exec form with --metrics_address=0.0.0.0:9465/],
    ["agent entrypoint without exec", (t) => t.replace("&& exec /usr/local/bin/stagger-agent", "&& /usr/local/bin/stagger-agent"), /image stagger-agent: ENTRYPOINT must be the exec form/],
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

// Problems with running `program` (found on PATH here) in an image with
// `packages`: its package, or a library it links, not in the image.
function programErrors(program, packages) {
  const r = spawnSync("sh", ["-c", `command -v ${program}`], { encoding: "utf8" });
  const file = r.status === 0 ? fs.realpathSync(r.stdout.trim()) : null;
  if (!file) return [`${program}: not found on this machine`];
  const pkg = owners([file]).get(file);
  const have = new Set([...closure(packages), ...baseImagePackages()]);
  if (!pkg) return [`${program}: ${file} belongs to no package`];
  if (!have.has(pkg)) return [`${program}: package ${pkg} is not in the image`];
  return uncoveredLibs(file, packages).map((m) => `${program}: ${m}`);
}

if (mode === "runtime-libs") {
  const lib = (name) => path.join("/usr/lib/x86_64-linux-gnu", name);
  const packagesOf = (image) => stagePackages(STAGES, IMAGES.get(image));
  test("the Dockerfile makes the staggerd and stagger-agent images", () => {
    assert.deepEqual([...IMAGES.keys()].sort(), ["stagger-agent", "staggerd"]);
  });
  test("the checker accepts what the runtime packages provide", () => {
    // libprometheus-cpp-pull links civetweb, zlib, libstdc++, ...;
    // libgrpc++ links libgrpc, re2, c-ares, OpenSSL, Abseil, ...
    for (const f of ["libprometheus-cpp-pull.so.1.0", "libgrpc++.so.1.51"]) {
      assert.deepEqual(uncoveredLibs(lib(f), packagesOf("staggerd")), [], f);
    }
  });
  test("the checker rejects a library no runtime package provides", () => {
    const without = packagesOf("staggerd").filter((p) => p !== "libprometheus-cpp-pull1.0" && p !== "libprometheus-cpp-core1.0");
    const missing = uncoveredLibs(lib("libprometheus-cpp-pull.so.1.0"), without);
    assert.ok(missing.some((m) => /libprometheus-cpp-core/.test(m)), missing.join("; "));
    // curl links libcurl, which staggerd's image does not bring.
    assert.ok(uncoveredLibs("/usr/bin/curl", packagesOf("staggerd")).some((m) => /libcurl\.so.*libcurl4/.test(m)));
  });
  test("every program the agent's probe runs is in its image, with its libraries", () => {
    for (const p of PROBE_PROGRAMS) assert.deepEqual(programErrors(p, packagesOf("stagger-agent")), [], p);
    // ... and the check bites: staggerd's image has no curl.
    assert.deepEqual(programErrors("curl", packagesOf("staggerd")), ["curl: package curl is not in the image"]);
  });
  // The built programs are this check's subject, by file name; each is
  // checked against its image. A program not given fails (never skips),
  // saying what to build.
  const given = new Map(process.argv.slice(3).filter((f) => f).map((f) => [path.basename(f), f]));
  for (const image of IMAGES.keys()) {
    const bin = given.get(image);
    test(`every library ${image} links is in its image`, () => {
      assert.ok(bin, `no ${image} path given: node check_dockerfile.js runtime-libs STAGGERD STAGGER_AGENT`);
      assert.ok(fs.existsSync(bin), `${bin}: no such file; build ${image} first (scripts/build)`);
      assert.deepEqual(uncoveredLibs(bin, packagesOf(image)), []);
    });
  }
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
