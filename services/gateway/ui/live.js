// The live stream (GET /v1/stream, Server-Sent Events) read with fetch so that it carries the bearer
// token (EventSource cannot send an Authorization header). One stream per tab; pages listen to events.

import { token } from "./api.js";

const listeners = new Map(); // event name -> Set of callbacks
let controller = null;
let connected = false;
const statusListeners = new Set();

export function on(event, callback) {
  if (!listeners.has(event)) listeners.set(event, new Set());
  listeners.get(event).add(callback);
  return () => listeners.get(event).delete(callback);
}

export function onStatus(callback) {
  statusListeners.add(callback);
  callback(connected);
  return () => statusListeners.delete(callback);
}

function setConnected(value) {
  if (connected === value) return;
  connected = value;
  statusListeners.forEach((callback) => callback(value));
}

function dispatch(event, data) {
  const callbacks = listeners.get(event);
  if (!callbacks) return;
  const payload = data === "" ? null : JSON.parse(data);
  callbacks.forEach((callback) => callback(payload));
}

/** Parse text/event-stream blocks; returns what is left of an incomplete block. */
function parse(buffer) {
  const blocks = buffer.split(/\r?\n\r?\n/);
  const rest = blocks.pop();
  for (const block of blocks) {
    let event = "message";
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue; // a keep-alive comment
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) dispatch(event, data.join("\n"));
  }
  return rest;
}

async function run(signal) {
  let delay = 500;
  while (!signal.aborted) {
    try {
      const response = await fetch("/v1/stream", {
        headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" },
        signal,
        cache: "no-store",
      });
      if (response.status === 401) {
        dispatch("unauthorized", "");
        return;
      }
      if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      setConnected(true);
      delay = 500;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = parse(buffer + value);
      }
    } catch (error) {
      if (signal.aborted) return;
    }
    setConnected(false);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

export function start() {
  stop();
  controller = new AbortController();
  run(controller.signal);
}

export function stop() {
  if (controller) controller.abort();
  controller = null;
  setConnected(false);
}
