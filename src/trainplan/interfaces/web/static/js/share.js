// "Share and reproduce": the scenario in the address bar and the share link, the CLI command,
// the copy buttons and the result JSON download.
import { $, h } from "./dom.js";
import { parseLink, resultFileName, shareQuery } from "./links.js";
import { state } from "./state.js";

/** The link's field values by name; a config.json it carries becomes the page's config. */
export function readUrl() {
  const { values, config, unreadable } = parseLink(location.search);
  if (config) state.config = config;
  for (const error of unreadable) console.warn("ignoring an unreadable config in the link", error);
  return values;
}

/** Put the form's scenario in the address bar and the share box. */
export function writeUrl() {
  if (!state.meta) return;
  const url = `${location.pathname}?${shareQuery(state).query}`;
  history.replaceState(null, "", url);
  $("share-link").value = location.origin + url;
}

/** The command line of the estimate on screen. */
export function renderShare(result) {
  $("cli-command").value = result.display.cli;
  $("cli-note").hidden = !state.config;
}

/** The copy buttons (`data-copy` names the box they copy) and the JSON download. */
export function wireShare() {
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
      download: resultFileName(state.result.model.name),
    });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  });
}
