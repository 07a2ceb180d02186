// One node's page: every field, the current step and deploy progress (polled while the node
// is busy), ports, history, BIOS, firmware, inventory, the actions (each confirmed first) and
// the serial console.

import { el, api, confirmAction, showBanner } from "/ui/app.js";
import { stateBadge, isBusy } from "/ui/views.js";
import { consoleSection } from "/ui/console.js";

/// How often the page re-reads the node: quickly while something is under way.
const BUSY_POLL_MS = 1000;
const IDLE_POLL_MS = 5000;

/// The provision actions: the verb sent, and the states Ironic's state machine accepts it in
/// (the server has the last word; this only greys out buttons that would be refused).
const PROVISION_ACTIONS = [
  { label: "Manage", verb: "manage", from: ["enroll", "available", "inspect failed", "clean failed", "adopt failed"] },
  { label: "Inspect", verb: "inspect", from: ["manageable", "inspect failed"] },
  { label: "Provide", verb: "provide", from: ["manageable"] },
  { label: "Clean…", verb: "clean", from: ["manageable"] },
  { label: "Deploy…", verb: "active", from: ["available", "deploy failed"] },
  { label: "Undeploy", verb: "deleted", from: ["active", "deploy failed", "error", "rescue failed", "rescue"] },
  { label: "Abort", verb: "abort", from: ["inspect wait", "inspecting", "clean wait", "wait call-back", "rescue wait", "service wait", "clean hold", "deploy hold", "service hold"] },
];

const BOOT_DEVICES = ["pxe", "disk", "cdrom", "bios", "safe"];

const json = (value) => el("pre", {}, JSON.stringify(value, null, 2));

/// A two-column table of `object`'s keys and values (objects shown as JSON).
function keyValues(object) {
  const rows = Object.keys(object ?? {}).sort().flatMap((key) => {
    const value = object[key];
    const shown = value !== null && typeof value === "object" ? json(value) : String(value ?? "—");
    return [el("div", { class: "k" }, key), el("div", { "data-field": key }, shown)];
  });
  return rows.length ? el("div", { class: "kv" }, rows) : el("p", { class: "muted" }, "None.");
}

function table(columns, rows) {
  if (!rows.length) return el("p", { class: "muted" }, "None.");
  return el("table", {},
    el("thead", {}, el("tr", {}, columns.map((column) => el("th", {}, column)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, columns.map((column) => {
      const value = row[column];
      return el("td", { class: "wrap" }, value !== null && typeof value === "object"
        ? json(value) : String(value ?? ""));
    })))));
}

function humanBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

/// The step the node is running (clean, deploy or service) and the bytes the agent wrote.
function currentStep(node) {
  const step = [["deploy", node.deploy_step], ["clean", node.clean_step], ["service", node.service_step]]
    .find(([, value]) => value && Object.keys(value).length);
  const progress = node.driver_internal_info?.deploy_progress;
  const parts = [];
  if (step) {
    const [kind, value] = step;
    parts.push(el("div", { id: "step-name" }, `${kind} step: `,
      el("strong", {}, `${value.interface ?? "?"}.${value.step ?? "?"}`),
      value.priority !== undefined ? el("span", { class: "muted" }, ` (priority ${value.priority})`) : null));
  }
  if (progress && isBusy(node.provision_state)) {
    const written = progress.bytes_written ?? 0;
    const total = progress.total_bytes;
    const percent = total ? Math.min(100, (100 * written) / total) : null;
    parts.push(el("div", { id: "progress-text" }, `${progress.step ?? "writing"}: ${humanBytes(written)}`,
      total ? ` of ${humanBytes(total)} (${percent.toFixed(0)} %)` : " written"));
    if (percent !== null) {
      parts.push(el("div", { class: "progress", id: "progress" },
        el("div", { style: `width: ${percent.toFixed(1)}%` })));
    }
  }
  if (!parts.length) {
    parts.push(el("span", { class: "muted" }, isBusy(node.provision_state)
      ? "Working; no step reported yet." : "No step under way."));
  }
  return el("div", { id: "current-step" }, parts);
}

/// Reads a sub-resource, or says why it cannot be shown.
async function optional(path, render) {
  try {
    return render(await api("GET", path));
  } catch (error) {
    return el("p", { class: "muted" }, `Not available: ${error.message}`);
  }
}

