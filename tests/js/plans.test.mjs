// Unit tests of the planner's logic (static/js/plans.js): the form drawn from `plan_options`, the
// `plan` object it sends, and the words of an answer.
import assert from "node:assert/strict";
import { test } from "node:test";

import { GIB } from "../../src/trainplan/interfaces/web/static/js/format.js";
import {
  cleanNumber, paretoNote, paretoPoints, planErrorText, planFields, planHelp, planInputId, planRequest, planText,
  planWidget, reasonText, rejectedTitle, sameFiguresNote, splitRejected, wideRange,
} from "../../src/trainplan/interfaces/web/static/js/plans.js";
import { FIELDS } from "./fixtures.mjs";

const WEB = ["cli", "web", "api"];
const option = (name, kind, more = {}) => ({
  name, kind, label: name, default: null, maximum: null, choices: null, choice_labels: null, form_help: null,
  placeholder: null, interfaces: WEB, ...more,
});
// the declarations' order of /api/fields `plan_options`
const OPTIONS = [
  option("methods", "list", { label: "Methods", choices: ["full", "lora", "qlora", "any"], form_help: "any: full fine-tune, LoRA and QLoRA" }),
  option("gpu_types", "list", { label: "GPU types" }),
  option("max_gpus", "int", { label: "Max GPUs", default: 64, maximum: 4096, form_help: "1, 2, 4, then whole nodes" }),
  option("target_global_tokens", "int", { maximum: 1e10, form_help: "tokens per step" }),
  option("target_global_sequences", "int", { interfaces: ["cli", "api"] }),
  option("budget_usd", "float", { form_help: "reject plans that cost more", placeholder: "no limit" }),
  option("deadline_hours", "float", { form_help: "reject plans that take longer" }),
  option("objective", "choice", { label: "Objective", default: "cost", choices: ["time", "cost"], form_help: "what ranks the plans" }),
  option("top_k", "int", { default: 5, maximum: 20, interfaces: ["cli", "api"] }),
];

test("each option's widget and id follow from its declaration", () => {
  assert.equal(planInputId("max_gpus"), "plan-max-gpus");
  assert.equal(planInputId("objective"), "plan-objective");
  assert.deepEqual(OPTIONS.map(planWidget), ["methods", "gpus", "text", "text", "text", "text", "text", "select", "text"]);
});

test("the form draws the options marked web: the choices first, the GPU list last", () => {
  const fields = planFields(OPTIONS);
  assert.deepEqual(fields.map((field) => [field.option.name, field.widget, field.id]), [
    ["objective", "select", "plan-objective"],
    ["methods", "methods", "plan-methods"],
    ["max_gpus", "text", "plan-max-gpus"],
    ["target_global_tokens", "text", "plan-target-global-tokens"],
    ["budget_usd", "text", "plan-budget-usd"],
    ["deadline_hours", "text", "plan-deadline-hours"],
    ["gpu_types", "gpus", "plan-gpu-types"],
  ]);
});

test("a text box's help states the server's cap", () => {
  const byName = Object.fromEntries(OPTIONS.map((item) => [item.name, item]));
  assert.equal(planHelp(byName.max_gpus, "text"), "1, 2, 4, then whole nodes; at most 4,096");
  assert.equal(planHelp(byName.target_global_tokens, "text"), "tokens per step; at most 10,000,000,000");
  assert.equal(planHelp(byName.budget_usd, "text"), "reject plans that cost more");
  assert.equal(planHelp(byName.objective, "select"), "what ranks the plans");
  assert.equal(planHelp(byName.gpu_types, "gpus"), "");
});

test("the plan object leaves empty boxes and 'this method' to the server", () => {
  const fields = planFields(OPTIONS);
  assert.equal(cleanNumber(" $1,500 "), "1500");
  const form = {
    objective: "time", methods: "this", max_gpus: "8", target_global_tokens: "  ", budget_usd: "$1,000",
    deadline_hours: " 12 ", gpu_types: ["H100 SXM 80GB", "L4"],
  };
  assert.deepEqual(planRequest(fields, form), {
    objective: "time", max_gpus: "8", budget_usd: "1000", deadline_hours: "12", gpu_types: ["H100 SXM 80GB", "L4"],
  });
  assert.deepEqual(planRequest(fields, { ...form, methods: "any", gpu_types: [] }), {
    objective: "time", methods: "any", max_gpus: "8", budget_usd: "1000", deadline_hours: "12", gpu_types: [],
  });
});

test("a refused plan is named by the option's label or the calculator's field", () => {
  const prefix = (name) => `${FIELDS[name].label} (${name}): `;
  assert.equal(
    planErrorText(OPTIONS, { field: "plan.max_gpus", message: "must be at most 4096" }, prefix),
    "Max GPUs (plan.max_gpus): must be at most 4096",
  );
  assert.equal(planErrorText(OPTIONS, { field: "plan.other", message: "unknown" }, prefix), "other (plan.other): unknown");
  assert.equal(
    planErrorText(OPTIONS, { field: "micro_batch", message: "must be >= 1" }, prefix),
    "Fix the calculator first: Micro-batch (micro_batch): must be >= 1",
  );
  assert.equal(planErrorText(OPTIONS, { field: null, message: "" }, prefix), "the server refused this plan");
});

