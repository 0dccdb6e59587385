// The calculator's form: built from /api/fields (sections, budget modes, the fields marked
// "web"), kept in step with the model's kind and the method, and filled by a link, a plan, a
// hint or a read config. Every edit lands in `state.values` and schedules an estimate.
import { makeControl } from "./controls.js";
import { $, h } from "./dom.js";
import { asText } from "./format.js";
import {
  appliesTo, appliesToMethod, appliesToStage, budgetModeOf, choiceLabel, defaults, leftOut, modelKind, openingBudgetMode,
  scenarioValues,
} from "./scenario.js";
import { state } from "./state.js";
import { schedule } from "./update.js";

/** A control's edit: remember it, follow the model's kind or the method, estimate after `delay`. */
export function onEdit(name, value, delay) {
  state.values[name] = value;
  state.stated.add(name);
  if (name === "model") followKind();
  if (name === "method") {
    // a full fine-tune has no frozen base: its precision setting no longer applies
    if (value === "full" && state.values.base_weights) setValue("base_weights", "", false);
    applyVisibility();
  }
  if (name === "stage") {
    // a stage without a reference model (sft, orpo, a reward model) takes no reference setting
    for (const field of state.meta.fields) {
      if (!appliesToStage(state.fields, field.name, value) && state.values[field.name]) setValue(field.name, "", false);
    }
    applyVisibility();
  }
  schedule(delay);
}

/** Set a field from elsewhere (a suggestion, a hint, a plan): its control shows it; `now`
 * estimates at once. */
export function setValue(name, value, now) {
  const text = asText(value);
  state.values[name] = text;
  state.stated.add(name);
  if (state.controls[name]) state.controls[name].set(text);
  applyVisibility();
  if (now) schedule(0);
}

// The training-budget modes (/api/fields `budget_modes`) and each field's mode (`budget`)
function budgetModeControl() {
  const group = h("div", { className: "segmented", role: "radiogroup", "aria-labelledby": "budget-mode-label" });
  const current = openingBudgetMode(state.meta, state.values);
  for (const { id: mode, label: text } of state.meta.budget_modes) {
    const radio = h("input", { type: "radio", name: "budget-mode", value: mode, id: `budget-${mode}`, checked: mode === current });
    radio.addEventListener("change", () => {
      // the other modes' budgets are cleared; a field with a default of its own (epochs) keeps it
      for (const field of state.meta.fields) {
        if (field.budget && field.budget !== mode && field.nullable && state.values[field.name]) setValue(field.name, "", false);
      }
      applyVisibility();
      schedule(0);
    });
    group.append(h("label", {}, radio, h("span", { text })));
  }
  return h("div", { className: "field" }, h("span", { className: "label", id: "budget-mode-label", text: "Budget by" }), group);
}

// A model of another kind (language, diffusion, video, JEPA) switches the form at once: its
// fields appear, the others hide, and every kind-specific value goes back to its default (a
// resolution typed for an image model means nothing to the next one).
function followKind() {
  const before = document.body.dataset.kind;
  const kind = modelKind(state);
  if (before && kind !== before) {
    for (const field of state.meta.fields) {
      if (!field.families || field.name === "model") continue;
      const text = asText(field.default);
      state.values[field.name] = text;
      state.stated.delete(field.name);
      if (state.controls[field.name]) state.controls[field.name].set(text);
    }
    // a field with a default of its own for a kind (a JEPA is pretrained in full) takes it,
    // unless someone chose another value than the one the previous kind opened with
    for (const field of state.meta.fields) {
      if (!field.kind_defaults) continue;
      const opened = field.kind_defaults[before] ?? asText(field.default);
      if (state.values[field.name] !== undefined && state.values[field.name] !== opened) continue;
      const text = field.kind_defaults[kind] ?? asText(field.default);
      state.values[field.name] = text;
      if (state.controls[field.name]) state.controls[field.name].set(text);
    }
  }
  applyVisibility();
}

/** Show the fields that apply to the model's kind, the method, the stage and the budget mode;
 * hide the rest. */
