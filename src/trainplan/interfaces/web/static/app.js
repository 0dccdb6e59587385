// trainplan web calculator. Builds the form from /api/fields and renders /api/estimate's JSON.
// No formulas here: every figure comes from the server; this file only formats and draws.
"use strict";
(() => {
  const GIB = 1024 ** 3;
  // Every label, placeholder, choice name, budget mode and short name comes from /api/fields
  // (the engine's field table, scenario.FieldInfo): this file names no field's words.
  const COLORS = ["#3b5bdb", "#0ca678", "#f08c00", "#ae3ec9", "#e03131", "#1098ad", "#868e96", "#5c940d", "#d6336c"];

  const state = {
    meta: null, fields: {}, values: {}, controls: {}, config: null,
    models: [], gpus: [], regions: [], result: null, seq: 0, controller: null, timer: 0, chart: null,
    plan: null, planChart: null,
    // the fields someone set (a control, the link, a config, a plan): under a recipe, one of them
    // at its default is still sent, since the recipe would fill it otherwise
    stated: new Set(),
  };

  // ---------- small helpers ----------
  const $ = (id) => document.getElementById(id);
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }
  const nf2 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const nf1 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
  const nf0 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });
  const gib = (bytes) => `${nf2.format(bytes / GIB)} GiB`;
  const usd = (value) =>
    new Intl.NumberFormat("en-US", {
      style: "currency", currency: "USD", maximumFractionDigits: Math.abs(value) < 100 ? 2 : 0,
    }).format(value);
  // a share that rounds to nothing is "0%", never "-0%" (a saving too small to show)
  const share = (percent) => `${nf0.format(Math.round(percent) || 0)}%`;
  const seconds = (value) => (value >= 100 ? `${nf0.format(value)} s` : `${value.toPrecision(3)} s`);
  const normalise = (text) => String(text).toLowerCase().replace(/[\s_\-/]+/g, "");
  // A field's label, from the field table; a name the table does not hold (a key of a pasted
  // config, a query parameter) is shown as it is.
  const fieldLabel = (name) => (state.fields[name] ? state.fields[name].label : name);
  // "Micro-batch (micro_batch): " before a message that names a field on the form
  const fieldPrefix = (name) => (state.fields[name] ? `${state.fields[name].label} (${name}): ` : `${name}: `);
  // how the form names a choice of a field (`choice_labels`), else the choice itself
  const choiceLabel = (name, choice) => {
    const names = (state.fields[name] && state.fields[name].choice_labels) || {};
    return names[choice] || choice;
  };
  function asText(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "boolean") return value ? "true" : "false";
    if (Array.isArray(value)) return value.join(",");
    return String(value);
  }
  // A value the request and the link leave out, so that the server fills it as the command's
  // reader does: one at its default, unless someone set it under a recipe (which would fill it).
  function leftOut(name, text) {
    const field = state.fields[name];
    if (!field || !isDefault(field, text)) return false;
    return !(state.values.recipe && state.stated.has(name));
  }
  function isDefault(field, text) {
    const def = asText(field.default);
    if (text === def) return true;
    if ((field.kind === "int" || field.kind === "float") && text !== "" && def !== "") {
      return Number(text) === Number(def);
    }
    return false;
  }
  async function getJSON(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.json();
  }
  function b64encode(text) {
    const bytes = new TextEncoder().encode(text);
    let binary = "";
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function b64decode(text) {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
  }

  // ---------- URL <-> scenario ----------
  function readUrl() {
    const values = {};
    const params = new URLSearchParams(location.search);
    for (const [key, value] of params) {
      if (key === "config") {
        try {
          const parsed = JSON.parse(b64decode(value));
          if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) state.config = parsed;
        } catch (error) {
          console.warn("ignoring an unreadable config in the link", error);
        }
      } else {
        values[key] = value;
      }
    }
    return values;
  }
  function shareUrl() {
    const params = new URLSearchParams();
    params.set("model", state.values.model || "");
    for (const field of state.meta.fields) {
      const text = state.values[field.name];
      if (field.name === "model" || text === undefined || text === "" || leftOut(field.name, text)) continue;
      params.set(field.name, text);
    }
    let note = false;
    if (state.config) {
      const encoded = b64encode(JSON.stringify(state.config));
      if (encoded.length <= 8000) params.set("config", encoded);
      else note = true;
    }
    return { url: `${location.pathname}?${params.toString().replace(/%2F/g, "/")}`, note };
  }
  function writeUrl() {
    if (!state.meta) return;
    const { url } = shareUrl();
    history.replaceState(null, "", url);
    $("share-link").value = location.origin + url;
  }

  // ---------- requests ----------
  // The selected model's kind: from the catalog list, else from the last answer (a pasted
  // config or a Hub id), else a language model.
  function modelKind() {
    const name = normalise(state.values.model || "");
    const record = state.models.find((item) =>
      [item.name, item.hub_id, ...(item.aliases || [])].some((key) => key && normalise(key) === name));
    if (record && record.kind) return record.kind;
    if (state.result && state.result.model && normalise(state.result.model.name) === name && state.result.sample) {
      return state.result.sample.frames > 1 ? "video" : "diffusion";
    }
    return state.config && state.config._class_name ? "diffusion" : "llm";
  }
  // Which model kinds a field applies to is the field table's (/api/fields `families`).
  function appliesTo(name, kind) {
    const field = state.fields[name];
    return !field || !field.families || field.families.includes(kind);
  }
  // ... and which methods (`methods`: the LoRA parts, the base weights, kbit_upcast)
  function appliesToMethod(name, method) {
    const field = state.fields[name];
    return !field || !field.methods || field.methods.includes(method);
  }
  function buildBody(values) {
    const body = {};
    // before the catalog has loaded (the first request, from the link) nothing is dropped
    const kind = state.models.length ? modelKind() : null;
    for (const [name, text] of Object.entries(values)) {
      if (text === "" || text === undefined || text === null) continue;
      if (kind && !appliesTo(name, kind)) continue;
      if (name !== "model" && leftOut(name, text)) continue;
      if (name.startsWith("lora.")) (body.lora ||= {})[name.slice(5)] = text;
      else body[name] = text;
    }
    if (state.config) body[state.meta ? state.meta.model_config_key : "model_config"] = state.config;
    return body;
  }
  function schedule(delay) {
    clearTimeout(state.timer);
    state.timer = setTimeout(update, delay);
  }
  function update() {
    writeUrl();
    forgetLargest();
    if (!String(state.values.model || "").trim() && !state.config) {
      if (state.controller) state.controller.abort();
      state.seq++;
      showChooseModel();
      return;
    }
    send(buildBody(state.values));
  }
  async function send(body) {
    const seq = ++state.seq;
    if (state.controller) state.controller.abort();
    const controller = new AbortController();
    state.controller = controller;
    const results = $("results");
    results.classList.add("stale");
    results.setAttribute("aria-busy", "true");
    document.body.dataset.state = "loading";
    let data;
    let ok = false;
    try {
      const response = await fetch("/api/estimate", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body), signal: controller.signal,
      });
      data = await response.json();
      ok = response.ok;
    } catch (error) {
      if (error.name === "AbortError") return;
      data = { field: null, message: `could not reach the server (${error.message})` };
    }
    if (seq !== state.seq) return;
    results.setAttribute("aria-busy", "false");
    if (!ok) {
      showError(data);
      document.body.dataset.state = "error";
      return;
    }
    clearErrors();
    results.classList.remove("stale");
    state.result = data;
    render(data);
    document.body.dataset.state = "ready";
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
    if (document.body.dataset.renders === "1") performance.mark("trainplan:first-result");
  }

  // ---------- errors ----------
  function controlFor(field) {
    if (!field) return null;
    if (field.startsWith("model_config")) return { name: "model", node: $("f-model-config") };
    if (state.controls[field]) return { name: field, node: state.controls[field].focus };
    return null;
  }
  // An error is shown once: under the field it names (with its "Did you mean" choices), or in
  // the banner when it names no field on the form. The summary bar only points at it.
  function showError(data) {
    clearErrors();
    state.error = data; // shown again in its field once the form is built (the first answer can come first)
    const message = data.message || "the server refused this scenario";
    const target = controlFor(data.field);
    const wrapper = target && document.querySelector(`[data-field="${target.name}"]`);
    const slot = wrapper && wrapper.querySelector(".field-error");
    const place = slot || $("error");
    place.textContent = slot ? message : `${data.field ? fieldPrefix(data.field) : ""}${message}`;
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
    const where = slot ? fieldLabel(target.name) : "the message above the results";
    $("summary").replaceChildren(h("span", { className: "nofit", text: `Needs a fix: see ${where}` }));
  }
  // No model chosen (the box was cleared): say so, and show no figures for a model nobody picked.
  function showChooseModel() {
    clearErrors();
    const slot = document.querySelector('[data-field="model"] .field-error');
    if (slot) slot.textContent = "choose a model: search the catalog, type a Hub id, or use a config.json";
    if (state.controls.model) state.controls.model.focus.setAttribute("aria-invalid", "true");
    $("results").classList.add("stale");
    document.body.dataset.state = "choose-model";
    $("summary").replaceChildren(h("span", { className: "nofit", text: "Choose a model to see the estimate" }));
  }
  function clearErrors() {
    state.error = null;
    $("error").hidden = true;
    for (const slot of document.querySelectorAll(".field-error")) slot.textContent = "";
    for (const node of document.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  }

  // ---------- controls ----------
  function onEdit(name, value, delay) {
    state.values[name] = value;
    state.stated.add(name);
    if (name === "model") followKind();
    if (name === "method") {
      // a full fine-tune has no frozen base: its precision setting no longer applies
      if (value === "full" && state.values.base_weights) setValue("base_weights", "", false);
      applyVisibility();
    }
    schedule(delay);
  }
  function setValue(name, value, now) {
    const text = asText(value);
    state.values[name] = text;
    state.stated.add(name);
    if (state.controls[name]) state.controls[name].set(text);
    applyVisibility();
    if (now) schedule(0);
  }
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
    for (const choice of choices) select.append(h("option", { value: choice, text: choiceLabel(field.name, choice) }));
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
      group.append(h("label", {}, radio, h("span", { text: choiceLabel(field.name, choice) })));
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
  function groupBy(items, key) {
    const groups = new Map();
    for (const item of items) {
      if (!groups.has(item[key])) groups.set(item[key], []);
      groups.get(item[key]).push(item);
    }
    return [...groups.entries()];
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

  function makeControl(field) {
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

  // The training-budget modes (/api/fields `budget_modes`) and each field's mode (`budget`)
  const budgetFields = (mode) => state.meta.fields.filter((field) => field.budget === mode);
  function budgetModeControl() {
    const group = h("div", { className: "segmented", role: "radiogroup", "aria-labelledby": "budget-mode-label" });
    // the mode whose own (unset by default) fields hold a value, else the first
    const given = state.meta.budget_modes.filter(({ id }) =>
      budgetFields(id).some((field) => field.nullable && state.values[field.name]));
    const current = (given.length ? given[given.length - 1] : state.meta.budget_modes[0]).id;
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
    const kind = modelKind();
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
  function applyVisibility() {
    const kind = modelKind();
    document.body.dataset.kind = kind;
    const method = state.values.method;
    for (const field of state.meta.fields) {
      const node = document.querySelector(`[data-field="${field.name}"]`);
      if (node) node.hidden = !appliesTo(field.name, kind) || !appliesToMethod(field.name, method);
    }
    const sample = document.querySelector('[data-section="sample"]');
    if (sample) sample.hidden = kind === "llm";
    const checked = document.querySelector('input[name="budget-mode"]:checked');
    if (checked) {
      for (const field of state.meta.fields) {
        const node = field.budget && document.querySelector(`[data-field="${field.name}"]`);
        if (node) node.hidden = field.budget !== checked.value || !appliesTo(field.name, kind);
      }
    }
  }

  function buildForm() {
    const form = $("controls");
    form.replaceChildren();
    form.addEventListener("submit", (event) => event.preventDefault());
    const reset = h("button", {
      type: "button", className: "btn btn-small", text: "Reset to defaults",
      onclick: () => {
        state.config = null;
        state.values = defaults();
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

  function defaults() {
    const values = {};
    for (const field of state.meta.fields) values[field.name] = asText(field.default);
    return values;
  }

  // ---------- rendering ----------
  function capacityOf(result) {
    return result.fit.find((row) => row.gpu === result.gpu);
  }
  function render(result) {
    const display = result.display;
    const row = capacityOf(result);
    const fits = row ? row.fits : false;

    // summary strip
    const summary = [h("span", { text: `${display.total} per GPU` }), h("span", { className: "sep", text: "·" })];
    if (row) {
      summary.push(h("span", {
        className: fits ? "fits" : "nofit",
        text: display.fit_verdict,
      }));
    }
    if (display.duration) {
      const tokens = display.budget ? ` for ${display.budget}` : "";
      summary.push(h("span", { className: "sep", text: "·" }), h("span", { text: `${display.duration}${tokens}` }));
    }
    if (display.usd) summary.push(h("span", { className: "sep", text: "·" }), h("span", { text: display.usd }));
    $("summary").replaceChildren(...summary);

    // headline cards
    $("total").textContent = display.total;
    const totalCard = $("total").closest(".card");
    totalCard.classList.toggle("fits", fits);
    totalCard.classList.toggle("nofit", !fits);
    $("total-detail").replaceChildren(
      h("span", { className: `badge ${fits ? "ok" : "no"}`, text: fits ? "fits" : "does not fit" }),
      ` ${row ? `${row.gpu} holds ${gib(row.memory_bytes)}` : ""}; peak during ${result.memory.peak_phase}`,
    );
    $("trainable").textContent = display.trainable;
    $("trainable-detail").textContent = display.trainable_detail;
    $("weights").textContent = display.weights;
    $("weights-detail").textContent = display.weights_detail;
    $("batch-line").textContent = display.batch_line;

    renderBreakdown(result, row);
    renderHints(result);
    renderFit(result);
    renderRun(result);
    renderShare(result);
    showRecipeValues(result);
    planLabels(result);
    largestLabels(result);
  }

  // A recipe's values show in the controls it fills (the request leaves those fields to the
  // recipe, as the command does): each shows the recipe's value, marked as the recipe's; without
  // a recipe, or once someone sets the field, the control shows the form's own value again.
  function showRecipeValues(result) {
    if (!state.meta) return; // the first answer can come before the form
    const recipe = result.assumptions && result.assumptions.recipe;
    const filled = (recipe && recipe.defaults) || {};
    for (const field of state.meta.fields) {
      const control = state.controls[field.name];
      const wrapper = document.querySelector(`[data-field="${field.name}"]`);
      if (!control || !wrapper) continue;
      const own = state.values[field.name] ?? "";
      const lent = recipe && field.name in filled && leftOut(field.name, own);
      let mark = wrapper.querySelector(".from-recipe");
      if (lent) {
        control.set(asText(filled[field.name]));
        if (!mark) {
          mark = h("span", { className: "from-recipe" });
          wrapper.querySelector(".help").before(mark);
        }
        mark.textContent = `from the ${recipe.name} recipe (the default is ${choiceLabel(field.name, asText(field.default)) || "auto"})`;
        wrapper.dataset.recipe = recipe.name;
      } else if (wrapper.dataset.recipe) {
        control.set(own);
        if (mark) mark.remove();
        delete wrapper.dataset.recipe;
      }
    }
  }

  function renderBreakdown(result, row) {
    const perGpu = result.memory.per_gpu;
    const terms = Object.keys(perGpu.kinds);
    $("terms").tBodies[0].replaceChildren(...terms.map((term) =>
      h("tr", { "data-term": term },
        h("th", { scope: "row", text: term }),
        h("td", { className: "num", text: nf2.format(perGpu[`${term}_bytes`] / GIB) }),
        h("td", {}, h("span", { className: `badge ${perGpu.kinds[term]}`, text: perGpu.kinds[term] })),
        h("td", { text: perGpu.notes[term] }))));
    $("terms-total").textContent = nf2.format(perGpu.total_bytes / GIB);
    $("breakdown-caption").textContent =
      `Each bar is one moment of a training step on the busiest GPU; the peak (${result.memory.peak_phase}) sets the total.` +
      (row ? ` The dashed line is the ${row.gpu}'s ${gib(row.memory_bytes)}.` : "");
    const offload = $("offload-note");
    offload.hidden = !result.memory.cpu_offload_bytes;
    offload.textContent = `CPU memory for offloaded state: ${gib(result.memory.cpu_offload_bytes)} per GPU.`;
    // the three figures: the device's used memory (the total, on which fits is decided), the
    // caching allocator's pool (max_memory_reserved) and the live tensors (max_memory_allocated)
    $("allocated-note").textContent = `The total is the GPU's used memory, as nvidia-smi shows it. Of it, the caching allocator reserves ${gib(result.memory.reserved_peak_bytes)} (what torch.cuda.max_memory_reserved() reports), and live tensors take ${gib(result.memory.allocated_peak_bytes)} (torch.cuda.max_memory_allocated()).${deviceText(result.memory.device_overhead)}`;
    const paged = $("paged-note");
    paged.hidden = !result.memory.paged_bytes;
    paged.textContent = `Paged optimizer state in unified memory, outside the total: ${gib(result.memory.paged_bytes)} per GPU (the driver pages it to the host when the GPU runs short).`;
    renderChart(result, terms, row);
  }

  // the memory outside the caching allocator by part, as a sentence ("" for a flat figure)
  function deviceText(device) {
    if (!device || device.flat_bytes) return "";
    const nccl = device.communicators
      ? `, NCCL buffers ${gib(device.nccl_bytes)} (${device.communicators} communicator${device.communicators > 1 ? "s" : ""})`
      : "";
    return ` Outside the allocator: CUDA context ${gib(device.context_bytes)}, cuBLAS workspace ${gib(device.workspace_bytes)}${nccl}.`;
  }

  function stripes(color) {
    const tile = document.createElement("canvas");
    tile.width = 8;
    tile.height = 8;
    const ctx = tile.getContext("2d");
    ctx.fillStyle = `${color}40`;
    ctx.fillRect(0, 0, 8, 8);
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(-2, 10);
    ctx.lineTo(10, -2);
    ctx.moveTo(-2, 2);
    ctx.lineTo(2, -2);
    ctx.moveTo(6, 10);
    ctx.lineTo(10, 6);
    ctx.stroke();
    return ctx.createPattern(tile, "repeat");
  }

  const capacityLine = {
    id: "capacityLine",
    afterDatasetsDraw(chart, args, options) {
      if (!options.bytes) return;
      const x = chart.scales.x.getPixelForValue(options.bytes / GIB);
      const { top, bottom } = chart.chartArea;
      const ctx = chart.ctx;
      ctx.save();
      ctx.strokeStyle = options.color;
      ctx.setLineDash([5, 4]);
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      ctx.restore();
    },
  };

  function renderChart(result, terms, row) {
    const canvas = $("memory-chart");
    if (window.Chart) {
      drawChart(window.Chart, canvas, result, terms, row);
    } else {
      // The chart library is missing (not built) or failed to load: the table has every figure.
      $("chart-missing").hidden = false;
      canvas.parentElement.hidden = true;
    }
    document.body.dataset.chart = String(Number(document.body.dataset.renders || 0) + 1);
    if (!performance.getEntriesByName("trainplan:first-chart").length) performance.mark("trainplan:first-chart");
  }

  function drawChart(Chart, canvas, result, terms, row) {
    const styles = getComputedStyle(document.body);
    const ink = styles.getPropertyValue("--muted").trim() || "#555";
    const line = styles.getPropertyValue("--line").trim() || "#ddd";
    const phases = Object.keys(result.memory.phases);
    const labels = phases.map((phase) => (phase === result.memory.peak_phase ? `${phase} (peak)` : phase));
    const kinds = result.memory.per_gpu.kinds;
    const datasets = terms.map((term, index) => {
      const color = COLORS[index % COLORS.length];
      return {
        label: `${term} (${kinds[term]})`,
        data: phases.map((phase) => (result.memory.phases[phase][`${term}_bytes`] || 0) / GIB),
        backgroundColor: kinds[term] === "exact" ? color : stripes(color),
        borderColor: color, borderWidth: 1, stack: "memory",
      };
    });
    const capacity = row ? row.memory_bytes : 0;
    const peak = result.memory.per_gpu.total_bytes;
    const options = {
      indexAxis: "y", animation: false, responsive: true, maintainAspectRatio: false,
      scales: {
        x: { stacked: true, suggestedMax: Math.max(capacity, peak) / GIB * 1.04, title: { display: true, text: "GiB per GPU", color: ink }, ticks: { color: ink }, grid: { color: line } },
        y: { stacked: true, ticks: { color: ink }, grid: { display: false } },
      },
      plugins: {
        legend: { position: "bottom", labels: { boxWidth: 14, color: ink } },
        tooltip: { callbacks: { label: (ctx) => `${ctx.dataset.label}: ${nf2.format(ctx.parsed.x)} GiB` } },
        capacityLine: { bytes: capacity, color: styles.getPropertyValue("--bad").trim() || "#b42318" },
      },
    };
    if (!state.chart) {
      state.chart = new Chart(canvas, { type: "bar", data: { labels, datasets }, options, plugins: [capacityLine] });
    } else {
      state.chart.data.labels = labels;
      state.chart.data.datasets = datasets;
      state.chart.options = options;
      state.chart.update("none");
    }
  }

  function renderHints(result) {
    const list = $("hints");
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
    list.replaceChildren(...items);
    $("notes").replaceChildren(...result.display.notes.map((text) => h("li", { text })));
  }

  function applyChange(change) {
    for (const [name, value] of Object.entries(change)) setValue(name, value, false);
    const checked = document.querySelector('input[name="budget-mode"]:checked');
    if (checked) applyVisibility();
    schedule(0);
  }

  function renderFit(result) {
    $("fit-summary").textContent = result.display.fit_summary;
    const groups = groupBy(result.fit, "class").map(([cls, rows]) =>
      h("div", { className: "fit-group" },
        h("h3", { text: result.display.fit_groups[cls] }),
        h("ul", { className: "fit-list", "aria-label": `${cls} GPUs` }, rows.map((row) =>
          h("li", { className: row.gpu === result.gpu ? "current" : "", "data-gpu": row.gpu, "data-fits": String(row.fits) },
            h("div", { className: "gpu-line" },
              h("button", {
                type: "button", className: "gpu-name", text: row.gpu, title: `${row.gpu}: use this GPU`,
                "aria-label": `${row.gpu}: use this GPU`, onclick: () => setValue("gpu", row.gpu, true),
              }),
              h("span", { className: "mark", text: row.fits ? "✓ fits" : "✗ no" })),
            h("div", { className: "gpu-mem" },
              `${gib(row.memory_bytes)} · `,
              h("span", {
                className: `free${row.fits ? "" : " short"}`,
                text: result.display.fit_free[row.gpu],
              })))))));
    $("fit").replaceChildren(...groups);
  }

  function card(title, value, detail, id) {
    return h("article", { className: "card", "data-card": id },
      h("h3", { text: title }), h("p", { className: "big", text: value }), h("p", { className: "muted", text: detail }));
  }

  function renderRun(result) {
    const { time, cost, energy, load, display, scenario } = result;
    const cards = [];
    if (time) {
      const what = result.sample ? (result.sample.frames > 1 ? "clips" : "images") : null;
      cards.push(card("Time", display.duration,
        `${nf0.format(time.steps)} steps × ${seconds(time.step_s)}; ${display.budget}; plus fixed per run ${display.fixed}`, "time"));
      cards.push(card("GPU-hours", nf1.format(time.gpu_hours), `${scenario.gpus} × ${result.gpu}`, "gpu_hours"));
      cards.push(what
        ? card("Throughput", `${nf2.format(time.samples_per_s_per_gpu)} ${what}/s`, `per GPU; MFU ${nf1.format(time.mfu * 100)}%; ${time.compute_precision} peak`, "throughput")
        : card("Throughput", `${compact.format(time.tokens_per_s)} tok/s`, `MFU ${nf1.format(time.mfu * 100)}%; ${time.compute_precision} peak`, "throughput"));
    } else {
      cards.push(card("Time", "–", display.no_time, "time"));
    }
    if (cost) {
      const fixed = display.fixed_usd ? `; ${display.fixed_usd} of it fixed per run` : "";
      cards.push(card("Cost", display.usd || "–", `${display.cost_detail}${fixed}`, "cost"));
    }
    if (energy && energy.kwh !== null) {
      cards.push(card("Energy", `${nf0.format(energy.run_kwh)} kWh`, `PUE ${energy.pue ?? result.assumptions.pue}; ${nf0.format(energy.gpu_power_w || 0)} W per GPU while training, idle draw outside the steps`, "energy"));
      cards.push(card("CO2e", `${nf1.format(energy.run_co2e_kg)} kg`, `${energy.region}: ${nf0.format(energy.gco2e_per_kwh)} g/kWh`, "co2"));
    }
    if (load) cards.push(card("Load weights", display.load_duration, `from ${load.source}, ${display.load_mode}`, "load"));
    $("run-cards").replaceChildren(...cards);
    renderQuotes(result);

    const steps = time ? Object.entries(time.step_breakdown_s) : [];
    $("step-table").tBodies[0].replaceChildren(...steps.map(([part, value]) =>
      h("tr", {}, h("th", { scope: "row", text: part.replace(/_/g, " ") }),
        h("td", { className: "num", text: `${seconds(value)}${time.step_s ? ` (${share((100 * value) / time.step_s)})` : ""}` }))));
    const entries = Object.entries(result.assumptions).filter(([, value]) => value !== null && typeof value !== "object");
    const short = entries.filter(([, value]) => asText(value).length <= 48);
    const long = entries.filter(([, value]) => asText(value).length > 48);
    $("assumptions").tBodies[0].replaceChildren(...short.map(([key, value]) =>
      h("tr", {}, h("th", { scope: "row", text: key.replace(/_/g, " ") }),
        h("td", { text: assumption(key, value) }))));
    const sources = $("sources");
    sources.hidden = !long.length;
    sources.querySelector("dl").replaceChildren(...long.flatMap(([key, value]) =>
      [h("dt", { text: key.replace(/_/g, " ") }), h("dd", { text: asText(value) })]));
  }

  // ---------- the quotes behind a catalog price (GET /api/prices) ----------
  const quoteCache = new Map();
  async function renderQuotes(result) {
    const box = $("price-quotes");
    const cost = result.cost;
    if (!cost || cost.quotes === null || cost.quotes === undefined) {
      box.hidden = true;
      return;
    }
    let data = quoteCache.get(result.gpu);
    try {
      if (!data) {
        data = await getJSON(`/api/prices?gpu=${encodeURIComponent(result.gpu)}`);
        quoteCache.set(result.gpu, data);
      }
    } catch {
      box.hidden = true;
      return;
    }
    const price = data.prices[0];
    if (!price || state.result !== result) return;
    const stale = price.stale ? `; stale: the newest quote is from ${price.as_of}` : "";
    $("price-basis").textContent = `${usd(price.usd_per_gpu_hour)}/GPU-h on-demand for ${price.gpu}, an estimate: ${price.basis}${stale}. Your own rate overrides it.`;
    $("price-table").tBodies[0].replaceChildren(...price.quotes.map((quote) =>
      h("tr", { "data-stale": String(quote.stale) },
        h("th", { scope: "row", text: `${quote.provider} (${quote.provider_class})` }),
        h("td", { text: quote.offering + (quote.in_median ? "" : " (not in the median)") }),
        h("td", { className: "num", text: usd(quote.usd_per_gpu_hour) }),
        h("td", { text: quote.date + (quote.stale ? " (stale)" : "") }),
        h("td", { text: quote.source }))));
    box.hidden = false;
  }

  function assumption(key, value) {
    if (typeof value !== "number") return asText(value);
    if (key.endsWith("_bytes")) return gib(value);
    return Number.isInteger(value) ? nf0.format(value) : String(Number(value.toPrecision(4)));
  }

  function renderShare(result) {
    $("cli-command").value = result.display.cli;
    $("cli-note").hidden = !state.config;
  }

  // ---------- share buttons ----------
  function wireShare() {
    for (const button of document.querySelectorAll("[data-copy]")) {
      button.addEventListener("click", async () => {
        const input = $(button.dataset.copy);
        const original = button.textContent;
        try {
          await navigator.clipboard.writeText(input.value);
        } catch {
          input.select();
          document.execCommand("copy");
        }
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = original; }, 1500);
      });
    }
    $("download-json").addEventListener("click", () => {
      if (!state.result) return;
      const blob = new Blob([JSON.stringify(state.result, null, 2)], { type: "application/json" });
      const link = h("a", {
        href: URL.createObjectURL(blob),
        download: `trainplan-${String(state.result.model.name).replace(/[^A-Za-z0-9._-]+/g, "_")}.json`,
      });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    });
  }

  // ---------- "Largest that fits": POST /api/estimate?max=FIELD ----------
  // the fields the server can maximise (/api/fields `max_fields`), each named by its short label
  const largestId = (field) => `largest-${field.replace(/_/g, "-")}`;
  function buildLargest() {
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
  // Memory left free by "Largest that fits": the estimate cannot see fragmentation spikes.
  const HEADROOMS = [["0", "0% (exact limit)"], ["0.05", "5%"], ["0.1", "10%"], ["0.2", "20%"]];
  function largestLabels(result) {
    for (const node of document.querySelectorAll(".largest-gpu")) node.textContent = result.gpu;
  }
  function forgetLargest() {
    // an answer stays on screen only while the scenario it was found for is in the controls
    for (const box of document.querySelectorAll(".largest[data-sent]")) {
      if (box.dataset.state === "busy" || JSON.stringify(largestBody(box.dataset.largest)) === box.dataset.sent) continue;
      box.querySelector(".largest-status").textContent = "";
      delete box.dataset.sent;
      box.dataset.state = "idle";
    }
  }
  function largestBody(field) {
    // the field being searched is replaced by the answer: a bad value there is no obstacle
    const body = buildBody(state.values);
    delete body[field];
    return body;
  }
  async function findLargest(field) {
    const id = largestId(field);
    const button = $(id);
    const status = $(`${id}-status`);
    const box = button.closest(".largest");
    if (box.dataset.state === "busy" || !state.meta) return;
    const body = largestBody(field);
    const sent = JSON.stringify(body);
    box.dataset.state = "busy";
    box.dataset.sent = sent;
    button.setAttribute("aria-disabled", "true");
    button.classList.add("busy");
    status.className = "largest-status";
    status.textContent = "Searching…";
    let data;
    let ok = false;
    try {
      const headroom = $(`${id}-headroom`).value;
      const query = `max=${encodeURIComponent(field)}&headroom=${encodeURIComponent(headroom)}&hints=false`;
      const response = await fetch(`/api/estimate?${query}`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: sent,
      });
      data = await response.json();
      ok = response.ok;
    } catch (error) {
      data = { field: null, message: `could not reach the server (${error.message})` };
    }
    button.removeAttribute("aria-disabled");
    button.classList.remove("busy");
    if (!ok) {
      let text;
      if (data.field === "max") {
        const message = String(data.message || "");
        text = message.charAt(0).toUpperCase() + message.slice(1);
      } else if (data.field) {
        text = `Fix the calculator first: ${fieldPrefix(data.field)}${data.message}`;
      } else {
        text = data.message || "the server could not answer";
      }
      status.className = "largest-status nofit";
      status.textContent = text;
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

  // ---------- the planner: "Plan it for me" ----------
  const PLAN_INPUTS = {
    objective: "plan-objective", methods: "plan-methods", max_gpus: "plan-max-gpus",
    target_global_tokens: "plan-target-tokens", budget_usd: "plan-budget", deadline_hours: "plan-deadline",
    gpu_types: "plan-gpu-types",
  };
  // labels, defaults and the server's caps of the planner's options come from /api/fields
  const planOption = (key) => (state.meta && state.meta.plan_options.find((option) => option.name === key)) || null;

  function gpuBoxes() {
    return [...document.querySelectorAll("#plan-gpu-list input[type=checkbox]")];
  }
  function buildPlanner() {
    // each option's label is its declaration's (/api/fields `plan_options`)
    for (const node of document.querySelectorAll("[data-plan-field]")) {
      const option = planOption(node.dataset.planField);
      const title = node.querySelector(":scope > label, :scope > .label, :scope > legend");
      if (option && title) title.textContent = option.label;
      // the short help under the control and the placeholder are the declaration's too
      const help = option && node.querySelector(":scope > .help");
      if (help && option.form_help) help.textContent = option.form_help;
      const box = option && node.querySelector(":scope > input[type=text]");
      if (box && option.placeholder) box.placeholder = option.placeholder;
    }
    const objective = planOption("objective");
    $(PLAN_INPUTS.objective).replaceChildren(...objective.choices.map((value) =>
      h("option", { value, selected: value === objective.default, text: objective.choice_labels[value] })));
    for (const [key, id] of Object.entries(PLAN_INPUTS)) {
      const option = planOption(key);
      const input = $(id);
      if (!option || !input || input.tagName !== "INPUT" || input.type !== "text") continue;
      if (option.default !== null && !input.value) input.value = String(option.default);
      const help = $(`${id}-help`);
      if (help && option.maximum !== null) help.textContent += `; at most ${nf0.format(option.maximum)}`;
    }
    const list = $("plan-gpu-list");
    // every catalog GPU, consumer to datacenter; the planner's default set is checked (the
    // priced NVIDIA and AMD GPUs: /api/gpus `planned_by_default`)
    list.replaceChildren(...state.gpus.map((gpu, index) => {
      const id = `plan-gpu-${index}`;
      return h("label", { className: "check plan-gpu", for: id },
        h("input", { type: "checkbox", id, value: gpu.name, checked: gpu.planned_by_default, "data-default": String(gpu.planned_by_default) }),
        h("span", {}, gpu.name, h("span", { className: "gpu-mem", text: ` ${nf0.format(gpu.memory_bytes / GIB)} GiB${gpu.has_price ? "" : " · no price"}` })));
    }));
    const pick = (test) => () => gpuBoxes().forEach((box) => { box.checked = test(box); });
    $("plan-gpus-default").addEventListener("click", pick((box) => box.dataset.default === "true"));
    $("plan-gpus-all").addEventListener("click", pick(() => true));
    $("plan-gpus-none").addEventListener("click", pick(() => false));
    $("plan-form").addEventListener("submit", (event) => {
      event.preventDefault();
      runPlan();
    });
    document.body.dataset.plan = "idle";
  }
  function planLabels(result) {
    // "This method" names the calculator's method; the target placeholder shows its global batch
    const method = result.scenario.method;
    $("plan-this-method").textContent = `This method (${choiceLabel("method", method)})`;
    $(PLAN_INPUTS.target_global_tokens).placeholder = `${nf0.format(result.batch.global_tokens)} (the calculator's)`;
  }
  function planOptions() {
    const options = { objective: $(PLAN_INPUTS.objective).value };
    if ($("plan-methods-any").checked) options.methods = "any";
    // every text box of the form (PLAN_INPUTS names each option's control once)
    for (const [key, id] of Object.entries(PLAN_INPUTS)) {
      const input = $(id);
      if (!input || input.tagName !== "INPUT" || input.type !== "text") continue;
      const text = input.value.trim().replace(/[$,\s]/g, "");
      if (text) options[key] = text;
    }
    options.gpu_types = gpuBoxes().filter((box) => box.checked).map((box) => box.value);
    return options;
  }
  function clearPlanErrors() {
    $("plan-error").hidden = true;
    for (const slot of document.querySelectorAll("#plan-form .field-error")) slot.textContent = "";
    for (const node of document.querySelectorAll("#plan-form [aria-invalid]")) node.removeAttribute("aria-invalid");
  }
  function showPlanError(data) {
    const field = data.field || "";
    const key = field.startsWith("plan.") ? field.slice(5) : "";
    const banner = $("plan-error");
    if (key) banner.textContent = `${(planOption(key) || {}).label || key} (${field}): ${data.message}`;
    else if (field) banner.textContent = `Fix the calculator first: ${fieldPrefix(field)}${data.message}`;
    else banner.textContent = data.message || "the server refused this plan";
    banner.hidden = false;
    const id = PLAN_INPUTS[key];
    if (!id) return;
    $(`${id}-error`).textContent = data.message;
    const input = $(id);
    if (input) input.setAttribute("aria-invalid", "true");
  }
  async function runPlan() {
    const button = $("plan-run");
    if (button.disabled || !state.meta) return;
    clearPlanErrors();
    const options = planOptions();
    if (!options.gpu_types.length) {
      showPlanError({ field: "plan.gpu_types", message: "pick at least one GPU type" });
      return;
    }
    const body = { ...buildBody(state.values), plan: options };
    const planner = $("planner");
    button.disabled = true;
    button.classList.add("busy");
    button.textContent = "Planning…";
    planner.setAttribute("aria-busy", "true");
    document.body.dataset.plan = "busy";
    $("plan-status").textContent = "Searching…";
    const start = performance.now();
    let data;
    let ok = false;
    try {
      const response = await fetch("/api/plan", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      data = await response.json();
      ok = response.ok;
    } catch (error) {
      data = { field: null, message: `could not reach the server (${error.message})` };
    }
    button.disabled = false;
    button.classList.remove("busy");
    button.textContent = "Plan";
    planner.setAttribute("aria-busy", "false");
    if (!ok) {
      $("plan-status").textContent = "";
      showPlanError(data);
      document.body.dataset.plan = "error";
      return;
    }
    const seconds = (performance.now() - start) / 1000;
    state.plan = data;
    renderPlan(data, body, seconds);
    document.body.dataset.plan = "ready";
    document.body.dataset.plans = String(Number(document.body.dataset.plans || 0) + 1);
  }
  // Plans with an earlier row's time and cost would look like duplicates: say what differs,
  // in the settings that have a short name (/api/fields `short_label`: the plan table's columns).
  const planSettings = () => state.meta.fields.filter((field) => field.short_label);
  function planFigures(item) {
    return [item.display.duration || "", item.display.usd || ""].join("|");
  }
  function sameFiguresAs(item, index, items) {
    const earlier = items.slice(0, index).findIndex((other) => planFigures(other) === planFigures(item));
    if (earlier < 0) return "";
    const differs = planSettings().filter((field) => items[earlier].scenario[field.name] !== item.scenario[field.name]);
    return `same time and cost as #${earlier + 1}; differs in ${differs.map((field) => field.short_label).join(", ") || "nothing shown"}`;
  }
  // The plan tables' columns, written once for both tables: the figures a reader compares come
  // first after the plan itself; on a phone each row is a card of labelled lines (app.css).
  const PLAN_COLUMNS = [
    { id: "rank", label: "#", num: true },
    { id: "plan", label: "Plan" },
    { id: "time", label: "Time", num: true },
    { id: "cost", label: "Cost", num: true },
    { id: "memory", label: "GiB/GPU", num: true },
    { id: "layout", label: "tp / pp / dp, ZeRO" },
    { id: "batch", label: "Micro × accum" },
    { id: "savers", label: "Checkpointing, offload" },
    { id: "kwh", label: "kWh", num: true },
    { id: "use", label: "Action", hidden: true },
  ];
  function planHead() {
    return h("tr", {}, PLAN_COLUMNS.map((column) => h("th", { scope: "col", className: column.num ? "num" : null, "data-col": column.id },
      column.hidden ? h("span", { className: "visually-hidden", text: column.label }) : column.label)));
  }
  function planRow(item, index, list, items) {
    const { scenario, estimate, display } = item;
    const what = `${choiceLabel("method", scenario.method)} on ${scenario.gpus} × ${scenario.gpu}`;
    const same = sameFiguresAs(item, index, items);
    const cells = {
      rank: String(index + 1),
      plan: [h("span", { className: "plan-method", text: choiceLabel("method", scenario.method) }), " ",
        h("span", { className: "plan-hw", text: `${scenario.gpus} × ${scenario.gpu}` }),
        same ? h("div", { className: "plan-differs", text: same }) : ""],
      time: display.duration || "–",
      cost: display.usd || "–",
      // the device figure the fit is decided on, and under it the allocator's two
      memory: [h("span", { className: "plan-device", text: nf2.format(estimate.memory.per_gpu.total_bytes / GIB) }),
        h("div", { className: "plan-figures", text: `reserved ${nf2.format(estimate.memory.reserved_peak_bytes / GIB)} · allocated ${nf2.format(estimate.memory.allocated_peak_bytes / GIB)}` })],
      layout: `${scenario.tensor_parallel} / ${scenario.pipeline_parallel} / ${estimate.batch.replicas}, ZeRO ${scenario.zero_stage}`,
      batch: `${scenario.micro_batch} × ${scenario.grad_accum}`,
      savers: `${scenario.activation_checkpointing}, ${scenario.offload}`,
      kwh: display.kwh || "–",
      use: h("button", {
        type: "button", className: "btn btn-small use-plan", text: "Use this plan",
        "aria-label": `Use plan ${index + 1}: ${what}`, onclick: () => usePlan(item, index, list),
      }),
    };
    return h("tr", { "data-plan": String(index), "data-list": list }, PLAN_COLUMNS.map((column) => {
      const attrs = { className: column.num ? "num" : null, "data-col": column.id, "data-label": column.hidden ? null : column.label };
      const content = cells[column.id];
      return column.id === "plan"
        ? h("th", { ...attrs, scope: "row" }, content)
        : h("td", typeof content === "string" ? { ...attrs, text: content } : attrs, typeof content === "string" ? null : content);
    }));
  }
  function renderPlan(data, body, seconds) {
    const scenarioName = body.model || "the model";
    $("plan-status").textContent =
      `${nf0.format(data.candidates_evaluated)} candidates searched in ${nf1.format(seconds)} s for ${scenarioName}.`;
    $("plan-explanation").replaceChildren(...data.explanation.map((line) => h("li", { text: line })));
    $("plan-table-caption").textContent = data.display.heading;
    for (const id of ["plan-table", "plan-pareto-table"]) $(id).tHead.replaceChildren(planHead());
    $("plan-table").tBodies[0].replaceChildren(...data.plans.map((item, index) => planRow(item, index, "plans", data.plans)));
    $("plan-pareto-table").tBodies[0].replaceChildren(...data.pareto.map((item, index) => planRow(item, index, "pareto", data.pareto)));
    // reasons a user acts on (memory, budget, deadline, price) first; the search's own
    // bookkeeping (layouts that cannot exist) behind a toggle
    const entries = Object.entries(data.rejected).sort((a, b) => b[1] - a[1]);
    const internal = entries.filter(([reason]) => reason.startsWith("invalid:"));
    const actionable = entries.filter(([reason]) => !reason.startsWith("invalid:"));
    const row = ([reason, count]) =>
      h("tr", {}, h("th", { scope: "row", text: reason.replace(/^invalid: /, "") }), h("td", { className: "num", text: nf0.format(count) }));
    const actionTotal = actionable.reduce((sum, [, count]) => sum + count, 0);
    $("plan-rejected-title").textContent = actionTotal
      ? `Why ${nf0.format(actionTotal)} candidates were turned down`
      : "No candidate was turned down for memory, price, budget or deadline";
    $("plan-rejected").tBodies[0].replaceChildren(...actionable.map(row));
    const internalTotal = internal.reduce((sum, [, count]) => sum + count, 0);
    $("plan-internal-summary").textContent =
      `Search details: ${nf0.format(data.candidates_evaluated)} candidates evaluated, ${nf0.format(internalTotal)} impossible layouts skipped`;
    $("plan-internal").tBodies[0].replaceChildren(...internal.map(row));
    $("plan-results").hidden = false;
    renderPlanChart(data);
  }
  function renderPlanChart(data) {
    const canvas = $("plan-chart");
    const points = data.pareto
      .filter((item) => item.estimate.time && item.estimate.cost && item.estimate.cost.run_usd !== null)
      .map((item, index) => ({ x: item.estimate.time.run_s / 3600, y: item.estimate.cost.run_usd, index }));
    $("plan-chart-note").textContent = points.length
      ? `${points.length} plan${points.length === 1 ? "" : "s"} that no other beats on both time and cost. Click a point to use it.`
      : "No priced plan to draw.";
    canvas.parentElement.hidden = !points.length || !window.Chart;
    if (state.planChart) {
      state.planChart.destroy();
      state.planChart = null;
    }
    if (!points.length || !window.Chart) return;
    const styles = getComputedStyle(document.body);
    const ink = styles.getPropertyValue("--muted").trim() || "#555";
    const line = styles.getPropertyValue("--line").trim() || "#ddd";
    const accent = styles.getPropertyValue("--accent").trim() || COLORS[0];
    // from zero, unless the front spans more than a factor of 30 (then a log scale)
    const axis = (values, text) => {
      const wide = Math.max(...values) / Math.max(Math.min(...values), 1e-9) > 30;
      return {
        type: wide ? "logarithmic" : "linear", beginAtZero: !wide, title: { display: true, text, color: ink },
        ticks: { color: ink }, grid: { color: line },
      };
    };
    const describePoint = (point) => {
      const { scenario: s, display: shown } = data.pareto[point.index];
      return `${choiceLabel("method", s.method)} on ${s.gpus} × ${s.gpu}: ${shown.duration}, ${shown.usd}`;
    };
    state.planChart = new window.Chart(canvas, {
      type: "scatter",
      data: { datasets: [{
        label: "Pareto front", data: points, showLine: true, borderColor: accent, backgroundColor: accent,
        pointRadius: 5, pointHoverRadius: 7,
      }] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {
          x: axis(points.map((p) => p.x), "hours"),
          y: axis(points.map((p) => p.y), "USD"),
        },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { label: (ctx) => describePoint(ctx.raw) } },
        },
        onClick: (event, elements) => {
          if (elements.length) usePlan(data.pareto[points[elements[0].index].index], points[elements[0].index].index, "pareto");
        },
      },
    });
    canvas.setAttribute("aria-label", `Cost against time of the Pareto-optimal plans: ${points.map(describePoint).join("; ")}`);
  }
  function applyScenario(scenario) {
    const values = {};
    for (const [name, value] of Object.entries(scenario)) {
      if (name === "lora") {
        for (const [part, inner] of Object.entries(value || {})) values[`lora.${part}`] = asText(inner);
      } else {
        values[name] = asText(value);
      }
    }
    for (const [name, text] of Object.entries(values)) {
      if (!state.fields[name]) continue;
      state.values[name] = text;
      state.stated.add(name);
      if (state.controls[name] && !(name === "model" && state.config)) state.controls[name].set(text);
    }
    const mode = values.steps ? "steps" : values.dataset_tokens ? "dataset" : "tokens";
    const radio = $(`budget-${mode}`);
    if (radio) radio.checked = true;
    applyVisibility();
    schedule(0);
  }
  function usePlan(item, index, list) {
    applyScenario(item.scenario);
    for (const row of document.querySelectorAll("#plan-results tr[data-plan]")) {
      const current = row.dataset.plan === String(index) && row.dataset.list === list;
      row.classList.toggle("in-use", current);
      if (current) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    }
    const what = `${list === "pareto" ? "Pareto plan" : "Plan"} ${index + 1}`;
    $("plan-status").replaceChildren(`${what} is now in the calculator. `, h("a", { href: "#results", text: "See its estimate" }));
  }

  // ---------- drop your config ----------
  // Training config files (axolotl, torchtune, ...) are posted as text to /api/config; the
  // scenario it reads fills the form, and how each field was read is listed beside it.
  function buildConfigDrop() {
    const input = h("input", { id: "config-files", type: "file", multiple: true, accept: ".yaml,.yml,.json,.toml,.cfg,text/plain" });
    const status = h("p", { id: "config-status", className: "config-status", role: "status", "aria-live": "polite" });
    const mapping = h("div", { id: "config-mapping", className: "config-mapping" });
    const zone = h("div", { id: "config-drop", className: "config-drop" },
      h("p", { text: "Drop your training config here: axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL, accelerate or DeepSpeed. Drop several at once (with the DeepSpeed JSON a config points at)." }),
      h("label", { className: "config-pick", for: "config-files", text: "or choose the files:" }), input);
    const pasted = h("textarea", { id: "config-paste", spellcheck: "false", rows: 4, placeholder: "base_model: meta-llama/Llama-3.1-8B\nadapter: qlora\n…" });
    const pasteBox = h("div", { className: "field config-paste" },
      h("label", { for: "config-paste", text: "or paste a config" }), pasted,
      h("button", { type: "button", className: "btn", id: "config-paste-read", text: "Read pasted config",
        onclick: () => readFiles([{ name: "pasted-config", text: pasted.value }]) }));
    const read = async (list) => {
      const files = [];
      for (const file of list) files.push({ name: file.name, text: await file.text() });
      await readFiles(files);
    };
    const readFiles = async (files) => {
      if (!files.length || !files.some((item) => item.text.trim())) return;
      status.textContent = "Reading…";
      let data;
      let ok = false;
      try {
        const response = await fetch("/api/config", {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ files }),
        });
        data = await response.json();
        ok = response.ok;
      } catch (error) {
        data = { field: null, message: `could not reach the server (${error.message})` };
      }
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

  // ---------- start ----------
  async function boot() {
    wireShare();
    const fromUrl = readUrl();
    send(buildBody(fromUrl)); // first result while the catalogs load
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
    state.values = defaults();
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
    if (dropped) schedule(0);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
