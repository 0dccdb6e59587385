// "Largest that fits on <GPU>" under the fields the server can maximise (/api/fields
// `max_fields`): POST /api/estimate?max=FIELD, and the answer put into the field.
import { postJSON } from "./api.js";
import { $, h } from "./dom.js";
import { setValue } from "./form.js";
import { buildBody, largestErrorText } from "./scenario.js";
import { state } from "./state.js";

// Memory left free: the estimate cannot see fragmentation spikes.
const HEADROOMS = [["0", "0% (exact limit)"], ["0.05", "5%"], ["0.1", "10%"], ["0.2", "20%"]];
const largestId = (field) => `largest-${field.replace(/_/g, "-")}`;

/** A button, a headroom choice and a status line under each field that can be maximised; each
 * is named by the field's short label. */
export function buildLargest() {
  for (const field of state.meta.max_fields) {
    const noun = state.fields[field].short_label;
    const wrapper = document.querySelector(`[data-field="${field}"]`);
    if (!wrapper) continue;
    const id = largestId(field);
    const button = h("button", {
      type: "button", className: "btn btn-small largest-btn", id, "aria-describedby": `${id}-status`,
      onclick: () => findLargest(field),
    }, "Largest ", h("span", { className: "visually-hidden", text: `${noun} ` }), "that fits on ",
    h("span", { className: "largest-gpu", text: state.result ? state.result.gpu : "this GPU" }));
    const status = h("span", { className: "largest-status", id: `${id}-status`, role: "status", "aria-live": "polite" });
    const free = h("select", { id: `${id}-headroom`, className: "largest-headroom" },
      ...HEADROOMS.map(([value, text]) => h("option", { value, text, selected: value === "0.05" })));
    const freeLabel = h("label", { for: `${id}-headroom`, className: "largest-free" }, "leaving free ", free);
    wrapper.append(h("div", { className: "largest", "data-largest": field }, button, freeLabel, status));
  }
}

/** The buttons name the estimate's GPU. */
export function largestLabels(result) {
  for (const node of document.querySelectorAll(".largest-gpu")) node.textContent = result.gpu;
}

/** An answer stays on screen only while the scenario it was found for is in the controls. */
export function forgetLargest() {
  for (const box of document.querySelectorAll(".largest[data-sent]")) {
    if (box.dataset.state === "busy" || JSON.stringify(largestBody(box.dataset.largest)) === box.dataset.sent) continue;
    box.querySelector(".largest-status").textContent = "";
    delete box.dataset.sent;
    box.dataset.state = "idle";
  }
}

// the field being searched is replaced by the answer: a bad value there is no obstacle
function largestBody(field) {
  const body = buildBody(state, state.values);
  delete body[field];
  return body;
}

async function findLargest(field) {
  const id = largestId(field);
  const button = $(id);
  const status = $(`${id}-status`);
  const box = button.closest(".largest");
  if (box.dataset.state === "busy" || !state.meta) return;
  const sent = JSON.stringify(largestBody(field));
  box.dataset.state = "busy";
  box.dataset.sent = sent;
  button.setAttribute("aria-disabled", "true");
  button.classList.add("busy");
  status.className = "largest-status";
  status.textContent = "Searching…";
  const headroom = $(`${id}-headroom`).value;
  const query = `max=${encodeURIComponent(field)}&headroom=${encodeURIComponent(headroom)}&hints=false`;
  const { ok, data } = await postJSON(`/api/estimate?${query}`, sent);
  button.removeAttribute("aria-disabled");
  button.classList.remove("busy");
  if (!ok) {
    status.className = "largest-status nofit";
    status.textContent = largestErrorText(state.fields, data);
    box.dataset.state = "error";
    return;
  }
  if (JSON.stringify(largestBody(field)) !== sent) {
    status.textContent = "The scenario changed during the search: press again for the new answer.";
    box.dataset.state = "stale";
    return;
  }
  const value = data.max.value;
  setValue(field, String(value), true);
  const maximum = state.fields[field] ? state.fields[field].maximum : null;
  status.className = "largest-status fits";
  status.textContent = data.display.largest + (value === maximum ? "; the most the calculator accepts" : "");
  box.dataset.state = "ready";
  box.dataset.value = String(value);
}
