// The form's controls, one per widget of the field table (/api/fields `widget`): text and
// number boxes, selects, checkboxes, segmented choices, LoRA targets, the GPU and region
// catalogs and the model picker. Each is `{ node, focus, get, set }`; an edit goes to onEdit.
import { h } from "./dom.js";
import { showError } from "./errors.js";
import { onEdit } from "./form.js";
import { GIB, asText, compact, groupBy, nf1, normalise } from "./format.js";
import { choiceLabel } from "./scenario.js";
import { state } from "./state.js";
import { schedule } from "./update.js";

function fieldShell(field, control, inputId, options = {}) {
  const helpId = `${inputId}-help`;
  const wrapper = h("div", { className: "field", "data-field": field.name });
  if (!options.noLabel) {
    wrapper.append(h("label", { for: inputId }, field.label, h("span", { className: "flag", text: field.flag, "aria-hidden": "true" })));
  }
  const help = h("span", { className: "help", id: helpId, text: field.form_help });
  if (options.after) wrapper.append(control, help, options.after);
  else wrapper.append(control, help);
  wrapper.append(h("span", { className: "field-error", id: `${inputId}-error`, role: "alert" }));
  return wrapper;
}
function describe(node, inputId) {
  node.setAttribute("aria-describedby", `${inputId}-help ${inputId}-error`);
}
function numberControl(field, inputId) {
  const small = field.kind === "int" && field.minimum !== null && field.maximum !== null && field.maximum - field.minimum <= 8;
  if (small) {
    const choices = [];
    for (let value = field.minimum; value <= field.maximum; value += 1) choices.push(String(value));
    return selectControl(field, inputId, choices);
  }
  const input = h("input", {
    id: inputId, type: "text", inputmode: field.kind === "int" ? "numeric" : "decimal", autocomplete: "off",
    spellcheck: "false", placeholder: field.placeholder || (field.nullable ? "auto" : null),
  });
  describe(input, inputId);
  input.addEventListener("input", () => onEdit(field.name, input.value.trim(), 350));
  return { node: input, focus: input, get: () => input.value.trim(), set: (text) => { input.value = text; } };
}
function selectControl(field, inputId, choices) {
  const select = h("select", { id: inputId });
  if (field.nullable) select.append(h("option", { value: "", text: "auto" }));
  for (const choice of choices) select.append(h("option", { value: choice, text: choiceLabel(state.fields, field.name, choice) }));
  describe(select, inputId);
  select.addEventListener("change", () => onEdit(field.name, select.value, 0));
  return { node: select, focus: select, get: () => select.value, set: (text) => { select.value = text; } };
}
function checkboxControl(field, inputId) {
  const input = h("input", { id: inputId, type: "checkbox" });
  describe(input, inputId);
  input.addEventListener("change", () => onEdit(field.name, input.checked ? "true" : "false", 0));
  const node = h("label", { className: "check", for: inputId }, input, field.label,
    h("span", { className: "flag", text: field.flag, "aria-hidden": "true" }));
  return {
    node, focus: input, noLabel: true,
    get: () => (input.checked ? "true" : "false"),
    set: (text) => { input.checked = text === "true"; },
  };
}
function segmentedControl(field, inputId) {
  const labelId = `${inputId}-label`;
  const group = h("div", { className: "segmented", role: "radiogroup", "aria-labelledby": labelId });
  const radios = field.choices.map((choice, index) => {
    const radio = h("input", { type: "radio", name: inputId, value: choice, id: index ? `${inputId}-${choice}` : inputId });
    radio.addEventListener("change", () => onEdit(field.name, choice, 0));
    group.append(h("label", {}, radio, h("span", { text: choiceLabel(state.fields, field.name, choice) })));
    return radio;
  });
  const node = h("div", {}, h("span", { className: "label", id: labelId }, field.label,
    h("span", { className: "flag", text: field.flag, "aria-hidden": "true" })), group);
  return {
    node, focus: group, noLabel: true,
    get: () => (radios.find((radio) => radio.checked) || {}).value || "",
    set: (text) => radios.forEach((radio) => { radio.checked = radio.value === text; }),
  };
}
function targetsControl(field, inputId) {
  const select = h("select", { id: inputId });
  for (const choice of field.choices) select.append(h("option", { value: choice, text: choice }));
  select.append(h("option", { value: "__custom", text: "module names…" }));
  const customId = `${inputId}-custom`;
  const custom = h("input", {
    id: customId, type: "text", placeholder: field.placeholder, "aria-label": `${field.label}: module names`,
    autocomplete: "off", spellcheck: "false", hidden: true,
  });
  describe(select, inputId);
  const get = () => (select.value === "__custom" ? custom.value.trim() : select.value);
  select.addEventListener("change", () => {
    custom.hidden = select.value !== "__custom";
    if (!custom.hidden) custom.focus();
    onEdit(field.name, get(), 0);
  });
  custom.addEventListener("input", () => onEdit(field.name, get(), 400));
  const set = (text) => {
    if (field.choices.includes(text)) {
      select.value = text;
      custom.hidden = true;
    } else {
      select.value = "__custom";
      custom.value = text;
      custom.hidden = false;
    }
  };
  return { node: h("div", {}, select, custom), focus: select, get, set };
}
function catalogSelect(field, inputId, groups, optionFor) {
  const select = h("select", { id: inputId });
  for (const [title, items] of groups) {
    const group = h("optgroup", { label: title });
    for (const item of items) group.append(optionFor(item));
    select.append(group);
  }
  describe(select, inputId);
  select.addEventListener("change", () => onEdit(field.name, select.value, 0));
  const set = (text) => {
    const options = [...select.options];
    let match = options.find((option) => option.value === text);
    if (!match) match = options.find((option) => (option.dataset.keys || "").split("|").includes(normalise(text)));
    if (!match && text) {
      match = h("option", { value: text, text: `${text} (not in the catalog)` });
      select.prepend(match);
    }
    if (match) select.value = match.value;
  };
  return { node: select, focus: select, get: () => select.value, set };
}
function gpuControl(field, inputId) {
  return catalogSelect(field, inputId, groupBy(state.gpus, "class"), (gpu) =>
    h("option", {
      value: gpu.name, text: `${gpu.name} · ${nf1.format(gpu.memory_bytes / GIB)} GiB`,
      "data-keys": [gpu.name, ...gpu.aliases].map(normalise).join("|"),
    }));
}
function regionControl(field, inputId) {
  return catalogSelect(field, inputId, groupBy(state.regions, "kind"), (region) =>
    h("option", {
      value: region.id, text: `${region.id} · ${region.name}`,
      "data-keys": normalise(region.id),
    }));
}

