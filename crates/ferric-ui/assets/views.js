// The fleet views: the overview (nodes by provision state, failed and maintenance nodes
// first) and the node table (server-side paging, sorting, filters and search).

import { $, el, api, apiAll } from "/ui/app.js";

/// Ironic's provision states, in the order of a node's life.
export const STATES = [
  "enroll", "verifying", "manageable", "inspecting", "inspect wait", "inspect failed",
  "cleaning", "clean wait", "clean hold", "clean failed", "available", "deploying",
  "wait call-back", "deploy hold", "deploy failed", "active", "deleting", "error",
  "adopting", "adopt failed", "rescuing", "rescue wait", "rescue", "rescue failed",
  "unrescuing", "unrescue failed", "servicing", "service wait", "service hold",
  "service failed",
];

export const isFailed = (state) => state === "error" || /failed$/.test(state ?? "");
export const isBusy = (state) => /(ing|wait|call-back|hold)$/.test(state ?? "");

/// A provision state as a coloured badge.
export function stateBadge(state) {
  const kind = isFailed(state) ? "failed" : isBusy(state) ? "busy"
    : ["active", "available"].includes(state) ? "ok" : "";
  return el("span", { class: `badge ${kind}`, "data-state": state }, state ?? "—");
}

export const nodeLink = (node) =>
  el("a", { href: `#/nodes/${node.uuid}` }, node.name ?? node.uuid);

/// `#/`: how many nodes are in each state, and the nodes that need someone.
export async function renderOverview(view) {
  view.replaceChildren(el("h1", {}, "Fleet overview"), el("p", { class: "muted" }, "Loading…"));
  const started = performance.now();
  const nodes = await apiAll(
    "/v1/nodes?limit=1000&fields=uuid,name,provision_state,target_provision_state," +
      "maintenance,maintenance_reason,last_error,fault,power_state",
    "nodes");
  const counts = new Map();
  for (const node of nodes) counts.set(node.provision_state, (counts.get(node.provision_state) ?? 0) + 1);
  const maintenance = nodes.filter((node) => node.maintenance).length;
  const order = [...counts.keys()].sort((a, b) =>
    (isFailed(b) - isFailed(a)) || (counts.get(b) - counts.get(a)) || a.localeCompare(b));
  const cards = order.map((state) => el("a", {
    class: `state ${isFailed(state) ? "failed" : ""}`,
    href: `#/nodes?provision_state=${encodeURIComponent(state)}`,
    "data-state": state,
  }, el("div", { class: "count" }, counts.get(state)), stateBadge(state)));
  if (maintenance) {
    cards.unshift(el("a", { class: "state", href: "#/nodes?maintenance=true", "data-state": "maintenance" },
      el("div", { class: "count" }, maintenance), el("span", { class: "badge maint" }, "maintenance")));
  }
  // Failed first, then maintenance, then anything else carrying an error.
  const rank = (node) => isFailed(node.provision_state) ? 0 : node.maintenance ? 1 : 2;
  const attention = nodes
    .filter((node) => isFailed(node.provision_state) || node.maintenance || node.last_error)
    .sort((a, b) => rank(a) - rank(b));
  const shown = attention.slice(0, 200);
  const rows = shown.map((node) => el("tr", { "data-uuid": node.uuid },
    el("td", {}, nodeLink(node)),
    el("td", {}, stateBadge(node.provision_state),
      node.maintenance ? el("span", { class: "badge maint" }, "maintenance") : null),
    el("td", {}, node.power_state ?? "—"),
    el("td", { class: "wrap error last-error" },
      node.last_error ?? node.maintenance_reason ?? node.fault ?? "")));
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  // replaceChildren writes a null as the text "null": leave absent parts out.
  view.replaceChildren(...[
    el("h1", {}, "Fleet overview"),
    el("p", { class: "muted" }, `${nodes.length} nodes (read in ${seconds} s). `,
      el("a", { href: "#/nodes" }, "All nodes")),
    el("div", { class: "states", id: "states" }, cards),
    el("h2", {}, `Needing attention (${attention.length})`),
    attention.length === 0
      ? el("p", { class: "muted" }, "No failed nodes, none in maintenance.")
      : el("table", { id: "attention" },
        el("thead", {}, el("tr", {}, el("th", {}, "Node"), el("th", {}, "State"),
          el("th", {}, "Power"), el("th", {}, "Last error / maintenance reason"))),
        el("tbody", {}, rows)),
    attention.length > shown.length
      ? el("p", { class: "muted" }, `…and ${attention.length - shown.length} more.`) : null,
  ].filter(Boolean));
  return null;
}

