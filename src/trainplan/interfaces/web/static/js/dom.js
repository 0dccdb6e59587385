// The two DOM helpers every view module uses.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** A new element: `attrs` sets text (`text`), the class (`className`), listeners (`onclick`...)
 * and attributes (`true` as a bare attribute; false, null and undefined leave it out). */
export function h(tag, attrs, ...children) {
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
