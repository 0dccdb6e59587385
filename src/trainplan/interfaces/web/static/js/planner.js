// "Plan it for me": the planner's form, drawn from /api/fields `plan_options` (each option's
// label, help, placeholder, choices and cap are its declaration's), POST /api/plan of the
// calculator's scenario, and the answer: the plans, the rejections and the Pareto front.
import { postJSON } from "./api.js";
import { drawParetoChart } from "./chart.js";
import { $, h } from "./dom.js";
import { GIB, nf0, nf1 } from "./format.js";
import { applyScenario } from "./form.js";
import {
  paretoNote, paretoPoints, planErrorText, planFields, planHelp, planInputId, planRequest, planText, reasonText,
  rejectedTitle, sameFiguresNote, splitRejected,
} from "./plans.js";
import { buildBody, choiceLabel, fieldPrefix } from "./scenario.js";
import { state } from "./state.js";

// each drawn option's control by name: { read, invalid (the node marked aria-invalid), errorId }
const controls = {};

const gpuBoxes = () => [...document.querySelectorAll("#plan-gpu-list input[type=checkbox]")];
const describedBy = (id) => `${id}-help ${id}-error`;
const helpSpan = (id, text) => h("span", { className: "help", id: `${id}-help`, text });
const errorSpan = (id) => h("span", { className: "field-error", id: `${id}-error`, role: "alert" });

// A choice: a select of its choice names, the default chosen.
function selectField({ option, id }) {
  const select = h("select", { id, "aria-describedby": describedBy(id) },
    option.choices.map((value) => h("option", {
      value, selected: value === option.default, text: (option.choice_labels || {})[value] || value,
    })));
  controls[option.name] = { read: () => select.value, invalid: select };
  return h("div", { className: "field", "data-plan-field": option.name },
    h("label", { for: id, text: option.label }), select, helpSpan(id, planHelp(option, "select")), errorSpan(id));
}

// The methods: the calculator's own (the server's default) or any of them.
function methodsField({ option, id }) {
  const labelId = `${id}-label`;
  const radio = (value, radioId, checked) => h("input", { type: "radio", name: id, value, id: radioId, checked });
  const mine = radio("this", id, true);
  const any = radio("any", `${id}-any`, false);
  controls[option.name] = { read: () => (any.checked ? "any" : "this"), invalid: mine };
  return h("div", { className: "field", "data-plan-field": option.name },
    h("span", { className: "label", id: labelId, text: option.label }),
    h("div", { className: "segmented", role: "radiogroup", "aria-labelledby": labelId, "aria-describedby": describedBy(id) },
      h("label", {}, mine, h("span", { id: "plan-this-method", text: "This method" })),
      h("label", {}, any, h("span", { text: "Any method" }))),
    helpSpan(id, planHelp(option, "methods")), errorSpan(id));
}

// A number: a text box holding the default, if any; the help states the server's cap.
function textField({ option, id }) {
  const input = h("input", {
    id, type: "text", inputmode: option.kind === "int" ? "numeric" : "decimal", autocomplete: "off",
    spellcheck: "false", placeholder: option.placeholder, "aria-describedby": describedBy(id),
  });
  if (option.default !== null) input.value = String(option.default);
  controls[option.name] = { read: () => input.value, invalid: input };
  return h("div", { className: "field", "data-plan-field": option.name },
    h("label", { for: id, text: option.label }), input, helpSpan(id, planHelp(option, "text")), errorSpan(id));
}