const TABLE_FIELDS = "uuid,name,provision_state,target_provision_state,power_state,driver," +
  "owner,conductor_group,maintenance";
const PAGE_SIZE = 50;
const FILTERS = ["provision_state", "driver", "owner", "conductor_group", "maintenance"];
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAC_PATTERN = /^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$/i;

/// The nodes a search names: a UUID or a name (`GET /v1/nodes/{ident}`), or a MAC address
/// (the node of the port with that address).
async function search(query) {
  let ident = query;
  if (MAC_PATTERN.test(query)) {
    const address = query.toLowerCase().replaceAll("-", ":");
    const ports = await api("GET", `/v1/ports?address=${encodeURIComponent(address)}&fields=node_uuid`);
    if (ports.ports.length === 0) return [];
    ident = ports.ports[0].node_uuid;
  }
  try {
    return [await api("GET", `/v1/nodes/${encodeURIComponent(ident)}?fields=${TABLE_FIELDS}`)];
  } catch (error) {
    if (error.status === 404 || error.status === 400) return [];
    throw error;
  }
}

/// `#/nodes`: one page of nodes; filters, sorting and paging are the API's query parameters.
export async function renderNodes(view, params) {
  const state = {
    filters: Object.fromEntries(FILTERS.map((name) => [name, params.get(name) ?? ""])),
    sortKey: params.get("sort_key") ?? "name",
    sortDir: params.get("sort_dir") ?? "asc",
    query: params.get("q") ?? "",
    markers: [], // the marker of every page before this one
    loads: 0,
  };
  let drivers = [];
  try {
    drivers = (await api("GET", "/v1/drivers")).drivers.map((driver) => driver.name);
  } catch (_) {
    // Readers without the driver rule still get a free-text filter below.
  }
  const input = (name, placeholder) => el("input", {
    name, placeholder, value: state.filters[name], size: 14,
    onchange: (event) => { state.filters[name] = event.target.value.trim(); reload(); },
  });
  const select = (name, options) => el("select", {
    name, onchange: (event) => { state.filters[name] = event.target.value; reload(); },
  }, el("option", { value: "" }, "any"),
  options.map((option) => el("option", { value: option, selected: state.filters[name] === option }, option)));
  const searchBox = el("input", {
    type: "search", name: "q", placeholder: "name, UUID or MAC", value: state.query, size: 28,
  });
  const searchForm = el("form", {
    id: "search",
    onsubmit: (event) => { event.preventDefault(); state.query = searchBox.value.trim(); reload(); },
  }, el("label", {}, "Search", searchBox));
  const status = el("span", { id: "table-status", class: "muted" });
  const tbody = el("tbody");
  const previous = el("button", { type: "button", id: "previous" }, "← Previous");
  const next = el("button", { type: "button", id: "next" }, "Next →");
  const columns = [
    ["name", "Name"], ["uuid", "UUID"], ["provision_state", "Provision state"],
    ["power_state", "Power"], ["driver", "Driver"], ["owner", null], ["conductor_group", null],
    ["maintenance", "Maintenance"],
  ];
  const headers = columns.map(([key, sortable]) => el("th", {
    class: sortable ? "sortable" : "", "data-key": key,
    onclick: sortable ? () => {
      state.sortDir = state.sortKey === key && state.sortDir === "asc" ? "desc" : "asc";
      state.sortKey = key;
      reload();
    } : undefined,
  }, (sortable ?? key).replace("_", " ")));

  async function load(marker) {
    const started = performance.now();
    let nodes;
    let more = false;
    if (state.query) {
      nodes = await search(state.query);
    } else {
      const query = new URLSearchParams({
        limit: PAGE_SIZE, fields: TABLE_FIELDS, sort_key: state.sortKey, sort_dir: state.sortDir,
      });
      for (const [name, value] of Object.entries(state.filters)) if (value) query.set(name, value);
      if (marker) query.set("marker", marker);
      const page = await api("GET", `/v1/nodes?${query}`);
      nodes = page.nodes;
      more = Boolean(page.next);
    }
    tbody.replaceChildren(...nodes.map((node) => el("tr", { "data-uuid": node.uuid },
      el("td", {}, nodeLink(node)),
      el("td", { class: "mono" }, node.uuid),
      el("td", {}, stateBadge(node.provision_state),
        node.target_provision_state ? el("span", { class: "muted" }, ` → ${node.target_provision_state}`) : null),
      el("td", {}, node.power_state ?? "—"),
      el("td", {}, node.driver),
      el("td", {}, node.owner ?? ""),
      el("td", {}, node.conductor_group ?? ""),
      el("td", {}, node.maintenance ? el("span", { class: "badge maint" }, "yes") : ""))));
    if (nodes.length === 0) {
      tbody.replaceChildren(el("tr", {}, el("td", { colspan: columns.length, class: "muted" },
        state.query ? `No node named or with the address “${state.query}”.` : "No nodes match.")));
    }
    const milliseconds = Math.round(performance.now() - started);
    const page = state.markers.length + 1;
    status.textContent = state.query
      ? `${nodes.length} found in ${milliseconds} ms`
      : `page ${page}, ${nodes.length} nodes, ${milliseconds} ms`;
    previous.disabled = state.markers.length === 0 || Boolean(state.query);
    next.disabled = !more;
    next.dataset.marker = nodes.length ? nodes[nodes.length - 1].uuid : "";
    for (const header of headers) {
      header.classList.toggle("sorted", header.dataset.key === state.sortKey);
      header.classList.toggle("desc", state.sortDir === "desc");
    }
    state.loads += 1;
    view.dataset.loads = state.loads;
    view.dataset.lastMs = milliseconds;
  }

  /// Back to page one with the current filters, and the URL says which (for a bookmark).
  async function reload() {
    state.markers = [];
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(state.filters)) if (value) query.set(name, value);
    if (state.query) query.set("q", state.query);
    if (state.sortKey !== "name") query.set("sort_key", state.sortKey);
    if (state.sortDir !== "asc") query.set("sort_dir", state.sortDir);
    history.replaceState(null, "", `#/nodes${query.size ? `?${query}` : ""}`);
    await guarded(() => load(null));
  }

  async function guarded(action) {
    try {
      await action();
    } catch (error) {
      status.textContent = error.message;
      status.className = "error";
      return;
    }
    status.className = "muted";
  }

  next.addEventListener("click", () => guarded(async () => {
    const marker = next.dataset.marker;
    state.markers.push(marker);
    try {
      await load(marker);
    } catch (error) {
      state.markers.pop();
      throw error;
    }
  }));
  previous.addEventListener("click", () => guarded(async () => {
    state.markers.pop();
    await load(state.markers[state.markers.length - 1] ?? null);
  }));

  view.replaceChildren(
    el("h1", {}, "Nodes"),
    el("div", { class: "toolbar", id: "filters" },
      searchForm,
      el("label", {}, "Provision state", select("provision_state", STATES)),
      el("label", {}, "Driver", drivers.length ? select("driver", drivers) : input("driver", "driver")),
      el("label", {}, "Owner", input("owner", "project")),
      el("label", {}, "Conductor group", input("conductor_group", "group")),
      el("label", {}, "Maintenance", select("maintenance", ["true", "false"])),
      el("button", {
        type: "button", onclick: () => {
          for (const name of FILTERS) state.filters[name] = "";
          state.query = "";
          searchBox.value = "";
          for (const field of $("#filters").querySelectorAll("input, select")) field.value = "";
          reload();
        },
      }, "Clear")),
    el("table", { id: "nodes" }, el("thead", {}, el("tr", {}, headers)), tbody),
    el("div", { class: "pager" }, previous, next, status),
  );
  await guarded(() => load(null));
  return null;
}
