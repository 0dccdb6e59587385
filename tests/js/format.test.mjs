// Unit tests of the page's formatting (static/js/format.js): `node --test tests/js/`.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  GIB, asText, assumptionText, capitalise, deviceText, gib, gibFigure, groupBy, normalise, seconds, share, usd, words,
} from "../../src/trainplan/interfaces/web/static/js/format.js";

test("gib shows bytes as GiB with two decimals", () => {
  assert.equal(GIB, 1073741824);
  assert.equal(gib(1.5 * GIB), "1.50 GiB");
  assert.equal(gib(0), "0.00 GiB");
  // an H100's 81,559 MiB, as nvidia-smi reports it: 81559 / 1024 = 79.647...
  assert.equal(gib(81559 * 1024 ** 2), "79.65 GiB");
  assert.equal(gibFigure(1234.5 * GIB), "1,234.50");
});

test("usd keeps cents below $100 only", () => {
  assert.equal(usd(12.5), "$12.50");
  assert.equal(usd(99.999), "$100.00"); // under 100 before rounding: two decimals
  assert.equal(usd(1234.5), "$1,235");
  assert.equal(usd(1234.4), "$1,234");
  assert.equal(usd(-5), "-$5.00");
});

test("share rounds to a whole percent and never shows -0%", () => {
  assert.equal(share(12.5), "13%");
  assert.equal(share(-0.4), "0%");
  assert.equal(share(-12.5), "-12%");
  assert.equal(share(1234), "1,234%");
});

test("seconds has three significant digits below 100 s", () => {
  assert.equal(seconds(1.23456), "1.23 s");
  assert.equal(seconds(0.0123456), "0.0123 s");
  assert.equal(seconds(100), "100 s");
  assert.equal(seconds(1234.56), "1,235 s");
});

test("normalise ignores case, spaces, underscores, dashes and slashes", () => {
  assert.equal(normalise("Meta-Llama/Llama 3.1_8B"), "metallamallama3.18b");
  assert.equal(normalise("H100 SXM"), normalise("h100-sxm"));
});

test("asText writes values as the controls hold them", () => {
  assert.equal(asText(null), "");
  assert.equal(asText(undefined), "");
  assert.equal(asText(true), "true");
  assert.equal(asText(false), "false");
  assert.equal(asText(0), "0");
  assert.equal(asText(["q_proj", "v_proj"]), "q_proj,v_proj");
  assert.equal(asText(2e-4), "0.0002");
});

test("small text helpers", () => {
  assert.equal(capitalise("not even 1 fits"), "Not even 1 fits");
  assert.equal(capitalise(""), "");
  assert.equal(words("optimizer_step"), "optimizer step");
});

test("groupBy keeps the first-seen order of the groups and of their members", () => {
  const rows = [{ cls: "datacenter", n: 1 }, { cls: "consumer", n: 2 }, { cls: "datacenter", n: 3 }];
  assert.deepEqual(groupBy(rows, "cls"), [
    ["datacenter", [rows[0], rows[2]]],
    ["consumer", [rows[1]]],
  ]);
  assert.deepEqual(groupBy([], "cls"), []);
});

test("assumptionText formats each kind of applied default", () => {
  assert.equal(assumptionText("overhead_bytes", 2 * GIB), "2.00 GiB");
  assert.equal(assumptionText("steps", 12345), "12,345");
  assert.equal(assumptionText("pue", 1.2), "1.2");
  assert.equal(assumptionText("mfu", 0.123456), "0.1235"); // four significant digits
  assert.equal(assumptionText("share", 1 / 3), "0.3333");
  assert.equal(assumptionText("precision", "bf16"), "bf16");
  assert.equal(assumptionText("packed", true), "true");
});

test("deviceText names the memory outside the allocator", () => {
  assert.equal(deviceText(null), "");
  assert.equal(deviceText({ flat_bytes: GIB }), "");
  const device = { context_bytes: 0.5 * GIB, workspace_bytes: 0.25 * GIB, communicators: 0, nccl_bytes: 0 };
  assert.equal(deviceText(device), " Outside the allocator: CUDA context 0.50 GiB, cuBLAS workspace 0.25 GiB.");
  assert.equal(
    deviceText({ ...device, communicators: 2, nccl_bytes: GIB }),
    " Outside the allocator: CUDA context 0.50 GiB, cuBLAS workspace 0.25 GiB, NCCL buffers 1.00 GiB (2 communicators).",
  );
  assert.match(deviceText({ ...device, communicators: 1, nccl_bytes: GIB }), /\(1 communicator\)\.$/);
});