// The GPU types: every catalog GPU, consumer to datacenter, the planner's default set checked
// (the priced NVIDIA and AMD GPUs: /api/gpus `planned_by_default`).
function gpuField({ option, id }) {
  const list = h("div", { className: "plan-gpu-list", id: "plan-gpu-list" }, state.gpus.map((gpu, index) => {
    const boxId = `plan-gpu-${index}`;
    return h("label", { className: "check plan-gpu", for: boxId },
      h("input", { type: "checkbox", id: boxId, value: gpu.name, checked: gpu.planned_by_default, "data-default": String(gpu.planned_by_default) }),
      h("span", {}, gpu.name, h("span", { className: "gpu-mem", text: ` ${nf0.format(gpu.memory_bytes / GIB)} GiB${gpu.has_price ? "" : " · no price"}` })));
  }));
  const pick = (test) => () => gpuBoxes().forEach((box) => { box.checked = test(box); });
  const tool = (toolId, text, test, title) =>
    h("button", { type: "button", className: "btn btn-small", id: toolId, title, text, onclick: pick(test) });
  controls[option.name] = { read: () => gpuBoxes().filter((box) => box.checked).map((box) => box.value), invalid: null };
  return h("fieldset", { className: "plan-gpus", "data-plan-field": option.name, "aria-describedby": `${id}-error` },
    h("legend", { text: option.label }),
    h("div", { className: "plan-gpu-tools" },
      tool("plan-gpus-default", "Default", (box) => box.dataset.default === "true", "NVIDIA and AMD GPUs with a price"),
      tool("plan-gpus-all", "All", () => true),
      tool("plan-gpus-none", "None", () => false)),
    list, errorSpan(id));
}

const WIDGETS = { select: selectField, methods: methodsField, text: textField, gpus: gpuField };

/** Draw the planner's form: the options marked "web" in the grid, the GPU list under it. */
export function buildPlanner() {
  const grid = [];
  const below = [];
  for (const spec of planFields(state.meta.plan_options)) {
    (spec.widget === "gpus" ? below : grid).push(WIDGETS[spec.widget](spec));
  }
  $("plan-grid").replaceChildren(...grid);
  $("plan-grid").after(...below);
  $("plan-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runPlan();
  });
  document.body.dataset.plan = "idle";
}

/** "This method" names the calculator's method; the target box shows its global batch. */
export function planLabels(result) {
  const mine = $("plan-this-method");
  if (mine) mine.textContent = `This method (${choiceLabel(state.fields, "method", result.scenario.method)})`;
  const target = $(planInputId("target_global_tokens"));
  if (target) target.placeholder = `${nf0.format(result.batch.global_tokens)} (the calculator's)`;
}

function clearPlanErrors() {
  $("plan-error").hidden = true;
  for (const slot of document.querySelectorAll("#plan-form .field-error")) slot.textContent = "";
  for (const node of document.querySelectorAll("#plan-form [aria-invalid]")) node.removeAttribute("aria-invalid");
}

function showPlanError(data) {
  const banner = $("plan-error");
  banner.textContent = planErrorText(state.meta.plan_options, data, (name) => fieldPrefix(state.fields, name));
  banner.hidden = false;
  const field = data.field || "";
  const spec = field.startsWith("plan.") && planFields(state.meta.plan_options).find(({ option }) => `plan.${option.name}` === field);
  if (!spec) return;
  $(`${spec.id}-error`).textContent = data.message;
  const invalid = controls[spec.option.name].invalid;
  if (invalid) invalid.setAttribute("aria-invalid", "true");
}

