// "Worth knowing": the answer's hints, each with an Apply button that makes its change, and the
// answer's notes.
import { $, h } from "./dom.js";
import { applyVisibility, setValue } from "./form.js";
import { schedule } from "./update.js";

/** Draw the hints and notes of an estimate. */
export function renderHints(result) {
  const items = result.hints.map((hint) =>
    h("li", { "data-hint": hint.id },
      h("div", {},
        h("div", { className: "hint-title" },
          ...hint.tags.map((tag) => tag === "fit"
            ? h("span", { className: `badge tag ${hint.fits ? "ok" : "short"}`, text: hint.fits ? "fits" : "still short" })
            : h("span", { className: "badge tag exact", text: tag })),
          hint.title),
        h("div", { className: "hint-text", text: hint.text })),
      h("button", {
        type: "button", className: "btn btn-small", text: "Apply", "aria-label": `Apply: ${hint.title}`,
        onclick: () => applyChange(hint.change),
      })));
  if (!items.length) items.push(h("li", { className: "empty-note", text: "Nothing to add for this scenario." }));
  $("hints").replaceChildren(...items);
  $("notes").replaceChildren(...result.display.notes.map((text) => h("li", { text })));
}

/** A hint's change (field -> value) into the form, then one estimate. */
function applyChange(change) {
  for (const [name, value] of Object.entries(change)) setValue(name, value, false);
  if (document.querySelector('input[name="budget-mode"]:checked')) applyVisibility();
  schedule(0);
}
