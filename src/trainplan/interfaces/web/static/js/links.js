// The scenario in the page's link: `?model=...&FIELD=TEXT`, the fields at their defaults left
// out, and a pasted config.json as base64url JSON in `config` while it is small. Pure: the page
// passes `location.search` in and puts the query it gets back into the address bar.
import { leftOut } from "./scenario.js";

/** The longest encoded config a link carries; a larger one stays out of the link. */
export const MAX_LINK_CONFIG = 8000;

/** UTF-8 text as unpadded base64url. */
export function b64encode(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The inverse of `b64encode` (padding optional); throws on text that is not base64. */
export function b64decode(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

/** A link's query read: `values` by field name as text, `config` the pasted config.json it
 * carries (null without one), `unreadable` the errors of a `config` that is not a JSON object. */
export function parseLink(search) {
  const values = {};
  let config = null;
  const unreadable = [];
  for (const [key, value] of new URLSearchParams(search)) {
    if (key !== "config") {
      values[key] = value;
      continue;
    }
    try {
      const parsed = JSON.parse(b64decode(value));
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) config = parsed;
      else unreadable.push(new TypeError("not a JSON object"));
    } catch (error) {
      unreadable.push(error);
    }
  }
  return { values, config, unreadable };
}

/** The query of the link to the page's scenario (`page`: `meta`, `fields`, `values`, `stated`,
 * `config`): the model first, then each field the request would send, in the table's order;
 * `configTooLong` when a pasted config was left out for its size. Slashes stay readable. */
export function shareQuery(page) {
  const params = new URLSearchParams();
  params.set("model", page.values.model || "");
  for (const field of page.meta.fields) {
    const text = page.values[field.name];
    if (field.name === "model" || text === undefined || text === "" || leftOut(page, field.name, text)) continue;
    params.set(field.name, text);
  }
  let configTooLong = false;
  if (page.config) {
    const encoded = b64encode(JSON.stringify(page.config));
    if (encoded.length <= MAX_LINK_CONFIG) params.set("config", encoded);
    else configTooLong = true;
  }
  return { query: params.toString().replace(/%2F/g, "/"), configTooLong };
}

/** The downloaded result JSON's file name, from the model's name. */
export const resultFileName = (model) => `trainplan-${String(model).replace(/[^A-Za-z0-9._-]+/g, "_")}.json`;
