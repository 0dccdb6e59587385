// The server's JSON API, as the page calls it.

/** GET a JSON document; throws on an HTTP error. */
export async function getJSON(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

/** POST a JSON body (an object, or already-serialised text): `{ ok, data }`, where a server
 * that cannot be reached is a refusal naming no field. An aborted request still throws. */
export async function postJSON(url, body, signal) {
  try {
    const response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body), signal,
    });
    return { ok: response.ok, data: await response.json() };
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return { ok: false, data: { field: null, message: `could not reach the server (${error.message})` } };
  }
}
