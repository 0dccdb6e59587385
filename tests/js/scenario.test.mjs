// Unit tests of the scenario logic (static/js/scenario.js): defaults, what a request leaves out,
// the model's kind and the request body.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  appliesTo, appliesToMethod, appliesToStage, budgetModeOf, buildBody, choiceLabel, defaults, fieldLabel, fieldPrefix, isDefault,
  largestErrorText, leftOut, modelKind, openingBudgetMode, scenarioValues,
} from "../../src/trainplan/interfaces/web/static/js/scenario.js";
import { FIELDS, FIELD_LIST, META, page } from "./fixtures.mjs";

test("labels and choice names come from the field table", () => {
  assert.equal(fieldLabel(FIELDS, "micro_batch"), "Micro-batch");
  assert.equal(fieldLabel(FIELDS, "hidden_size"), "hidden_size"); // a config key, as it is
  assert.equal(fieldPrefix(FIELDS, "micro_batch"), "Micro-batch (micro_batch): ");
  assert.equal(fieldPrefix(FIELDS, "model_config.hidden_size"), "model_config.hidden_size: ");
  assert.equal(choiceLabel(FIELDS, "method", "qlora"), "QLoRA");
  assert.equal(choiceLabel(FIELDS, "method", "dora"), "dora");
  assert.equal(choiceLabel(FIELDS, "gpu", "L4"), "L4");
});

test("isDefault compares numbers as numbers", () => {
  assert.equal(isDefault(FIELDS.micro_batch, "1"), true);
  assert.equal(isDefault(FIELDS.micro_batch, "1.0"), true);
  assert.equal(isDefault(FIELDS.micro_batch, "2"), false);
  assert.equal(isDefault(FIELDS.lr, "2e-4"), true);
  assert.equal(isDefault(FIELDS.method, "lora"), true);
  assert.equal(isDefault(FIELDS.method, "full"), false);
  assert.equal(isDefault(FIELDS.recipe, ""), true); // unset by default
  assert.equal(isDefault(FIELDS.steps, "0"), false); // "" is the default, 0 is a value
});

test("a default is left out, unless someone set it under a recipe", () => {
  assert.equal(leftOut(page(), "micro_batch", "1"), true);
  assert.equal(leftOut(page(), "micro_batch", "4"), false);
  assert.equal(leftOut(page(), "unknown", ""), false);
  const recipe = page({ recipe: "torchtune" });
  assert.equal(leftOut(recipe, "micro_batch", "1"), true); // the recipe fills it
  recipe.stated.add("micro_batch");
  assert.equal(leftOut(recipe, "micro_batch", "1"), false); // chosen: sent
});

test("a field applies to the kinds and methods the table names", () => {
  assert.equal(appliesTo(FIELDS, "resolution", "llm"), false);
  assert.equal(appliesTo(FIELDS, "resolution", "video"), true);
  assert.equal(appliesTo(FIELDS, "micro_batch", "diffusion"), true);
  assert.equal(appliesTo(FIELDS, "not_a_field", "llm"), true);
  assert.equal(appliesToMethod(FIELDS, "lora.rank", "full"), false);
  assert.equal(appliesToMethod(FIELDS, "lora.rank", "qlora"), true);
  assert.equal(appliesToMethod(FIELDS, "micro_batch", "full"), true);
});

test("a field applies to the stages the table names; no stage is supervised fine-tuning", () => {
  assert.equal(appliesToStage(FIELDS, "reference", "dpo"), true);
  assert.equal(appliesToStage(FIELDS, "reference", "orpo"), false);
  assert.equal(appliesToStage(FIELDS, "reference", ""), false);
  assert.equal(appliesToStage(FIELDS, "micro_batch", "rm"), true);
});

