// The gateway's API as the signed-in caller: the bearer token lives in this tab's sessionStorage only.

const TOKEN_KEY = "muster.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

const signedOut = new Set();

/** Called when the gateway refuses the token (401): the app shows the sign-in page. */
export function onSignedOut(listener) {
  signedOut.add(listener);
  return () => signedOut.delete(listener);
}

export async function request(method, path, body, tokenOverride) {
  const headers = { Accept: "application/json" };
  const bearer = tokenOverride || token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const parsed = text ? JSON.parse(text) : null;
  if (!response.ok) {
    if (response.status === 401 && !tokenOverride) signedOut.forEach((listener) => listener());
    throw new ApiError(response.status, parsed);
  }
  return parsed;
}

export const get = (path) => request("GET", path);
export const post = (path, body) => request("POST", path, body);
export const patch = (path, body) => request("PATCH", path, body);

/** A query string from an object, leaving out empty values. */
export function qs(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
