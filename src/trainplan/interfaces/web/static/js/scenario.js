// The scenario in the form, read against the field table of /api/fields: labels, defaults, what a
// request leaves out and the request body. Pure: each function takes the parts of the page's
// state it reads (`fields` by name, `values` as text, `stated`, `models`, `result`, `config`,
// `meta`), so the unit tests call it with plain objects.
import { asText, capitalise, normalise } from "./format.js";

/** A field's label; a name the table does not hold (a pasted config's key) as it is. */
export const fieldLabel = (fields, name) => (fields[name] ? fields[name].label : name);

/** "Micro-batch (micro_batch): " before a message that names a field of the form. */
export const fieldPrefix = (fields, name) => (fields[name] ? `${fields[name].label} (${name}): ` : `${name}: `);

/** How the form names a choice of a field (`choice_labels`), else the choice itself. */
export function choiceLabel(fields, name, choice) {
  const names = (fields[name] && fields[name].choice_labels) || {};
  return names[choice] || choice;
}

/** Whether `text` is the field's default (numbers compared as numbers: "1.0" is 1). */
export function isDefault(field, text) {
  const def = asText(field.default);
  if (text === def) return true;
  if ((field.kind === "int" || field.kind === "float") && text !== "" && def !== "") {
    return Number(text) === Number(def);
  }
  return false;
}

/** A value the request and the link leave out, so that the server fills it as the command's
 * reader does: one at its default, unless someone set it under a recipe (which would fill it). */
export function leftOut(page, name, text) {
  const field = page.fields[name];
  if (!field || !isDefault(field, text)) return false;
  return !(page.values.recipe && page.stated.has(name));
}

/** Whether field `name` applies where its table entry's list `scope` holds `value` (no entry or
 * no list: everywhere). */
function inScope(fields, name, scope, value) {
  const field = fields[name];
  return !field || !field[scope] || field[scope].includes(value);
}

/** Which model kinds a field applies to: the field table's `families` (none: every kind). */
export function appliesTo(fields, name, kind) {
  return inScope(fields, name, "families", kind);
}

/** ... and which methods (`methods`: the LoRA parts, the base weights, kbit_upcast). */
export function appliesToMethod(fields, name, method) {
  return inScope(fields, name, "methods", method);
}

/** ... and which training stages (`stages`: the reference fields, for dpo and kto); no stage is
 * supervised fine-tuning. */
export function appliesToStage(fields, name, stage) {
  return inScope(fields, name, "stages", stage || "sft");
}

/** The selected model's kind: from the catalog list, else from the last answer (a pasted config
 * or a Hub id), else a language model. */
export function modelKind(page) {
  const name = normalise(page.values.model || "");
  const record = page.models.find((item) =>
    [item.name, item.hub_id, ...(item.aliases || [])].some((key) => key && normalise(key) === name));
  if (record && record.kind) return record.kind;
  const result = page.result;
  if (result && result.model && normalise(result.model.name) === name && result.sample) {
    return result.sample.frames > 1 ? "video" : "diffusion";
  }
  return page.config && page.config._class_name ? "diffusion" : "llm";
}

/** The body of POST /api/estimate for `values`: empty values, fields of another model kind and
 * defaults the server fills are left out; `lora.*` fields nest under `lora`; a pasted config goes
 * under the table's `model_config_key`. */
export function buildBody(page, values) {
  const body = {};
  // before the catalog has loaded (the first request, from the link) nothing is dropped
  const kind = page.models.length ? modelKind(page) : null;
  for (const [name, text] of Object.entries(values)) {
    if (text === "" || text === undefined || text === null) continue;
    if (kind && !appliesTo(page.fields, name, kind)) continue;
    if (name !== "model" && leftOut(page, name, text)) continue;
    if (name.startsWith("lora.")) (body.lora ||= {})[name.slice(5)] = text;
    else body[name] = text;
  }
  if (page.config) body[page.meta ? page.meta.model_config_key : "model_config"] = page.config;
  return body;
}

/** Every field at its default, as text. */
export function defaults(fieldList) {
  const values = {};
  for (const field of fieldList) values[field.name] = asText(field.default);
  return values;
}

/** A scenario of the API (a plan's, a read config's) as form values: `lora` flattened to
 * `lora.PART`, every value as text. */
export function scenarioValues(scenario) {
  const values = {};
  for (const [name, value] of Object.entries(scenario)) {
    if (name === "lora") {
      for (const [part, inner] of Object.entries(value || {})) values[`lora.${part}`] = asText(inner);
    } else {
      values[name] = asText(value);
    }
  }
  return values;
}

/** The budget mode a scenario's values are given in. */
export const budgetModeOf = (values) => (values.steps ? "steps" : values.dataset_tokens ? "dataset" : "tokens");

/** The budget mode the form opens in: the last mode whose own (unset by default) fields hold a
 * value, else the first (/api/fields `budget_modes`, each field's `budget`). */
export function openingBudgetMode(meta, values) {
  const given = meta.budget_modes.filter(({ id }) =>
    meta.fields.some((field) => field.budget === id && field.nullable && values[field.name]));
  return (given.length ? given[given.length - 1] : meta.budget_modes[0]).id;
}

/** What "Largest that fits" says when the server refuses the search: its own sentence for the
 * search (`max`), "fix the calculator first" for a field of the scenario, else the message. */
export function largestErrorText(fields, data) {
  if (data.field === "max") return capitalise(String(data.message || ""));
  if (data.field) return `Fix the calculator first: ${fieldPrefix(fields, data.field)}${data.message}`;
  return data.message || "the server could not answer";
}