/// The action buttons. `mayAct`: whether the caller's role lets it act on this node.
function actions(node, mayAct, run) {
  const why = mayAct ? undefined : "Your role may only read this node.";
  const buttons = PROVISION_ACTIONS.map((action) => el("button", {
    type: "button", "data-action": action.verb, title: why,
    disabled: !mayAct || !action.from.includes(node.provision_state),
    class: action.verb === "abort" ? "danger" : "",
    onclick: () => run(() => provision(node, action)),
  }, action.label));
  const power = [["power on", "Power on"], ["power off", "Power off"], ["rebooting", "Reboot"]]
    .map(([target, label]) => el("button", {
      type: "button", "data-action": target, title: why, disabled: !mayAct,
      onclick: () => run(async () => {
        if (!(await confirmAction(`${label} ${nodeName(node)}?`, "The BMC is asked at once."))) return;
        await api("PUT", `/v1/nodes/${node.uuid}/states/power`, { target });
        return `${label}: requested.`;
      }),
    }, label));
  const maintenance = el("button", {
    type: "button", "data-action": "maintenance", title: why, disabled: !mayAct,
    onclick: () => run(() => toggleMaintenance(node)),
  }, node.maintenance ? "End maintenance" : "Maintenance…");
  const boot = el("button", {
    type: "button", "data-action": "boot-device", title: why, disabled: !mayAct,
    onclick: () => run(() => bootDevice(node)),
  }, "Boot device…");
  return el("div", { class: "actions", id: "actions" }, buttons, power, maintenance, boot);
}

const nodeName = (node) => node.name ?? node.uuid;

async function provision(node, action) {
  const name = nodeName(node);
  const body = { target: action.verb };
  if (action.verb === "active") {
    const info = node.instance_info ?? {};
    const values = await confirmAction(`Deploy ${name}?`,
      "The image is written to the node's disk and the node boots it.", [
        el("label", {}, "Image URL", el("input", { name: "image_source", required: true, size: 50, value: info.image_source ?? "" })),
        el("label", {}, "Checksum (the image's sha256, sha512 or md5, or a URL of a checksum file)",
          el("input", { name: "image_checksum", required: true, size: 50, value: info.image_checksum ?? "" })),
      ]);
    if (!values) return;
    await api("PATCH", `/v1/nodes/${node.uuid}`, [
      { op: "add", path: "/instance_info/image_source", value: values.image_source },
      { op: "add", path: "/instance_info/image_checksum", value: values.image_checksum },
    ]);
  } else if (action.verb === "clean") {
    const values = await confirmAction(`Clean ${name}?`, "Manual cleaning runs these steps in order.", [
      el("label", {}, "Steps (JSON list)", el("textarea", { name: "clean_steps" },
        JSON.stringify([{ interface: "deploy", step: "erase_devices_metadata" }], null, 2))),
    ]);
    if (!values) return;
    try {
      body.clean_steps = JSON.parse(values.clean_steps);
    } catch (error) {
      throw new Error(`The steps are not JSON: ${error.message}`);
    }
  } else {
    const warning = action.verb === "abort" ? "The running operation stops; the node goes to its failed state."
      : action.verb === "deleted" ? "The instance is torn down and the disks cleaned." : "";
    if (!(await confirmAction(`${action.label} ${name}?`, warning))) return;
  }
  await api("PUT", `/v1/nodes/${node.uuid}/states/provision`, body);
  return `${action.label.replace("…", "")}: accepted.`;
}

async function toggleMaintenance(node) {
  if (node.maintenance) {
    if (!(await confirmAction(`End maintenance of ${nodeName(node)}?`, ""))) return;
    await api("DELETE", `/v1/nodes/${node.uuid}/maintenance`);
    return "Maintenance ended.";
  }
  const values = await confirmAction(`Put ${nodeName(node)} in maintenance?`,
    "Ferric stops acting on the node (power sync included) until maintenance ends.",
    [el("label", {}, "Reason", el("input", { name: "reason", size: 50 }))]);
  if (!values) return;
  await api("PUT", `/v1/nodes/${node.uuid}/maintenance`, values.reason ? { reason: values.reason } : {});
  return "Maintenance set.";
}

async function bootDevice(node) {
  const values = await confirmAction(`Boot device of ${nodeName(node)}`, "Set on the BMC at once.", [
    el("label", {}, "Device", el("select", { name: "boot_device" },
      BOOT_DEVICES.map((device) => el("option", { value: device }, device)))),
    el("label", {}, el("input", { type: "checkbox", name: "persistent" }), " persistent"),
  ]);
  if (!values) return;
  await api("PUT", `/v1/nodes/${node.uuid}/management/boot_device`, values);
  return `Boot device: ${values.boot_device}.`;
}