export function applyVisibility() {
  const kind = modelKind(state);
  document.body.dataset.kind = kind;
  const { method, stage } = state.values;
  for (const field of state.meta.fields) {
    const node = document.querySelector(`[data-field="${field.name}"]`);
    if (node) {
      node.hidden = !appliesTo(state.fields, field.name, kind) || !appliesToMethod(state.fields, field.name, method)
        || !appliesToStage(state.fields, field.name, stage);
    }
  }
  // a section none of whose fields applies (a language model's image sample, the rollout
  // outside GRPO) hides with them
  for (const section of document.querySelectorAll("fieldset[data-section]")) {
    const nodes = [...section.querySelectorAll("[data-field]")];
    if (nodes.length) section.hidden = nodes.every((node) => node.hidden);
  }
  const checked = document.querySelector('input[name="budget-mode"]:checked');
  if (checked) {
    for (const field of state.meta.fields) {
      const node = field.budget && document.querySelector(`[data-field="${field.name}"]`);
      if (node) node.hidden = field.budget !== checked.value || !appliesTo(state.fields, field.name, kind);
    }
  }
}

/** Draw the form: a reset button, then each section of /api/fields with its fields marked
 * "web"; the budget section goes over the time and cost figures it drives. */
export function buildForm() {
  const form = $("controls");
  form.replaceChildren();
  form.addEventListener("submit", (event) => event.preventDefault());
  const reset = h("button", {
    type: "button", className: "btn btn-small", text: "Reset to defaults",
    onclick: () => {
      state.config = null;
      state.values = defaults(state.meta.fields);
      state.stated.clear();
      for (const [name, control] of Object.entries(state.controls)) control.set(state.values[name] || "");
      applyVisibility();
      schedule(0);
    },
  });
  form.append(h("div", { className: "form-head" }, reset));
  for (const section of state.meta.sections) {
    // the fields the form draws (`interfaces` names "web"); the others the API alone takes
    const fields = section.fields.map((name) => state.fields[name]).filter((field) => field && field.interfaces.includes("web"));
    if (!fields.length) continue;
    const children = [];
    if (section.id === "budget") children.push(budgetModeControl());
    children.push(...fields.map(makeControl));
    if (section.id === "advanced") {
      form.append(h("details", { className: "section" }, h("summary", { className: "section-title", text: section.title }),
        h("fieldset", {}, h("legend", { className: "visually-hidden", text: section.title }), children)));
    } else if (section.id === "budget") {
      // the budget drives the time and cost figures: its controls sit right above them
      $("run-budget").replaceChildren(h("fieldset", { className: "budget" },
        h("legend", { text: `${section.title}: what the time and cost below are for` }), children));
    } else {
      form.append(h("fieldset", { "data-section": section.id }, h("legend", { text: section.title }), children));
    }
  }
  for (const [name, control] of Object.entries(state.controls)) control.set(state.values[name] || "");
  applyVisibility();
}

/** Put a whole scenario of the API (a plan's, a read config's) into the form and estimate it. */
export function applyScenario(scenario) {
  const values = scenarioValues(scenario);
  for (const [name, text] of Object.entries(values)) {
    if (!state.fields[name]) continue;
    state.values[name] = text;
    state.stated.add(name);
    if (state.controls[name] && !(name === "model" && state.config)) state.controls[name].set(text);
  }
  const radio = $(`budget-${budgetModeOf(values)}`);
  if (radio) radio.checked = true;
  applyVisibility();
  schedule(0);
}

// A recipe's values show in the controls it fills (the request leaves those fields to the
// recipe, as the command does): each shows the recipe's value, marked as the recipe's; without
// a recipe, or once someone sets the field, the control shows the form's own value again.
export function showRecipeValues(result) {
  if (!state.meta) return; // the first answer can come before the form
  const recipe = result.assumptions && result.assumptions.recipe;
  const filled = (recipe && recipe.defaults) || {};
  for (const field of state.meta.fields) {
    const control = state.controls[field.name];
    const wrapper = document.querySelector(`[data-field="${field.name}"]`);
    if (!control || !wrapper) continue;
    const own = state.values[field.name] ?? "";
    const lent = recipe && field.name in filled && leftOut(state, field.name, own);
    let mark = wrapper.querySelector(".from-recipe");
    if (lent) {
      control.set(asText(filled[field.name]));
      if (!mark) {
        mark = h("span", { className: "from-recipe" });
        wrapper.querySelector(".help").before(mark);
      }
      const def = choiceLabel(state.fields, field.name, asText(field.default)) || "auto";
      mark.textContent = `from the ${recipe.name} recipe (the default is ${def})`;
      wrapper.dataset.recipe = recipe.name;
    } else if (wrapper.dataset.recipe) {
      control.set(own);
      if (mark) mark.remove();
      delete wrapper.dataset.recipe;
    }
  }
}
