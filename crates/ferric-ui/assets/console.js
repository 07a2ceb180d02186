// The node page's serial console: switch it on or off (Ironic's `PUT …/states/console`) and
// watch it in a terminal (xterm.js, loaded only when opened) over the console WebSocket,
// `GET /v1/nodes/{node}/console/stream`: binary frames of console bytes from the server
// (first the retained tail), keystrokes from the terminal. Close code 1008 means the caller
// may only watch; 1000 that the console was switched off.

import { el, api, showBanner } from "/ui/app.js";

/// Where the console stream of `uuid` is: the `console_info.url` of the node's console when
/// that is a WebSocket URL (it may carry a token for browsers, which cannot send an
/// Authorization header on a WebSocket), else the stream endpoint on this origin.
async function streamUrl(uuid) {
  try {
    const state = await api("GET", `/v1/nodes/${uuid}/states/console`);
    const url = state?.console_info?.url;
    if (typeof url === "string" && /^wss?:\/\//.test(url)) return url;
  } catch (_) {
    // No console state to read: try the stream endpoint itself.
  }
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}/v1/nodes/${uuid}/console/stream`;
}

/// The section and its hooks: `update()` after the node changed, `close()` when leaving.
export function consoleSection(uuid, getNode, mayAct) {
  const status = el("span", { id: "console-status", class: "muted" });
  const toggle = el("button", { type: "button", id: "console-toggle", disabled: !mayAct });
  const open = el("button", { type: "button", id: "console-open" }, "Open terminal");
  const screen = el("div", { id: "terminal", hidden: true });
  let socket = null;
  let terminal = null;

  function update() {
    const enabled = Boolean(getNode().console_enabled);
    toggle.textContent = enabled ? "Disable console" : "Enable console";
    if (!socket) status.textContent = enabled ? "Console enabled." : "Console disabled.";
  }

  toggle.addEventListener("click", async () => {
    const enabled = !getNode().console_enabled;
    try {
      await api("PUT", `/v1/nodes/${uuid}/states/console`, { enabled });
      status.textContent = enabled ? "Enabling the console…" : "Disabling the console…";
    } catch (error) {
      showBanner(`Console: ${error.message}`);
    }
  });

  async function connect() {
    screen.hidden = false;
    if (!terminal) {
      try {
        const { Terminal } = await import("/ui/vendor/xterm.mjs");
        terminal = new Terminal({ rows: 22, cols: 100, fontSize: 13, disableStdin: !mayAct, convertEol: false });
        terminal.open(screen);
        // The widget, for scripts that read what it holds (the lab's browser test reads its
        // buffer: only the visible rows are in the DOM).
        screen.terminal = terminal;
        terminal.onData((data) => {
          if (mayAct && socket?.readyState === WebSocket.OPEN) socket.send(data);
        });
      } catch (error) {
        // Without the widget: a plain text view of the same bytes.
        const pre = el("pre", { class: "mono", style: "color: #ddd" });
        screen.replaceChildren(pre);
        const decoder = new TextDecoder();
        terminal = { write: (bytes) => pre.append(typeof bytes === "string" ? bytes : decoder.decode(bytes)), dispose() {} };
      }
    }
    socket = new WebSocket(await streamUrl(uuid));
    socket.binaryType = "arraybuffer";
    status.textContent = "Connecting…";
    socket.addEventListener("open", () => {
      status.textContent = mayAct ? "Connected: typing goes to the machine." : "Connected (watching only).";
      open.textContent = "Disconnect";
    });
    socket.addEventListener("message", (event) => {
      terminal.write(typeof event.data === "string" ? event.data : new Uint8Array(event.data));
    });
    socket.addEventListener("close", (event) => {
      status.textContent = event.code === 1008 ? "Closed: your role may only watch this console."
        : event.code === 1000 ? "Closed: the console is disabled."
          : `Closed (code ${event.code}${event.reason ? `: ${event.reason}` : ""}).`;
      socket = null;
      open.textContent = "Open terminal";
    });
  }

  open.addEventListener("click", () => {
    if (socket) socket.close(1000);
    else connect();
  });

  update();
  return {
    element: el("div", { class: "card", id: "console" },
      el("h2", {}, "Serial console"), el("div", { class: "actions" }, toggle, open, status), screen),
    update,
    close() {
      if (socket) socket.close(1000);
      terminal?.dispose();
    },
  };
}
