// The two charts, drawn with the vendored Chart.js (a classic script loaded before the modules:
// `window.Chart`): the memory per GPU by phase of the step, and the planner's Pareto front.
// Without the library the page still has every figure in its tables.
import { $ } from "./dom.js";
import { GIB, nf2 } from "./format.js";
import { wideRange } from "./plans.js";
import { state } from "./state.js";

export const COLORS = ["#3b5bdb", "#0ca678", "#f08c00", "#ae3ec9", "#e03131", "#1098ad", "#868e96", "#5c940d", "#d6336c"];

/** The memory chart's bars: one label per phase of the step (the peak marked) and one stacked
 * series of GiB per term, exact or estimate. Pure. */
export function memorySeries(memory, terms) {
  const phases = Object.keys(memory.phases);
  const labels = phases.map((phase) => (phase === memory.peak_phase ? `${phase} (peak)` : phase));
  const series = terms.map((term) => ({
    term,
    kind: memory.per_gpu.kinds[term],
    label: `${term} (${memory.per_gpu.kinds[term]})`,
    data: phases.map((phase) => (memory.phases[phase][`${term}_bytes`] || 0) / GIB),
  }));
  return { labels, series };
}

// the fill of an estimated term: the term's colour, striped
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

// the GPU's capacity as a dashed vertical line across the bars
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

// the page's colours (app.css), with fallbacks
function palette() {
  const styles = getComputedStyle(document.body);
  const read = (name, fallback) => styles.getPropertyValue(name).trim() || fallback;
  return { ink: read("--muted", "#555"), line: read("--line", "#ddd"), accent: read("--accent", COLORS[0]), bad: read("--bad", "#b42318") };
}

/** Draw (or redraw) the memory chart of an estimate; `row` is the scenario GPU's fit row. */
export function renderMemoryChart(result, terms, row) {
  const canvas = $("memory-chart");
  if (window.Chart) {
    drawMemoryChart(window.Chart, canvas, result, terms, row);
  } else {
    // The chart library is missing (not built) or failed to load: the table has every figure.
    $("chart-missing").hidden = false;
    canvas.parentElement.hidden = true;
  }
  document.body.dataset.chart = String(Number(document.body.dataset.renders || 0) + 1);
  if (!performance.getEntriesByName("trainplan:first-chart").length) performance.mark("trainplan:first-chart");
}

function drawMemoryChart(Chart, canvas, result, terms, row) {
  const { ink, line, bad } = palette();
  const { labels, series } = memorySeries(result.memory, terms);
  const datasets = series.map(({ kind, label, data }, index) => {
    const color = COLORS[index % COLORS.length];
    return {
      label, data, backgroundColor: kind === "exact" ? color : stripes(color),
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
      capacityLine: { bytes: capacity, color: bad },
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

/** Draw the Pareto front (`points`: hours against USD) on `canvas`, replacing the last one;
 * `describe` names a point, `pick` takes a clicked one. False without the chart library. */
export function drawParetoChart(canvas, points, describe, pick) {
  if (state.planChart) {
    state.planChart.destroy();
    state.planChart = null;
  }
  if (!points.length || !window.Chart) return false;
  const { ink, line, accent } = palette();
  // from zero, unless the front spans more than a factor of 30 (then a log scale)
  const axis = (values, text) => {
    const wide = wideRange(values);
    return {
      type: wide ? "logarithmic" : "linear", beginAtZero: !wide, title: { display: true, text, color: ink },
      ticks: { color: ink }, grid: { color: line },
    };
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
        tooltip: { callbacks: { label: (ctx) => describe(ctx.raw) } },
      },
      onClick: (event, elements) => {
        if (elements.length) pick(points[elements[0].index]);
      },
    },
  });
  return true;
}
