// Ferric's web UI: the session (log in, log out), the API client and the router. Every view
// lives in views.js (overview, node table) or node.js (one node); they reach the API only
// through `api()` below, with the operator's own credentials.

import { renderOverview, renderNodes } from "/ui/views.js";
import { renderNode } from "/ui/node.js";

const CREDENTIALS_KEY = "ferric.credentials";
const USER_KEY = "ferric.user";

/// The microversion every request asks for: the newest the server has.
const API_VERSION = "latest";

export const $ = (selector, root = document) => root.querySelector(selector);

/// An element: `el("td", {class: "x"}, "text", childNode, …)`.
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/// An API error with the server's message (Ironic's double-encoded `error_message`).
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function errorMessage(status, text) {
  try {
    const body = JSON.parse(text);
    const inner = typeof body.error_message === "string"
      ? JSON.parse(body.error_message) : body.error_message;
    if (inner && inner.faultstring) return inner.faultstring;
  } catch (_) {
    // Not Ironic's body: show the text as it is.
  }
  return text || `HTTP ${status}`;
}

/// Calls the API: `api("GET", "/v1/nodes?limit=50")`. Resolves to the parsed body (or null),
/// rejects with an ApiError. A 401 ends the session.
export async function api(method, path, body) {
  const headers = {
    "Accept": "application/json",
    "X-OpenStack-Ironic-API-Version": API_VERSION,
  };
  const credentials = sessionStorage.getItem(CREDENTIALS_KEY);
  if (credentials) headers.Authorization = `Basic ${credentials}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  // `credentials: "omit"`: the browser neither adds nor prompts for credentials of its own;
  // only the header above authenticates.
  const response = await fetch(path, {
    method, headers, credentials: "omit",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) {
    if (response.status === 401 && currentUser() !== null) logout("Your session was refused: log in again.");
    throw new ApiError(response.status, errorMessage(response.status, text));
  }
  return text ? JSON.parse(text) : null;
}

/// Every page of a listing (`next` links), for the overview's counts.
export async function apiAll(path, key) {
  const items = [];
  let next = path;
  while (next) {
    const page = await api("GET", next);
    items.push(...page[key]);
    next = page.next ? new URL(page.next).pathname + new URL(page.next).search : null;
  }
  return items;
}

export function showBanner(message, kind = "error") {
  const banner = $("#banner");
  banner.textContent = message;
  banner.className = kind === "error" ? "" : kind;
  banner.hidden = !message;
}

/// Asks for confirmation in the dialog, with optional input `fields` (elements with a `name`);
/// resolves to a {name: value} object, or null when cancelled.
export function confirmAction(title, text, fields = []) {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-fields").replaceChildren(...fields);
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (dialog.returnValue !== "ok") return resolve(null);
      const values = {};
      for (const input of dialog.querySelectorAll("[name]")) {
        values[input.name] = input.type === "checkbox" ? input.checked : input.value;
      }
      resolve(values);
    }, { once: true });
  });
}

/// The signed-in user's name, or null.
export function currentUser() {
  return sessionStorage.getItem(USER_KEY);
}

function logout(message) {
  sessionStorage.removeItem(CREDENTIALS_KEY);
  sessionStorage.removeItem(USER_KEY);
  route();
  if (message) showBanner(message);
}

async function login(event) {
  event.preventDefault();
  const form = event.target;
  const user = form.user.value.trim();
  // btoa takes Latin-1: encode the UTF-8 bytes first.
  const pair = new TextEncoder().encode(`${user}:${form.password.value}`);
  const encoded = btoa(String.fromCharCode(...pair));
  sessionStorage.setItem(CREDENTIALS_KEY, encoded);
  try {
    await api("GET", "/v1/nodes?limit=1&fields=uuid");
  } catch (error) {
    sessionStorage.removeItem(CREDENTIALS_KEY);
    const message = $("#login-error");
    message.textContent = error.status === 401
      ? "Wrong user or password." : `The API refused: ${error.message}`;
    message.hidden = false;
    return;
  }
  sessionStorage.setItem(USER_KEY, user);
  form.reset();
  $("#login-error").hidden = true;
  showBanner("");
  route();
}

/// Whether the server lets everyone in (`noauth`): then there is nothing to log in to.
let openServer = null;
async function serverIsOpen() {
  if (openServer === null) {
    try {
      await api("GET", "/v1/nodes?limit=1&fields=uuid");
      openServer = true;
    } catch (_) {
      openServer = false;
    }
  }
  return openServer;
}

/// Replaces `#view` with an empty one and returns it. Each navigation renders into its own
/// element: a slow view still loading when the operator moves on (the overview reads the
/// whole fleet) then finishes into a detached element instead of drawing over the next page.
function freshView() {
  const view = el("section", { id: "view" }, el("p", { class: "muted" }, "Loading…"));
  $("#view").replaceWith(view);
  return view;
}

/// The view of the current `#/…` fragment; views stop their timers through `cleanup`.
let cleanup = null;
/// Counts navigations, so that a view finishing after the next one started is dropped.
let navigation = 0;
async function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const current = ++navigation;
  const view = freshView();
  const signedIn = currentUser() !== null || (await serverIsOpen());
  if (current !== navigation) return;
  $("#login-view").hidden = signedIn;
  $("#view").hidden = !signedIn;
  $("#menu").hidden = !signedIn;
  $("#logout").hidden = currentUser() === null;
  $("#who").hidden = !signedIn;
  $("#who").textContent = currentUser() ?? "no authentication (noauth)";
  if (!signedIn) return;
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query ?? "");
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("#menu a")) {
    link.classList.toggle("active", link.dataset.view === (parts[0] ?? "overview"));
  }
  let stop = null;
  try {
    if (parts.length === 0) stop = await renderOverview(view);
    else if (parts[0] === "nodes" && parts.length === 1) stop = await renderNodes(view, params);
    else if (parts[0] === "nodes") stop = await renderNode(view, decodeURIComponent(parts[1]));
    else view.replaceChildren(el("p", {}, "No such page. ", el("a", { href: "#/" }, "Overview")));
  } catch (error) {
    view.replaceChildren(el("p", { class: "error" }, error.message));
  }
  // Superseded while loading: its element is already detached; stop its timers too.
  if (current !== navigation) {
    if (stop) stop();
    return;
  }
  cleanup = stop;
}

$("#login").addEventListener("submit", login);
$("#logout").addEventListener("click", () => logout());
window.addEventListener("hashchange", () => {
  showBanner("");
  route();
});
route();