test("rejections: what a user acts on apart from the search's bookkeeping, largest first", () => {
  const split = splitRejected({
    "over budget": 5, "invalid: tp does not divide the heads": 30, "does not fit in memory": 10, "invalid: pp > layers": 2,
  });
  assert.deepEqual(split.actionable, [["does not fit in memory", 10], ["over budget", 5]]);
  assert.deepEqual(split.internal, [["invalid: tp does not divide the heads", 30], ["invalid: pp > layers", 2]]);
  assert.equal(split.actionTotal, 15);
  assert.equal(split.internalTotal, 32);
  assert.equal(rejectedTitle(1500), "Why 1,500 candidates were turned down");
  assert.equal(rejectedTitle(0), "No candidate was turned down for memory, price, budget or deadline");
  assert.equal(reasonText("invalid: pp > layers"), "pp > layers");
  assert.equal(reasonText("over budget"), "over budget");
});

test("a plan with an earlier plan's time and cost says what differs", () => {
  const plan = (duration, usd, scenario) => ({ display: { duration, usd }, scenario });
  const items = [
    plan("2.0 h", "$10", { zero_stage: 1, offload: "none", micro_batch: 4 }),
    plan("1.0 h", "$12", { zero_stage: 1, offload: "none", micro_batch: 4 }),
    plan("2.0 h", "$10", { zero_stage: 2, offload: "optimizer", micro_batch: 4 }),
    plan("2.0 h", "$10", { zero_stage: 1, offload: "none", micro_batch: 4 }),
  ];
  const settings = [
    { name: "zero_stage", short_label: "ZeRO stage" }, { name: "offload", short_label: "offload" },
    { name: "micro_batch", short_label: "micro-batch" },
  ];
  assert.equal(sameFiguresNote(items, 0, settings), "");
  assert.equal(sameFiguresNote(items, 1, settings), "");
  assert.equal(sameFiguresNote(items, 2, settings), "same time and cost as #1; differs in ZeRO stage, offload");
  assert.equal(sameFiguresNote(items, 3, settings), "same time and cost as #1; differs in nothing shown");
});

test("a plan's cells", () => {
  const item = {
    scenario: {
      method: "lora", gpus: 8, gpu: "H100 SXM 80GB", tensor_parallel: 2, pipeline_parallel: 1, zero_stage: 3,
      micro_batch: 4, grad_accum: 8, activation_checkpointing: "full", offload: "none",
    },
    estimate: {
      memory: { per_gpu: { total_bytes: 40.5 * GIB }, reserved_peak_bytes: 38.25 * GIB, allocated_peak_bytes: 30 * GIB },
      batch: { replicas: 4 },
    },
    display: { duration: "3.2 h", usd: "$120", kwh: null },
  };
  assert.deepEqual(planText(FIELDS, item), {
    method: "LoRA", hardware: "8 × H100 SXM 80GB", what: "LoRA on 8 × H100 SXM 80GB",
    time: "3.2 h", cost: "$120", kwh: "–", device: "40.50", figures: "reserved 38.25 · allocated 30.00",
    layout: "2 / 1 / 4, ZeRO 3", batch: "4 × 8", savers: "full, none",
  });
  // a GRPO plan names its rollout engine beside the savers, as the server words it
  const grpo = { ...item, display: { ...item.display, rollout_summary: "vLLM colocated at 0.3, tp 1" } };
  assert.equal(planText(FIELDS, grpo).savers, "full, none · vLLM colocated at 0.3, tp 1");
  // context parallelism and HSDP replicas are named where they are used
  const split = { ...item, scenario: { ...item.scenario, context_parallel: 2, data_parallel_replicate: 2 } };
  assert.equal(planText(FIELDS, split).layout, "2 / 1 / 4, cp 2, HSDP ×2, ZeRO 3");
});

test("the Pareto chart draws the priced plans, each keeping its row's index", () => {
  const priced = (runS, usd) => ({ estimate: { time: { run_s: runS }, cost: { run_usd: usd } } });
  const pareto = [priced(7200, 50), { estimate: { time: { run_s: 3600 }, cost: { run_usd: null } } }, priced(1800, 80),
    { estimate: { time: null, cost: null } }];
  assert.deepEqual(paretoPoints(pareto), [{ x: 2, y: 50, index: 0 }, { x: 0.5, y: 80, index: 2 }]);
  assert.equal(paretoNote(1), "1 plan that no other beats on both time and cost. Click a point to use it.");
  assert.equal(paretoNote(2), "2 plans that no other beats on both time and cost. Click a point to use it.");
  assert.equal(paretoNote(0), "No priced plan to draw.");
  assert.equal(wideRange([1, 30]), false); // a factor of 30 exactly: linear
  assert.equal(wideRange([1, 31]), true);
  assert.equal(wideRange([0, 5]), true); // from zero: any spread is wide
  assert.equal(wideRange([4]), false);
});
