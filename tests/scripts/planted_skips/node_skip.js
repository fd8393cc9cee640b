// A planted skip (planted_skips/CMakeLists.txt): one test passes, one skips.
"use strict";
const test = require("node:test");

test("planted passes", () => {});
test("planted skips", { skip: "planted: this skip must fail the run" }, () => {});
