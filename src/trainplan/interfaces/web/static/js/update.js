// The live estimate: each edit schedules one POST /api/estimate of the form's scenario; only the
// latest answer is drawn (an earlier request in flight is aborted).
import { postJSON } from "./api.js";
import { $ } from "./dom.js";
import { clearErrors, showChooseModel, showError } from "./errors.js";
import { render } from "./estimate.js";
import { forgetLargest } from "./largest.js";
import { buildBody } from "./scenario.js";
import { writeUrl } from "./share.js";
import { state } from "./state.js";

/** Estimate the form's scenario after `delay` ms without another edit. */
export function schedule(delay) {
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
  send(buildBody(state, state.values));
}

/** POST `body` and draw the answer, unless a later request was sent meanwhile. */
export async function send(body) {
  const seq = ++state.seq;
  if (state.controller) state.controller.abort();
  const controller = new AbortController();
  state.controller = controller;
  const results = $("results");
  results.classList.add("stale");
  results.setAttribute("aria-busy", "true");
  document.body.dataset.state = "loading";
  let answer;
  try {
    answer = await postJSON("/api/estimate", body, controller.signal);
  } catch (error) {
    if (error.name === "AbortError") return;
    throw error;
  }
  if (seq !== state.seq) return;
  results.setAttribute("aria-busy", "false");
  if (!answer.ok) {
    showError(answer.data);
    document.body.dataset.state = "error";
    return;
  }
  clearErrors();
  results.classList.remove("stale");
  state.result = answer.data;
  render(answer.data);
  document.body.dataset.state = "ready";
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  if (document.body.dataset.renders === "1") performance.mark("trainplan:first-result");
}