async function runPlan() {
  const button = $("plan-run");
  if (button.disabled || !state.meta) return;
  clearPlanErrors();
  const fields = planFields(state.meta.plan_options);
  const form = Object.fromEntries(fields.map(({ option }) => [option.name, controls[option.name].read()]));
  const options = planRequest(fields, form);
  if (!options.gpu_types.length) {
    showPlanError({ field: "plan.gpu_types", message: "pick at least one GPU type" });
    return;
  }
  const body = { ...buildBody(state, state.values), plan: options };
  const planner = $("planner");
  button.disabled = true;
  button.classList.add("busy");
  button.textContent = "Planning…";
  planner.setAttribute("aria-busy", "true");
  document.body.dataset.plan = "busy";
  $("plan-status").textContent = "Searching…";
  const start = performance.now();
  const { ok, data } = await postJSON("/api/plan", body);
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
  state.plan = data;
  renderPlan(data, body, (performance.now() - start) / 1000);
  document.body.dataset.plan = "ready";
  document.body.dataset.plans = String(Number(document.body.dataset.plans || 0) + 1);
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

// Plans with an earlier row's time and cost would look like duplicates: the row says what
// differs, in the settings that have a short name (/api/fields `short_label`).
const planSettings = () => state.meta.fields.filter((field) => field.short_label);

function planRow(item, index, list, items) {
  const text = planText(state.fields, item);
  const same = sameFiguresNote(items, index, planSettings());
  const cells = {
    rank: String(index + 1),
    plan: [h("span", { className: "plan-method", text: text.method }), " ",
      h("span", { className: "plan-hw", text: text.hardware }),
      same ? h("div", { className: "plan-differs", text: same }) : ""],
    time: text.time,
    cost: text.cost,
    memory: [h("span", { className: "plan-device", text: text.device }), h("div", { className: "plan-figures", text: text.figures })],
    layout: text.layout,
    batch: text.batch,
    savers: text.savers,
    kwh: text.kwh,
    use: h("button", {
      type: "button", className: "btn btn-small use-plan", text: "Use this plan",
      "aria-label": `Use plan ${index + 1}: ${text.what}`, onclick: () => usePlan(item, index, list),
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

function renderPlan(data, body, took) {
  const scenarioName = body.model || "the model";
  $("plan-status").textContent =
    `${nf0.format(data.candidates_evaluated)} candidates searched in ${nf1.format(took)} s for ${scenarioName}.`;
  $("plan-explanation").replaceChildren(...data.explanation.map((line) => h("li", { text: line })));
  $("plan-table-caption").textContent = data.display.heading;
  for (const id of ["plan-table", "plan-pareto-table"]) $(id).tHead.replaceChildren(planHead());
  $("plan-table").tBodies[0].replaceChildren(...data.plans.map((item, index) => planRow(item, index, "plans", data.plans)));
  $("plan-pareto-table").tBodies[0].replaceChildren(...data.pareto.map((item, index) => planRow(item, index, "pareto", data.pareto)));
  // reasons a user acts on (memory, budget, deadline, price) first; the search's own
  // bookkeeping (layouts that cannot exist) behind a toggle
  const { actionable, internal, actionTotal, internalTotal } = splitRejected(data.rejected);
  const row = ([reason, count]) =>
    h("tr", {}, h("th", { scope: "row", text: reasonText(reason) }), h("td", { className: "num", text: nf0.format(count) }));
  $("plan-rejected-title").textContent = rejectedTitle(actionTotal);
  $("plan-rejected").tBodies[0].replaceChildren(...actionable.map(row));
  $("plan-internal-summary").textContent =
    `Search details: ${nf0.format(data.candidates_evaluated)} candidates evaluated, ${nf0.format(internalTotal)} impossible layouts skipped`;
  $("plan-internal").tBodies[0].replaceChildren(...internal.map(row));
  $("plan-results").hidden = false;
  renderPlanChart(data);
}

function renderPlanChart(data) {
  const canvas = $("plan-chart");
  const points = paretoPoints(data.pareto);
  $("plan-chart-note").textContent = paretoNote(points.length);
  const describe = (point) => {
    const { scenario: s, display: shown } = data.pareto[point.index];
    return `${choiceLabel(state.fields, "method", s.method)} on ${s.gpus} × ${s.gpu}: ${shown.duration}, ${shown.usd}`;
  };
  const drawn = drawParetoChart(canvas, points, describe, (point) => usePlan(data.pareto[point.index], point.index, "pareto"));
  canvas.parentElement.hidden = !drawn;
  if (drawn) canvas.setAttribute("aria-label", `Cost against time of the Pareto-optimal plans: ${points.map(describe).join("; ")}`);
}

/** Put a plan's scenario into the calculator and mark its row as the one in use. */
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
