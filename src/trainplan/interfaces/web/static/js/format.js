// Formatting of the figures the server sends (bytes, seconds, dollars) and small text helpers.
// Pure: no DOM, so the unit tests import it directly.

export const GIB = 1024 ** 3;

export const nf2 = new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
export const nf1 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });
export const nf0 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
export const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });

/** Bytes as GiB with two decimals ("1.50 GiB"). */
export const gib = (bytes) => `${nf2.format(bytes / GIB)} GiB`;

/** Bytes as a bare GiB figure with two decimals, for tables with a GiB column. */
export const gibFigure = (bytes) => nf2.format(bytes / GIB);

/** US dollars: cents below $100, whole dollars from there. */
export const usd = (value) =>
  new Intl.NumberFormat("en-US", {
    style: "currency", currency: "USD", maximumFractionDigits: Math.abs(value) < 100 ? 2 : 0,
  }).format(value);

/** A percentage; one that rounds to nothing is "0%", never "-0%" (a saving too small to show). */
export const share = (percent) => `${nf0.format(Math.round(percent) || 0)}%`;

/** Seconds with three significant digits, whole seconds from 100 s. */
export const seconds = (value) => (value >= 100 ? `${nf0.format(value)} s` : `${value.toPrecision(3)} s`);

/** A name compared loosely: case, spaces, underscores, dashes and slashes ignored. */
export const normalise = (text) => String(text).toLowerCase().replace(/[\s_\-/]+/g, "");

/** A value as the form's controls and the link hold it: text, lists comma-joined. */
export function asText(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (Array.isArray(value)) return value.join(",");
  return String(value);
}

/** "A sentence" from "a sentence". */
export const capitalise = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/** A key of the answer as words ("step_time" -> "step time"). */
export const words = (key) => key.replace(/_/g, " ");

/** Items grouped by one key, in first-seen order: [[value, items], ...]. */
export function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    if (!groups.has(item[key])) groups.set(item[key], []);
    groups.get(item[key]).push(item);
  }
  return [...groups.entries()];
}

/** An applied assumption's value: bytes as GiB, whole numbers grouped, others to 4 digits. */
export function assumptionText(key, value) {
  if (typeof value !== "number") return asText(value);
  if (key.endsWith("_bytes")) return gib(value);
  return Number.isInteger(value) ? nf0.format(value) : String(Number(value.toPrecision(4)));
}

/** The memory outside the caching allocator by part, as a sentence ("" for a flat figure). */
export function deviceText(device) {
  if (!device || device.flat_bytes) return "";
  const nccl = device.communicators
    ? `, NCCL buffers ${gib(device.nccl_bytes)} (${device.communicators} communicator${device.communicators > 1 ? "s" : ""})`
    : "";
  return ` Outside the allocator: CUDA context ${gib(device.context_bytes)}, cuBLAS workspace ${gib(device.workspace_bytes)}${nccl}.`;
}
