// A refused estimate on the page: under the field it names, or in the banner over the results.
import { $, h } from "./dom.js";
import { setValue } from "./form.js";
import { fieldLabel, fieldPrefix } from "./scenario.js";
import { state } from "./state.js";

function controlFor(field) {
  if (!field) return null;
  if (field.startsWith("model_config")) return { name: "model", node: $("f-model-config") };
  if (state.controls[field]) return { name: field, node: state.controls[field].focus };
  return null;
}

/** Show a refusal once: under the field it names (with its "Did you mean" choices), or in the
 * banner when it names no field on the form. The summary bar only points at it. */
export function showError(data) {
  clearErrors();
  state.error = data; // shown again in its field once the form is built (the first answer can come first)
  const message = data.message || "the server refused this scenario";
  const target = controlFor(data.field);
  const wrapper = target && document.querySelector(`[data-field="${target.name}"]`);
  const slot = wrapper && wrapper.querySelector(".field-error");
  const place = slot || $("error");
  place.textContent = slot ? message : `${data.field ? fieldPrefix(state.fields, data.field) : ""}${message}`;
  if (data.suggestions && data.suggestions.length && !/did you mean/i.test(message)) {
    place.append(" ", h("span", { text: "Did you mean: " }));
  }
  (data.suggestions || []).forEach((name, index) => {
    place.append(index ? ", " : " ", h("button", {
      type: "button", className: "btn btn-small", text: name,
      onclick: () => setValue(data.field, name, true),
    }));
  });
  if (!slot) $("error").hidden = false;
  if (target && target.node) target.node.setAttribute("aria-invalid", "true");
  const where = slot ? fieldLabel(state.fields, target.name) : "the message above the results";
  $("summary").replaceChildren(h("span", { className: "nofit", text: `Needs a fix: see ${where}` }));
}

/** No model chosen (the box was cleared): say so, and show no figures for a model nobody picked. */
export function showChooseModel() {
  clearErrors();
  const slot = document.querySelector('[data-field="model"] .field-error');
  if (slot) slot.textContent = "choose a model: search the catalog, type a Hub id, or use a config.json";
  if (state.controls.model) state.controls.model.focus.setAttribute("aria-invalid", "true");
  $("results").classList.add("stale");
  document.body.dataset.state = "choose-model";
  $("summary").replaceChildren(h("span", { className: "nofit", text: "Choose a model to see the estimate" }));
}

/** Clear every field's error, the banner and the invalid marks. */
export function clearErrors() {
  state.error = null;
  $("error").hidden = true;
  for (const slot of document.querySelectorAll(".field-error")) slot.textContent = "";
  for (const node of document.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
}