// The model picker: a searchable combobox over the catalog, a Hub id, or an uploaded config.json.
function modelControl(field, inputId) {
  const listId = `${inputId}-list`;
  const input = h("input", {
    id: inputId, type: "text", role: "combobox", "aria-autocomplete": "list", "aria-expanded": "false",
    "aria-controls": listId, autocomplete: "off", spellcheck: "false",
    placeholder: field.placeholder,
  });
  describe(input, inputId);
  const list = h("ul", { id: listId, role: "listbox", className: "combo-list", "aria-label": "Catalog models", hidden: true });
  let active = -1;
  let shown = [];
  const close = () => {
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  };
  const mark = (index) => {
    active = index;
    [...list.children].forEach((item, i) => item.setAttribute("aria-selected", String(i === index)));
    if (index >= 0 && list.children[index]) {
      input.setAttribute("aria-activedescendant", list.children[index].id);
      list.children[index].scrollIntoView({ block: "nearest" });
    }
  };
  const commit = (name) => {
    close();
    input.value = name;
    if (state.config) return;
    if (state.values.model !== name) onEdit("model", name, 0);
  };
  const open = () => {
    const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    shown = state.models.filter((model) => {
      const hay = `${model.name} ${model.family} ${model.hub_id} ${model.aliases.join(" ")}`.toLowerCase();
      return words.every((word) => hay.includes(word));
    }).slice(0, 80);
    list.replaceChildren(...shown.map((model, index) =>
      h("li", {
        id: `${listId}-${index}`, role: "option", "aria-selected": "false",
        onmousedown: (event) => { event.preventDefault(); commit(model.name); },
      }, h("span", { text: model.name }),
      h("span", { className: "meta", text: `${model.family} · ${compact.format(model.published_params)}` }))));
    if (!shown.length) {
      const hint = input.value.includes("/") ? "Not in the catalog: press Enter to look up this Hub id" : "No catalog model matches";
      list.append(h("li", { className: "empty", role: "option", "aria-disabled": "true", text: hint }));
    }
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    mark(shown.length ? 0 : -1);
  };
  input.addEventListener("input", open);
  input.addEventListener("focus", () => input.select());
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      if (list.hidden) open();
      else if (shown.length) mark((active + (event.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length);
    } else if (event.key === "Enter") {
      event.preventDefault();
      // an empty box means "no model", never the first catalog entry
      const typed = input.value.trim();
      commit(typed && !list.hidden && active >= 0 && shown[active] ? shown[active].name : typed);
    } else if (event.key === "Escape") {
      close();
      input.value = state.values.model || "";
    }
  });
  input.addEventListener("blur", () => {
    close();
    const text = input.value.trim();
    if (text !== state.values.model && !state.config) onEdit("model", text, 0);
  });

  // config.json: upload a file or paste it
  const fileId = `${inputId}-file`;
  const pasteId = `${inputId}-config`;
  const file = h("input", { id: fileId, type: "file", accept: ".json,application/json" });
  const paste = h("textarea", { id: pasteId, spellcheck: "false", placeholder: '{"model_type": "llama", "hidden_size": 4096, …}' });
  const chip = h("div", { className: "chip", hidden: true });
  const useConfig = (text, source) => {
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      showError({ field: "model_config", message: `not valid JSON: ${error.message}` });
      return;
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
      showError({ field: "model_config", message: "must be a JSON object (the contents of config.json)" });
      return;
    }
    state.config = parsed;
    const name = String(parsed._name_or_path || source || "custom model").slice(0, 120);
    state.values.model = name;
    showConfig();
    schedule(0);
  };
  const showConfig = () => {
    const on = Boolean(state.config);
    chip.hidden = !on;
    input.disabled = on;
    input.value = state.values.model || "";
    chip.replaceChildren(
      h("span", { text: `Using your config.json (${state.values.model})` }),
      h("button", {
        type: "button", className: "btn btn-small", text: "Remove", "aria-label": "Stop using the uploaded config",
        onclick: () => {
          state.config = null;
          paste.value = "";
          file.value = "";
          state.values.model = asText(state.fields.model.default);
          showConfig();
          schedule(0);
        },
      }),
    );
  };
  file.addEventListener("change", async () => {
    if (file.files && file.files[0]) useConfig(await file.files[0].text(), "");
  });
  const upload = h("details", { className: "upload" },
    h("summary", { text: "Use your own config.json" }),
    h("div", { className: "field" }, h("label", { for: fileId, text: "Upload config.json" }), file),
    h("div", { className: "field" }, h("label", { for: pasteId, text: "or paste its contents" }), paste,
      h("div", { className: "btns" },
        h("button", { type: "button", className: "btn", text: "Use pasted config", onclick: () => useConfig(paste.value, "") }))),
  );
  if (state.config) {
    upload.open = true;
    paste.value = JSON.stringify(state.config, null, 2);
  }
  const node = h("div", {}, h("div", { className: "combo" }, input, list), chip);
  return {
    node, focus: input, showConfig, after: upload,
    get: () => state.values.model,
    set: (text) => { input.value = text; showConfig(); },
  };
}

export function makeControl(field) {
  const inputId = `f-${field.name.replace(/\./g, "-")}`;
  const kinds = {
    model: modelControl, gpu: gpuControl, region: regionControl, segmented: segmentedControl,
    targets: targetsControl, checkbox: checkboxControl, number: numberControl,
    select: (f, id) => selectControl(f, id, f.choices),
  };
  const control = (kinds[field.widget] || numberControl)(field, inputId);
  if (field.widget === "text") {
    control.node.setAttribute("inputmode", "text");
    control.node.placeholder = field.placeholder || "";
  }
  state.controls[field.name] = control;
  return fieldShell(field, control.node, inputId, { noLabel: control.noLabel, after: control.after });
}
