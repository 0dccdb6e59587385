// The estimate on screen: the summary bar, the headline cards, the memory breakdown, "Can you
// train it?", time, cost and carbon, the price quotes and the assumptions. Every figure and
// sentence is the answer's (`display`); this module only places and formats them.
import { getJSON } from "./api.js";
import { renderMemoryChart } from "./chart.js";
import { $, h } from "./dom.js";
import { setValue, showRecipeValues } from "./form.js";
import {
  asText, assumptionText, compact, deviceText, gib, gibFigure, groupBy, nf0, nf1, nf2, seconds, share, usd, words,
} from "./format.js";
import { renderHints } from "./hints.js";
import { largestLabels } from "./largest.js";
import { planLabels } from "./planner.js";
import { renderShare } from "./share.js";
import { state } from "./state.js";

/** The catalog row of the scenario's GPU: its capacity and whether the run fits. */
const capacityOf = (result) => result.fit.find((row) => row.gpu === result.gpu);

/** Draw an answer of POST /api/estimate. */
export function render(result) {
  const display = result.display;
  const row = capacityOf(result);
  const fits = row ? row.fits : false;

  // summary strip
  const summary = [h("span", { text: `${display.total} per GPU` }), h("span", { className: "sep", text: "·" })];
  if (row) summary.push(h("span", { className: fits ? "fits" : "nofit", text: display.fit_verdict }));
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

function renderBreakdown(result, row) {
  const memory = result.memory;
  const perGpu = memory.per_gpu;
  // the rollout engine's row and bar only where the stage generates (it is 0 everywhere else)
  const terms = Object.keys(perGpu.kinds).filter((term) => term !== "rollout" || memory.rollout);
  $("terms").tBodies[0].replaceChildren(...terms.map((term) =>
    h("tr", { "data-term": term },
      h("th", { scope: "row", text: term }),
      h("td", { className: "num", text: gibFigure(perGpu[`${term}_bytes`]) }),
      h("td", {}, h("span", { className: `badge ${perGpu.kinds[term]}`, text: perGpu.kinds[term] })),
      h("td", { text: perGpu.notes[term] }))));
  $("terms-total").textContent = gibFigure(perGpu.total_bytes);
  $("breakdown-caption").textContent =
    `Each bar is one moment of a training step on the busiest GPU; the peak (${memory.peak_phase}) sets the total.` +
    (row ? ` The dashed line is the ${row.gpu}'s ${gib(row.memory_bytes)}.` : "");
  const offload = $("offload-note");
  offload.hidden = !memory.cpu_offload_bytes;
  offload.textContent = `CPU memory for offloaded state: ${gib(memory.cpu_offload_bytes)} per GPU.`;
  // the three figures: the device's used memory (the total, on which fits is decided), the
  // caching allocator's pool (max_memory_reserved) and the live tensors (max_memory_allocated)
  $("allocated-note").textContent = `The total is the GPU's used memory, as nvidia-smi shows it. Of it, the caching allocator reserves ${gib(memory.reserved_peak_bytes)} (what torch.cuda.max_memory_reserved() reports), and live tensors take ${gib(memory.allocated_peak_bytes)} (torch.cuda.max_memory_allocated()).${deviceText(memory.device_overhead)}`;
  // a preference stage's frozen reference copy: its share of the weights row
  const copy = (memory.states && memory.states.reference_bytes) || 0;
  const reference = $("reference-note");
  reference.hidden = !copy;
  reference.textContent = `Of the weights, the frozen reference model takes ${gib(copy)} per GPU: ${String(result.assumptions.stage).toUpperCase()} scores each batch with it too.`;
  // a GRPO step's rollout engine and the memory of each round, as the CLI says them
  const rollout = $("rollout-note");
  rollout.hidden = !memory.rollout;
  rollout.textContent = (result.display.rollout_lines || []).join(". ");
  // under pipeline parallelism: every rank's peak, the worst of which is the total
  const stages = $("stage-note");
  stages.hidden = !result.display.stage_line;
  stages.textContent = result.display.stage_line ? `${result.display.stage_line}.` : "";
  const paged = $("paged-note");
  paged.hidden = !memory.paged_bytes;
  paged.textContent = `Paged optimizer state in unified memory, outside the total: ${gib(memory.paged_bytes)} per GPU (the driver pages it to the host when the GPU runs short).`;
  renderMemoryChart(result, terms, row);
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
    h("tr", {}, h("th", { scope: "row", text: words(part) }),
      h("td", { className: "num", text: `${seconds(value)}${time.step_s ? ` (${share((100 * value) / time.step_s)})` : ""}` }))));
  const entries = Object.entries(result.assumptions).filter(([, value]) => value !== null && typeof value !== "object");
  const short = entries.filter(([, value]) => asText(value).length <= 48);
  const long = entries.filter(([, value]) => asText(value).length > 48);
  $("assumptions").tBodies[0].replaceChildren(...short.map(([key, value]) =>
    h("tr", {}, h("th", { scope: "row", text: words(key) }), h("td", { text: assumptionText(key, value) }))));
  const sources = $("sources");
  sources.hidden = !long.length;
  sources.querySelector("dl").replaceChildren(...long.flatMap(([key, value]) =>
    [h("dt", { text: words(key) }), h("dd", { text: asText(value) })]));
}

// The quotes behind a catalog price (GET /api/prices), fetched once per GPU
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