/// `#/nodes/{ident}`.
export async function renderNode(view, ident) {
  let node = await api("GET", `/v1/nodes/${encodeURIComponent(ident)}`);
  const uuid = node.uuid;
  // Whether the caller may act: validation is a read that needs the same rule as the
  // actions (`baremetal:node:validate`, members of the node's project and admins).
  let mayAct = true;
  let validation = null;
  try {
    validation = await api("GET", `/v1/nodes/${uuid}/validate`);
  } catch (error) {
    mayAct = error.status !== 403 && error.status !== 404;
  }
  let timer = null;
  let stopped = false;
  const header = el("div", { id: "node-header" });
  const details = el("div", { id: "node-details" });
  const sections = el("div", { id: "node-sections" });
  const consolePart = consoleSection(uuid, () => node, mayAct);

  async function run(action) {
    try {
      const message = await action();
      if (message) showBanner(message, "info");
    } catch (error) {
      showBanner(error.message);
    }
    await refresh();
  }

  function renderHeader() {
    header.replaceChildren(...[
      el("h1", {}, nodeName(node), " ", stateBadge(node.provision_state),
        node.target_provision_state ? el("span", { class: "muted", id: "target-state" }, ` → ${node.target_provision_state}`) : null,
        node.maintenance ? el("span", { class: "badge maint" }, " maintenance") : null),
      el("p", { class: "muted mono" }, uuid, ` · ${node.driver} · ${node.power_state ?? "power unknown"}`,
        node.target_power_state ? ` → ${node.target_power_state}` : ""),
      node.last_error ? el("p", { class: "error", id: "last-error" }, node.last_error) : null,
      node.maintenance_reason ? el("p", { class: "muted" }, `Maintenance: ${node.maintenance_reason}`) : null,
      mayAct ? null : el("p", { class: "muted", id: "read-only" }, "Read-only: your role may not act on this node."),
      actions(node, mayAct, run),
      el("div", { class: "card" }, el("h2", {}, "Current step"), currentStep(node)),
    ].filter(Boolean));
  }

  function renderDetails() {
    details.replaceChildren(
      el("details", { open: true }, el("summary", {}, "Fields"), keyValues(node)),
      el("details", {}, el("summary", {}, "Properties"), keyValues(node.properties)),
    );
  }

  async function renderSections() {
    const [ports, history, bios, firmware, inventory] = await Promise.all([
      optional(`/v1/nodes/${uuid}/ports?detail=True`, (body) => table(
        ["address", "uuid", "pxe_enabled", "physical_network", "local_link_connection"], body.ports)),
      optional(`/v1/nodes/${uuid}/history?detail=True`, (body) => table(
        ["created_at", "severity", "event_type", "event", "user"], [...body.history].reverse())),
      optional(`/v1/nodes/${uuid}/bios?detail=True`, (body) => table(["name", "value", "read_only"], body.bios)),
      optional(`/v1/nodes/${uuid}/firmware`, (body) => table(
        ["component", "current_version", "initial_version", "last_version_flashed"], body.firmware)),
      optional(`/v1/nodes/${uuid}/inventory`, (body) => json(body)),
    ]);
    if (stopped) return;
    sections.replaceChildren(...[
      el("details", { open: true, id: "ports" }, el("summary", {}, "Ports"), ports),
      el("details", { open: true, id: "history" }, el("summary", {}, "History"), history),
      el("details", { id: "bios" }, el("summary", {}, "BIOS settings"), bios),
      el("details", { id: "firmware" }, el("summary", {}, "Firmware"), firmware),
      el("details", { id: "inventory" }, el("summary", {}, "Inventory"), inventory),
      validation ? el("details", { id: "validation" }, el("summary", {}, "Validation"),
        table(["interface", "result", "reason"], Object.entries(validation).map(
          ([name, value]) => ({ interface: name, ...value })))) : null,
    ].filter(Boolean));
  }

  /// Re-reads the node, redraws what changed and arms the next poll.
  async function refresh() {
    try {
      const fresh = await api("GET", `/v1/nodes/${uuid}`);
      const changed = fresh.updated_at !== node.updated_at || fresh.provision_state !== node.provision_state;
      node = fresh;
      if (changed) {
        renderHeader();
        renderDetails();
        consolePart.update();
        await renderSections();
      }
    } catch (error) {
      showBanner(`Cannot refresh the node: ${error.message}`);
    }
    if (!stopped) {
      clearTimeout(timer);
      const busy = isBusy(node.provision_state) || node.target_provision_state || node.target_power_state;
      timer = setTimeout(refresh, busy ? BUSY_POLL_MS : IDLE_POLL_MS);
    }
  }

  renderHeader();
  renderDetails();
  await renderSections();
  view.replaceChildren(
    el("p", {}, el("a", { href: "#/nodes" }, "← Nodes")),
    header,
    consolePart.element,
    sections,
    details,
  );
  timer = setTimeout(refresh, isBusy(node.provision_state) ? BUSY_POLL_MS : IDLE_POLL_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
    consolePart.close();
  };
}
