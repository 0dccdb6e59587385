// The planner's logic, apart from the DOM: which options of /api/fields `plan_options` the form
// draws and how, the `plan` object a form's values make, and the words and figures of an answer
// (POST /api/plan). Pure, for the unit tests.
import { GIB, nf0, nf2 } from "./format.js";
import { choiceLabel } from "./scenario.js";

/** The id of an option's control (its help and error: `ID-help`, `ID-error`). */
export const planInputId = (name) => `plan-${name.replace(/_/g, "-")}`;

/** How the form draws an option, from its declaration: a choice is a select, a list with
 * choices (the methods) "this method or any", a number a text box, a list of free names (the
 * GPU types) the checkbox list under the grid. */
export function planWidget(option) {
  if (option.kind === "choice") return "select";
  if (option.kind === "list") return option.choices ? "methods" : "gpus";
  return "text";
}

// the form's order: what ranks the plans, the methods, the limits, then the (long) GPU list
const WIDGET_ORDER = ["select", "methods", "text", "gpus"];

/** The options the form draws (`interfaces` names "web"), each with its widget and control id,
 * in the form's order (the table's order within a widget). */
export function planFields(options) {
  return options
    .filter((option) => option.interfaces.includes("web"))
    .map((option) => ({ option, widget: planWidget(option), id: planInputId(option.name) }))
    .sort((a, b) => WIDGET_ORDER.indexOf(a.widget) - WIDGET_ORDER.indexOf(b.widget));
}

/** The short help under an option's control; a text box also states the server's cap. */
export function planHelp(option, widget) {
  const cap = widget === "text" && option.maximum !== null ? `; at most ${nf0.format(option.maximum)}` : "";
  return (option.form_help || "") + cap;
}

/** A number as typed ("$1,500 ") as the API reads it ("1500"). */
export const cleanNumber = (text) => text.trim().replace(/[$,\s]/g, "");

/** The `plan` object of POST /api/plan from the form: `form` holds each drawn option's value by
 * name (a select's value, "this" or "any" for the methods, a text box's text, the checked GPU
 * names). Empty boxes and "this method" are left to the server's defaults. */
export function planRequest(fields, form) {
  const options = {};
  for (const { option, widget } of fields) {
    const value = form[option.name];
    if (widget === "select") options[option.name] = value;
    else if (widget === "methods" && value === "any") options[option.name] = "any";
    else if (widget === "text" && cleanNumber(value || "")) options[option.name] = cleanNumber(value);
    else if (widget === "gpus") options[option.name] = [...(value || [])];
  }
  return options;
}

/** The text of the banner for a refused plan: a planner option by its label, a calculator field
 * by `prefix` (the field table's), else the server's message. */
export function planErrorText(planOptions, data, prefix) {
  const field = data.field || "";
  const key = field.startsWith("plan.") ? field.slice(5) : "";
  if (key) {
    const option = planOptions.find((item) => item.name === key);
    return `${(option && option.label) || key} (${field}): ${data.message}`;
  }
  if (field) return `Fix the calculator first: ${prefix(field)}${data.message}`;
  return data.message || "the server refused this plan";
}

/** The reasons candidates were rejected, largest count first: those a user acts on (memory,
 * budget, deadline, price) and the search's own bookkeeping (`invalid: ...`, layouts that cannot
 * exist), each with its total. */
export function splitRejected(rejected) {
  const entries = Object.entries(rejected).sort((a, b) => b[1] - a[1]);
  const internal = entries.filter(([reason]) => reason.startsWith("invalid:"));
  const actionable = entries.filter(([reason]) => !reason.startsWith("invalid:"));
  const total = (list) => list.reduce((sum, [, count]) => sum + count, 0);
  return { actionable, internal, actionTotal: total(actionable), internalTotal: total(internal) };
}

/** The heading over the actionable reasons. */
export const rejectedTitle = (actionTotal) => (actionTotal
  ? `Why ${nf0.format(actionTotal)} candidates were turned down`
  : "No candidate was turned down for memory, price, budget or deadline");

/** A rejection reason as the table shows it. */
export const reasonText = (reason) => reason.replace(/^invalid: /, "");

const planFigures = (item) => [item.display.duration || "", item.display.usd || ""].join("|");

/** For a plan with an earlier row's time and cost (it would look like a duplicate): which row,
 * and what differs in the settings with a short name (`settings`: /api/fields entries with a
 * `short_label`); "" for a plan with figures of its own. */
export function sameFiguresNote(items, index, settings) {
  const item = items[index];
  const earlier = items.slice(0, index).findIndex((other) => planFigures(other) === planFigures(item));
  if (earlier < 0) return "";
  const differs = settings.filter((field) => items[earlier].scenario[field.name] !== item.scenario[field.name]);
  const names = differs.map((field) => field.short_label).join(", ") || "nothing shown";
  return `same time and cost as #${earlier + 1}; differs in ${names}`;
}

/** One plan's cells as text (`fields`: the field table by name, for the method's name). */
export function planText(fields, item) {
  const { scenario, estimate, display } = item;
  const memory = estimate.memory;
  const method = choiceLabel(fields, "method", scenario.method);
  const hardware = `${scenario.gpus} × ${scenario.gpu}`;
  return {
    method,
    hardware,
    what: `${method} on ${hardware}`,
    time: display.duration || "–",
    cost: display.usd || "–",
    kwh: display.kwh || "–",
    // the device figure the fit is decided on, and under it the allocator's two
    device: nf2.format(memory.per_gpu.total_bytes / GIB),
    figures: `reserved ${nf2.format(memory.reserved_peak_bytes / GIB)} · allocated ${nf2.format(memory.allocated_peak_bytes / GIB)}`,
    layout: `${scenario.tensor_parallel} / ${scenario.pipeline_parallel} / ${estimate.batch.replicas}`
      + (scenario.context_parallel > 1 ? `, cp ${scenario.context_parallel}` : "")
      + (scenario.data_parallel_replicate > 1 ? `, HSDP ×${scenario.data_parallel_replicate}` : "")
      + `, ZeRO ${scenario.zero_stage}`,
    batch: `${scenario.micro_batch} × ${scenario.grad_accum}`,
    savers: `${scenario.activation_checkpointing}, ${scenario.offload}`
      + (display.rollout_summary ? ` · ${display.rollout_summary}` : ""),
  };
}

/** The Pareto front's priced plans as chart points: hours against USD, each with its index in
 * `pareto`. */
export function paretoPoints(pareto) {
  return pareto
    .map((item, index) => ({ item, index }))
    .filter(({ item }) => item.estimate.time && item.estimate.cost && item.estimate.cost.run_usd !== null)
    .map(({ item, index }) => ({ x: item.estimate.time.run_s / 3600, y: item.estimate.cost.run_usd, index }));
}

/** The note over the Pareto chart. */
export const paretoNote = (count) => (count
  ? `${count} plan${count === 1 ? "" : "s"} that no other beats on both time and cost. Click a point to use it.`
  : "No priced plan to draw.");

/** A chart axis over `values` is logarithmic when they span more than a factor of 30, else
 * linear from zero. */
export const wideRange = (values) => Math.max(...values) / Math.max(Math.min(...values), 1e-9) > 30;
