// Unit tests of the share link (static/js/links.js): base64url, reading a link, writing one.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  MAX_LINK_CONFIG, b64decode, b64encode, parseLink, resultFileName, shareQuery,
} from "../../src/trainplan/interfaces/web/static/js/links.js";
import { page } from "./fixtures.mjs";

test("base64url: UTF-8, no padding, - and _ for + and /", () => {
  assert.equal(b64encode("hi"), "aGk"); // "aGk=" unpadded
  assert.equal(b64encode("é"), "w6k"); // the two UTF-8 bytes c3 a9
  assert.equal(b64encode("~~~"), "fn5-"); // "fn5+"
  assert.equal(b64encode("???"), "Pz8_"); // "Pz8/"
  assert.equal(b64encode('{"model_type":"llama"}'), "eyJtb2RlbF90eXBlIjoibGxhbWEifQ");
  for (const text of ["hi", "é", "~~~", "???", "", "日本語 config ✓"]) assert.equal(b64decode(b64encode(text)), text);
  assert.equal(b64decode("aGk="), "hi"); // padding is accepted too
});

test("a link's fields are read as text, its config as an object", () => {
  const link = parseLink("?model=Llama-3.1-8B&micro_batch=4&config=eyJtb2RlbF90eXBlIjoibGxhbWEifQ");
  assert.deepEqual(link.values, { model: "Llama-3.1-8B", micro_batch: "4" });
  assert.deepEqual(link.config, { model_type: "llama" });
  assert.deepEqual(link.unreadable, []);
  assert.deepEqual(parseLink("").values, {});
  assert.equal(parseLink("?gpu=H100+SXM+80GB").values.gpu, "H100 SXM 80GB");
});

test("a config that is not a JSON object is ignored, with the reason", () => {
  for (const search of ["?config=***", `?config=${b64encode("[1, 2]")}`, `?config=${b64encode("{not json")}`]) {
    const link = parseLink(search);
    assert.equal(link.config, null, search);
    assert.equal(link.unreadable.length, 1, search);
  }
});

test("the share link names the model and what differs from the defaults", () => {
  const state = page({ model: "Qwen/Qwen2.5-7B", method: "qlora", micro_batch: "1.0", lr: "0.0003", resolution: "" });
  const { query, configTooLong } = shareQuery(state);
  // the table's order; slashes stay readable; spaces as +
  assert.equal(query, "model=Qwen/Qwen2.5-7B&method=qlora&lr=0.0003");
  assert.equal(configTooLong, false);
  assert.equal(shareQuery(page({ gpu: "RTX 4090" })).query, "model=Llama-3.1-8B&gpu=RTX+4090");
});

test("under a recipe, a default someone chose stays in the link", () => {
  const state = page({ recipe: "torchtune", micro_batch: "1" });
  assert.equal(shareQuery(state).query, "model=Llama-3.1-8B&recipe=torchtune");
  state.stated.add("micro_batch");
  assert.equal(shareQuery(state).query, "model=Llama-3.1-8B&micro_batch=1&recipe=torchtune"); // the table order
});

test("a small pasted config rides in the link; a large one is left out", () => {
  const config = { model_type: "llama" };
  const small = shareQuery(page({ model: "acme/tiny" }, { config }));
  assert.equal(small.query, "model=acme/tiny&config=eyJtb2RlbF90eXBlIjoibGxhbWEifQ");
  assert.deepEqual(parseLink(`?${small.query}`).config, config);
  const large = shareQuery(page({ model: "acme/big" }, { config: { notes: "x".repeat(MAX_LINK_CONFIG) } }));
  assert.equal(large.query, "model=acme/big");
  assert.equal(large.configTooLong, true);
});

test("a link written is the same scenario read back", () => {
  const state = page({ model: "FLUX.1-dev", resolution: "1024x768", "lora.rank": "64", steps: "500" });
  assert.deepEqual(parseLink(`?${shareQuery(state).query}`).values, {
    model: "FLUX.1-dev", resolution: "1024x768", "lora.rank": "64", steps: "500",
  });
});

test("the result file is named after the model, safely", () => {
  assert.equal(resultFileName("Qwen/Qwen2.5 7B"), "trainplan-Qwen_Qwen2.5_7B.json");
  assert.equal(resultFileName("a//b"), "trainplan-a_b.json");
});