test("the model's kind: the catalog, then the last answer, then a pasted config", () => {
  assert.equal(modelKind(page({ model: "flux dev" })), "diffusion"); // an alias, loosely
  assert.equal(modelKind(page({ model: "BLACK-FOREST-LABS/flux.1-dev" })), "diffusion"); // the Hub id
  assert.equal(modelKind(page({ model: "Llama-3.1-8B" })), "llm");
  const video = { model: { name: "acme/wan-tiny" }, sample: { frames: 16 } };
  assert.equal(modelKind(page({ model: "acme/wan-tiny" }, { result: video })), "video");
  const image = { model: { name: "acme/sd-tiny" }, sample: { frames: 1 } };
  assert.equal(modelKind(page({ model: "acme/sd-tiny" }, { result: image })), "diffusion");
  assert.equal(modelKind(page({ model: "other/model" }, { result: image })), "llm"); // another model's answer
  assert.equal(modelKind(page({ model: "custom" }, { config: { _class_name: "UNet2DConditionModel" } })), "diffusion");
  assert.equal(modelKind(page({ model: "custom" }, { config: { model_type: "llama" } })), "llm");
});

test("the request body leaves out defaults, empties and other kinds' fields", () => {
  const state = page({ micro_batch: "4", "lora.rank": "32", "lora.alpha": "64", resolution: "512", gpu: "" });
  assert.deepEqual(buildBody(state, state.values), {
    model: "Llama-3.1-8B", // the model is always named, default or not
    micro_batch: "4",
    lora: { rank: "32", alpha: "64" },
  });
  // a pasted config travels under the table's key
  state.config = { model_type: "llama", hidden_size: 256 };
  assert.deepEqual(buildBody(state, { model: "acme/tiny" }), { model: "acme/tiny", model_config: state.config });
});

test("before the catalogs load, the link's values are sent as they are", () => {
  const first = { meta: null, fields: {}, models: [], values: {}, stated: new Set(), config: null, result: null };
  const link = { model: "FLUX.1-dev", resolution: "512", micro_batch: "1", lr: "" };
  assert.deepEqual(buildBody(first, link), { model: "FLUX.1-dev", resolution: "512", micro_batch: "1" });
  first.config = { _class_name: "FluxTransformer2DModel" };
  assert.deepEqual(buildBody(first, {}).model_config, first.config); // no table yet: the default key
});

test("defaults and scenario values are text", () => {
  const values = defaults(FIELD_LIST);
  assert.equal(values.micro_batch, "1");
  assert.equal(values.lr, "0.0002");
  assert.equal(values.recipe, "");
  assert.equal(values["lora.rank"], "16");
  assert.deepEqual(scenarioValues({
    model: "Qwen2.5-7B", gpus: 8, force: false, steps: null, lora: { rank: 16, targets: ["q_proj", "v_proj"] },
  }), {
    model: "Qwen2.5-7B", gpus: "8", force: "false", steps: "", "lora.rank": "16", "lora.targets": "q_proj,v_proj",
  });
  assert.deepEqual(scenarioValues({ lora: null }), {});
});

test("the budget mode follows the budget given", () => {
  assert.equal(budgetModeOf({ steps: "100", dataset_tokens: "1e9" }), "steps");
  assert.equal(budgetModeOf({ steps: "", dataset_tokens: "1e9" }), "dataset");
  assert.equal(budgetModeOf({ train_tokens: "5e8" }), "tokens");
  assert.equal(openingBudgetMode(META, { epochs: "1" }), "tokens"); // epochs has a default of its own
  assert.equal(openingBudgetMode(META, { dataset_tokens: "1e9", epochs: "2" }), "dataset");
  assert.equal(openingBudgetMode(META, { dataset_tokens: "1e9", steps: "10" }), "steps"); // the last one given
});

test("a refused largest-that-fits search says what to do", () => {
  assert.equal(largestErrorText(FIELDS, { field: "max", message: "not even 1 fits on L4" }), "Not even 1 fits on L4");
  assert.equal(
    largestErrorText(FIELDS, { field: "micro_batch", message: "must be >= 1 (got 0)" }),
    "Fix the calculator first: Micro-batch (micro_batch): must be >= 1 (got 0)",
  );
  assert.equal(largestErrorText(FIELDS, { field: null, message: "" }), "the server could not answer");
});
