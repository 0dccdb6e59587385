// "Your training config": training config files (axolotl, torchtune, ...) dropped, chosen or
// pasted are posted as text to POST /api/config; the scenario it reads fills the form, and how
// each field was read is listed beside it.
import { postJSON } from "./api.js";
import { $, h } from "./dom.js";
import { applyScenario } from "./form.js";

/** Draw the config drop zone at the top of the form. */
export function buildConfigDrop() {
  const input = h("input", { id: "config-files", type: "file", multiple: true, accept: ".yaml,.yml,.json,.toml,.cfg,text/plain" });
  const status = h("p", { id: "config-status", className: "config-status", role: "status", "aria-live": "polite" });
  const mapping = h("div", { id: "config-mapping", className: "config-mapping" });
  const zone = h("div", { id: "config-drop", className: "config-drop" },
    h("p", { text: "Drop your training config here: axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL, accelerate or DeepSpeed. Drop several at once (with the DeepSpeed JSON a config points at)." }),
    h("label", { className: "config-pick", for: "config-files", text: "or choose the files:" }), input);
  const pasted = h("textarea", { id: "config-paste", spellcheck: "false", rows: 4, placeholder: "base_model: meta-llama/Llama-3.1-8B\nadapter: qlora\n…" });
  const readFiles = async (files) => {
    if (!files.length || !files.some((item) => item.text.trim())) return;
    status.textContent = "Reading…";
    const { ok, data } = await postJSON("/api/config", { files });
    if (!ok) {
      status.className = "config-status nofit";
      status.textContent = `Could not read it: ${data.field ? `${data.field}: ` : ""}${data.message}`;
      mapping.replaceChildren();
      return;
    }
    status.className = "config-status";
    status.textContent = data.files.map((item) => `${item.file} read as ${item.format}`).join("; ");
    const lists = [h("h3", { text: "Where each field came from" }), h("ul", {}, data.provenance.map((item) => h("li", { text: item.text })))];
    if (data.ignored.length) {
      lists.push(h("h3", { text: "Ignored" }), h("ul", {}, data.ignored.map((item) => h("li", { text: `${item.file}: ${item.text}` }))));
    }
    mapping.replaceChildren(...lists);
    applyScenario(data.scenario);
  };
  const read = async (list) => {
    const files = [];
    for (const file of list) files.push({ name: file.name, text: await file.text() });
    await readFiles(files);
  };
  const pasteBox = h("div", { className: "field config-paste" },
    h("label", { for: "config-paste", text: "or paste a config" }), pasted,
    h("button", { type: "button", className: "btn", id: "config-paste-read", text: "Read pasted config",
      onclick: () => readFiles([{ name: "pasted-config", text: pasted.value }]) }));
  input.addEventListener("change", () => read(Array.from(input.files || [])));
  zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    read(Array.from((event.dataTransfer && event.dataTransfer.files) || []));
  });
  const section = h("details", { className: "config-section", id: "config-section", open: true },
    h("summary", { className: "section-title", text: "Your training config" }), zone, pasteBox, status, mapping);
  const form = $("controls");
  const head = form.querySelector(".form-head");
  if (head) head.after(section);
  else form.prepend(section);
}
