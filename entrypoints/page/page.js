// The wanjax page: makes videos through the video API (/v1/videos) and shows them.
// Plain script, no build step, nothing fetched from elsewhere. With a server token, the
// token is asked for once and kept for the browser tab (sessionStorage); videos are fetched
// with it and played from blob URLs, since a <video src> cannot send a header.
"use strict";

const POLL_MS = 500;
const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("wanjax-token"), model: null, timer: null, cards: new Map(), caches: {} };

async function call(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    askForToken();
    throw new Error("the server asks for its token");
  }
  return response;
}

async function errorText(response) {
  try {
    return (await response.json()).error.message;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

function askForToken() {
  $("main").hidden = true;
  $("token-form").hidden = false;
  $("token").focus();
}

async function start() {
  const response = await call("/v1/models");
  const model = (await response.json()).data[0];
  state.model = model.id;
  $("model").textContent = model.id;
  const d = model.defaults;
  $("size").placeholder = `${d.width}x${d.height}`;
  $("length").placeholder = `${d.num_frames} frames`;
  $("steps").placeholder = String(d.num_inference_steps);
  $("negative_prompt").placeholder = d.negative_prompt;
  offerCaches(model.cache_policies, d.cache_policy);
  $("token-form").hidden = true;
  $("main").hidden = false;
  refresh();
}

// The step caches the server offers (GET /v1/models: each policy with its keys at the server's
// values); the chosen one's keys that take a number or a switch get a field each, empty (or as
// the server has it) meaning the server's value.
function offerCaches(policies, serverPolicy) {
  state.caches = policies;
  const select = $("cache_policy");
  select.replaceChildren(new Option(`server's (${serverPolicy})`, ""));
  for (const name of Object.keys(policies)) select.add(new Option(name, name));
  select.onchange = showCacheKeys;
  showCacheKeys();
}

function showCacheKeys() {
  const policy = $("cache_policy").value;
  const keys = Object.entries(state.caches[policy] || {}).filter(([, value]) => ["number", "boolean"].includes(typeof value));
  const fieldset = $("cache_keys");
  fieldset.replaceChildren(fieldset.firstElementChild);
  $("cache_legend").textContent = `${policy} settings (docs/caching.md)`;
  for (const [key, value] of keys) {
    const input = document.createElement("input");
    input.id = `cache-${key}`;
    input.dataset.key = key;
    if (typeof value === "boolean") {
      input.type = "checkbox";
      input.checked = value;
    } else {
      input.type = "number";
      input.step = "any";
      input.placeholder = String(value);
    }
    const label = document.createElement("label");
    label.append(`${key} `, input);
    fieldset.append(label);
  }
  fieldset.hidden = keys.length === 0;
}

function appendCache(form) {
  const policy = $("cache_policy").value;
  if (policy === "") return;
  form.append("cache_policy", policy);
  for (const input of $("cache_keys").querySelectorAll("input")) {
    const value = input.type === "checkbox" ? String(input.checked) : input.value.trim();
    if (value !== "") form.append(input.dataset.key, value);
  }
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value;
  sessionStorage.setItem("wanjax-token", state.token);
  start().catch(() => {});
});

$("create").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("form-error").textContent = "";
  const form = new FormData();
  form.append("prompt", $("prompt").value);
  form.append("model", state.model);
  const optional = { negative_prompt: $("negative_prompt").value, size: $("size").value,
                     num_inference_steps: $("steps").value, [$("length_unit").value]: $("length").value };
  for (const [name, value] of Object.entries(optional)) {
    if (value.trim() !== "") form.append(name, value.trim());
  }
  const seed = $("seed").value.trim();
  form.append("seed", seed === "" ? String(Math.floor(Math.random() * 2 ** 31)) : seed);
  appendCache(form);
  if ($("image").files.length) form.append("input_reference", $("image").files[0]);
  $("submit").disabled = true;
  try {
    const response = await call("/v1/videos", { method: "POST", body: form });
    if (!response.ok) $("form-error").textContent = await errorText(response);
    refresh();
  } catch (error) {
    $("form-error").textContent = error.message;
  } finally {
    $("submit").disabled = false;
  }
});

async function refresh() {
  clearTimeout(state.timer);
  let videos;
  try {
    videos = (await (await call("/v1/videos?limit=20")).json()).data;
  } catch (error) {
    return;
  }
  const seen = new Set();
  for (const video of videos) {
    seen.add(video.id);
    show(video);
  }
  for (const [id, card] of state.cards) {
    if (!seen.has(id)) forget(id, card);
  }
  if (videos.some((v) => v.status === "queued" || v.status === "in_progress")) {
    state.timer = setTimeout(refresh, POLL_MS);
  }
}

function statusOf(video) {
  return video.error && video.error.code === "cancelled" ? "cancelled" : video.status;
}

function show(video) {
  let card = state.cards.get(video.id);
  if (!card) {
    card = $("job-template").content.firstElementChild.cloneNode(true);
    card.dataset.id = video.id;
    card.querySelector(".prompt").textContent = video.prompt;
    const cache = video.cache && video.cache.cache_policy !== "none" ? `, step cache ${video.cache.cache_policy}` : "";
    card.querySelector(".meta").textContent =
      `${video.size}, ${video.seconds} s (${video.num_frames} frames), ${video.num_inference_steps} steps, seed ${video.seed}${cache}`;
    card.querySelector(".cancel").addEventListener("click", () => remove(video.id));
    card.querySelector(".delete").addEventListener("click", () => remove(video.id));
    const list = $("jobs");
    const newer = [...list.children].find((other) => Number(other.dataset.created) < video.created_at);
    card.dataset.created = String(video.created_at);
    list.insertBefore(card, newer || null);
    state.cards.set(video.id, card);
  }
  const status = statusOf(video);
  const running = status === "queued" || status === "in_progress";
  card.dataset.status = status;
  card.querySelector(".status").textContent = status === "in_progress" ? `${video.progress}%` : status;
  card.querySelector("progress").value = video.progress;
  card.querySelector(".error").textContent = status === "failed" ? video.error.message : "";
  card.querySelector(".cancel").hidden = !running;
  card.querySelector(".delete").hidden = running;
  if (status === "completed" && !card.dataset.loading) {
    card.dataset.loading = "yes";
    load(video.id, card.querySelector("video"));
  }
}

async function load(id, element) {
  const response = await call(`/v1/videos/${id}/content`);
  if (!response.ok) return;
  element.src = URL.createObjectURL(await response.blob());
  element.hidden = false;
}

async function remove(id) {
  const response = await call(`/v1/videos/${id}`, { method: "DELETE" });
  if (!response.ok) $("form-error").textContent = await errorText(response);
  refresh();
}

function forget(id, card) {
  const element = card.querySelector("video");
  if (element.src) URL.revokeObjectURL(element.src);
  card.remove();
  state.cards.delete(id);
}

start().catch(() => {});
