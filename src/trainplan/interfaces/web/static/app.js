// trainplan web calculator, the page's entry module. Builds the form from /api/fields and renders
// /api/estimate's JSON. No formulas here: every figure comes from the server; the modules in js/
// only format and draw (docs/web.md lists them).
import { getJSON } from "./js/api.js";
import { buildConfigDrop } from "./js/configs.js";
import { $ } from "./js/dom.js";
import { showError } from "./js/errors.js";
import { buildForm, showRecipeValues } from "./js/form.js";
import { buildLargest } from "./js/largest.js";
import { buildPlanner, planLabels } from "./js/planner.js";
import { buildBody, defaults } from "./js/scenario.js";
import { readUrl, wireShare, writeUrl } from "./js/share.js";
import { state } from "./js/state.js";
import { schedule, send } from "./js/update.js";

async function boot() {
  wireShare();
  const fromUrl = readUrl();
  send(buildBody(state, fromUrl)); // first result while the catalogs load
  let meta;
  try {
    [meta, state.models, state.gpus, state.regions] = await Promise.all(
      ["/api/fields", "/api/models", "/api/gpus", "/api/regions"].map(getJSON));
  } catch (error) {
    $("form-loading").textContent = `Could not load the controls (${error.message}). Reload to try again.`;
    return;
  }
  state.meta = meta;
  for (const field of meta.fields) state.fields[field.name] = field;
  state.values = defaults(meta.fields);
  let dropped = false;
  for (const [name, text] of Object.entries(fromUrl)) {
    if (state.fields[name]) {
      state.values[name] = text;
      state.stated.add(name);
    } else dropped = true;
  }
  buildForm();
  buildLargest();
  buildPlanner();
  buildConfigDrop();
  writeUrl();
  if (state.result) {
    // the first answer came before the choice names and the controls
    planLabels(state.result);
    showRecipeValues(state.result);
  }
  if (state.error) showError(state.error);
  if (state.config && state.controls.model.showConfig) state.controls.model.showConfig();
  if (dropped) schedule(0); // the link named what the table does not hold: estimate again without it
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
else boot();
