// Unit tests of the memory chart's data (static/js/chart.js), and a check that every module of
// the page loads outside a browser (none touches the DOM before it is called).
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { test } from "node:test";

import { COLORS, memorySeries } from "../../src/trainplan/interfaces/web/static/js/chart.js";
import { GIB } from "../../src/trainplan/interfaces/web/static/js/format.js";

const MODULES = new URL("../../src/trainplan/interfaces/web/static/js/", import.meta.url);

test("the memory chart stacks each term's GiB per phase, the peak marked", () => {
  const memory = {
    peak_phase: "backward",
    per_gpu: { kinds: { weights: "exact", activations: "estimate" } },
    phases: {
      forward: { weights_bytes: GIB, activations_bytes: 2 * GIB },
      backward: { weights_bytes: GIB, activations_bytes: 3 * GIB },
      optimizer: { weights_bytes: GIB },
    },
  };
  assert.deepEqual(memorySeries(memory, ["weights", "activations"]), {
    labels: ["forward", "backward (peak)", "optimizer"],
    series: [
      { term: "weights", kind: "exact", label: "weights (exact)", data: [1, 1, 1] },
      { term: "activations", kind: "estimate", label: "activations (estimate)", data: [2, 3, 0] },
    ],
  });
  assert.equal(new Set(COLORS).size, COLORS.length);
});

test("every module loads without a DOM", async () => {
  const names = readdirSync(MODULES).filter((name) => name.endsWith(".js"));
  assert.ok(names.length >= 10, names.join(", "));
  for (const name of names) {
    const loaded = await import(new URL(name, MODULES));
    assert.ok(Object.keys(loaded).length > 0, `${name} exports nothing`);
  }
});
