"""The web UI's browser test: headless Chromium (Debian's, by its executable path) driven by
Playwright against a running `ferric server` with http_basic users (run by `cargo xtask
ui-test`, which starts the server and passes its address).

It enrolls the fleet through the API (fake-hardware nodes in several states, one failed with a
last_error, one in maintenance), then through the browser: logs in; checks the overview; times
filters, sorting, paging and searches in the node table; deploys a node and watches its state
and progress change without a reload; deploys and aborts another; opens the serial console
terminal; checks that a reader cannot press actions. Each page is saved as a screenshot.

Timings are printed, not asserted (the project's tests assert no timings); docs/ui.md quotes
them.

With --real-console the console step talks to the server's own console WebSocket instead of
the in-browser fake: for a server with the console work merged and a node whose console
prints (see docs/ui.md, "The console in the lab").
"""

import argparse
import base64
import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.request

from playwright.sync_api import Page, sync_playwright

ADMIN = ("admin", "admin-secret")
MEMBER = ("member", "member-secret")
READER = ("reader", "reader-secret")
OWNERS = ["p-red", "p-green", "p-blue", None]
GROUPS = ["", "", "rack-a", "rack-b"]
IMAGE = "http://images.example/ubuntu-24.04.qcow2"
CHECKSUM = "sha256:" + "ab" * 32
BOOT_LOG = (
    b"\x1b[0m[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)\r\n"
    b"[    0.000000] Command line: BOOT_IMAGE=/vmlinuz console=ttyS0,115200n8\r\n"
    b"[    1.234567] Run /init as init process\r\n"
    b"\r\nDebian GNU/Linux 12 node-console ttyS0\r\n\r\nnode-console login: "
)


class Api:
    """A small client of the API with basic auth."""

    def __init__(self, endpoint, user):
        self.endpoint = endpoint
        pair = f"{user[0]}:{user[1]}".encode()
        self.auth = "Basic " + base64.b64encode(pair).decode()

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)
        request.add_header("Authorization", self.auth)
        request.add_header("X-OpenStack-Ironic-API-Version", "latest")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path}: {error.code} {error.read().decode()}") from None
        return json.loads(text) if text else None

    def provision(self, uuid, target, **extra):
        for _ in range(50):
            try:
                return self.call("PUT", f"/v1/nodes/{uuid}/states/provision", {"target": target, **extra})
            except RuntimeError as error:
                # NodeLocked right after the previous transition: retry, as clients do.
                if "409" not in str(error):
                    raise
                time.sleep(0.2)
        raise RuntimeError(f"{uuid} stayed locked for {target}")

    def wait_state(self, uuid, state, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            node = self.call("GET", f"/v1/nodes/{uuid}")
            # A failed state keeps the target it failed to reach.
            settled = not node.get("target_provision_state") or state.endswith("failed")
            if node["provision_state"] == state and settled:
                return node
            time.sleep(0.2)
        raise RuntimeError(f"{uuid} did not reach {state}: it is {node['provision_state']}")


def enroll_fleet(api, count):
    """`count` nodes with owners, conductor groups and one port each; returns their bodies."""

    def create(n):
        body = {
            "name": f"node-{n:05d}",
            "driver": "fake-hardware",
            "resource_class": "baremetal",
            "properties": {"cpus": 32, "memory_mb": 131072, "local_gb": 900, "cpu_arch": "x86_64"},
        }
        if OWNERS[n % 4]:
            body["owner"] = OWNERS[n % 4]
        if GROUPS[n % 4]:
            body["conductor_group"] = GROUPS[n % 4]
        return api.call("POST", "/v1/nodes", body)

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        nodes = list(pool.map(create, range(count)))
    print(f"enrolled {count} nodes in {time.monotonic() - started:.1f} s", flush=True)
    return nodes


def demo_node(api, name, driver_info=None, owner=None, mac=None):
    body = {"name": name, "driver": "fake-hardware", "driver_info": driver_info or {},
            "properties": {"cpus": 16, "memory_mb": 65536, "local_gb": 480, "cpu_arch": "x86_64"}}
    if owner:
        body["owner"] = owner
    node = api.call("POST", "/v1/nodes", body)
    if mac:
        api.call("POST", "/v1/ports", {"node_uuid": node["uuid"], "address": mac})
    return node["uuid"]


def make_available(api, uuid):
    api.provision(uuid, "manage")
    api.wait_state(uuid, "manageable")
    api.provision(uuid, "provide")
    api.wait_state(uuid, "available")


def seed(api, count):
    """The fleet, and the demo nodes in several states; returns the demo nodes' UUIDs."""
    enroll_fleet(api, count)
    demo = {
        "active": demo_node(api, "demo-active", mac="52:54:00:aa:00:01"),
        "failed": demo_node(api, "demo-failed", {"fake_fail": "deploy"}, mac="52:54:00:aa:00:02"),
        "maintenance": demo_node(api, "demo-maintenance"),
        "manageable": demo_node(api, "demo-manageable"),
        "deploy": demo_node(api, "demo-deploy", {"fake_poll": "deploy", "fake_polls": 40},
                            mac="52:54:00:aa:00:03"),
        "abort": demo_node(api, "demo-abort", {"fake_wait": "deploy"}),
        "member": demo_node(api, "demo-member", owner="p-red"),
    }
    for key in ["active", "failed", "deploy", "abort", "member"]:
        make_available(api, demo[key])
    api.provision(demo["manageable"], "manage")
    api.wait_state(demo["manageable"], "manageable")
    for key in ["active", "failed"]:
        api.call("PATCH", f"/v1/nodes/{demo[key]}", [
            {"op": "add", "path": "/instance_info/image_source", "value": IMAGE},
            {"op": "add", "path": "/instance_info/image_checksum", "value": CHECKSUM},
        ])
        api.provision(demo[key], "active")
    api.wait_state(demo["active"], "active")
    api.wait_state(demo["failed"], "deploy failed")
    api.call("PUT", f"/v1/nodes/{demo['maintenance']}/maintenance",
             {"reason": "fan 3 failed: replacement ordered"})
    return demo


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def log_in(page: Page, endpoint, user):
    page.goto(f"{endpoint}/ui/")
    page.fill("#login input[name=user]", user[0])
    page.fill("#login input[name=password]", user[1])
    page.click("#login button[type=submit]")
    page.wait_for_selector("#who:not([hidden])")
    check(page.inner_text("#who") == user[0], f"logged in as {page.inner_text('#who')}")


def open_node(page: Page, endpoint, uuid):
    """Opens the page of node `uuid` and waits until that node's page (not the previous one,
    which may linger until the hash change is handled) is drawn."""
    page.goto(f"{endpoint}/ui/#/nodes/{uuid}")
    page.wait_for_selector(f"#node-header:has-text('{uuid}')")


def timed_table_change(page: Page, action):
    """Runs `action`, waits until the table has reloaded; returns the milliseconds taken."""
    loads = int(page.get_attribute("#view", "data-loads") or "0")
    started = time.perf_counter()
    action()
    page.wait_for_function(f"Number(document.querySelector('#view').dataset.loads) > {loads}")
    return (time.perf_counter() - started) * 1000


def table_names(page: Page):
    return page.locator("#nodes tbody tr[data-uuid] td:first-child").all_inner_texts()


def screenshot(page: Page, directory, name):
    page.screenshot(path=f"{directory}/{name}.png")


def test_table(page: Page, endpoint, shots, count, demo):
    page.goto(f"{endpoint}/ui/#/nodes")
    page.wait_for_selector("#nodes tbody tr")
    check(len(table_names(page)) == 50, "the first page holds 50 nodes")
    timings = {}
    timings["filter by provision state (available)"] = timed_table_change(
        page, lambda: page.select_option("select[name=provision_state]", "available"))
    check(set(page.locator("#nodes [data-state]").all_inner_texts()) == {"available"},
          "the state filter keeps only available nodes")
    timings["filter by driver"] = timed_table_change(
        page, lambda: page.select_option("select[name=driver]", "fake-hardware"))
    timed_table_change(page, lambda: page.click("text=Clear"))
    timings["filter by owner (p-red)"] = timed_table_change(
        page, lambda: (page.fill("input[name=owner]", "p-red"), page.press("input[name=owner]", "Enter")))
    check(len(table_names(page)) == 50, "owner p-red has a full page")
    timings["filter by conductor group (rack-a)"] = timed_table_change(
        page, lambda: (page.fill("input[name=conductor_group]", "rack-a"),
                       page.press("input[name=conductor_group]", "Enter")))
    check(len(table_names(page)) == 0, "no p-red node is in rack-a (owners and groups interleave)")
    timed_table_change(page, lambda: page.click("text=Clear"))
    # The table starts sorted by name, ascending: one click turns it around.
    timings["sort by name, descending"] = timed_table_change(page, lambda: page.click("th[data-key=name]"))
    check(table_names(page)[0] == f"node-{count - 1:05d}", f"sorted descending: {table_names(page)[:2]}")
    timings["next page"] = timed_table_change(page, lambda: page.click("#next"))
    check(table_names(page)[0] == f"node-{count - 51:05d}", f"page two: {table_names(page)[:2]}")
    timings["previous page"] = timed_table_change(page, lambda: page.click("#previous"))

    def search(query):
        return lambda: (page.fill("#search input", query), page.press("#search input", "Enter"))

    name = f"node-{count // 2:05d}"
    timings["search by name"] = timed_table_change(page, search(name))
    check(table_names(page) == [name], f"search by name: {table_names(page)}")
    timings["search by UUID"] = timed_table_change(page, search(demo["deploy"]))
    check(table_names(page) == ["demo-deploy"], f"search by UUID: {table_names(page)}")
    timings["search by MAC"] = timed_table_change(page, search("52:54:00:AA:00:02"))
    check(table_names(page) == ["demo-failed"], f"search by MAC: {table_names(page)}")
    timed_table_change(page, search(""))
    page.select_option("select[name=provision_state]", "available")
    page.wait_for_selector("#nodes [data-state=available]")
    screenshot(page, shots, "nodes")
    print(f"node table at {count + len(demo)} nodes (browser wall time: action → table redrawn):")
    for action, milliseconds in timings.items():
        print(f"  {action:<42} {milliseconds:6.0f} ms")
    slowest = max(timings.values())
    over = [action for action, milliseconds in timings.items() if milliseconds > 300]
    print(f"  slowest: {slowest:.0f} ms (target: 300 ms; over it: {', '.join(over) or 'none'})", flush=True)


def watch_deploy(page: Page, endpoint, shots, uuid):
    open_node(page, endpoint, uuid)
    page.evaluate("window.__notReloaded = true")
    page.click("[data-action=active]")
    page.fill("dialog input[name=image_source]", IMAGE)
    page.fill("dialog input[name=image_checksum]", CHECKSUM)
    screenshot(page, shots, "deploy-dialog")
    page.click("#confirm-ok")
    seen_states = []
    seen_progress = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # One look at the page as it is now: the progress line goes when the deploy ends, so
        # a locator that saw it may wait in vain for it a moment later.
        state, text = page.evaluate("""() => [
            document.querySelector('#node-header h1 .badge[data-state]')?.innerText ?? null,
            document.querySelector('#progress-text')?.innerText ?? null,
        ]""")
        if state is not None and (not seen_states or seen_states[-1] != state):
            seen_states.append(state)
        if text is not None:
            if not seen_progress or seen_progress[-1] != text:
                seen_progress.append(text)
                if len(seen_progress) == 3:
                    screenshot(page, shots, "node-deploying")
        if state == "active":
            break
        page.wait_for_timeout(100)
    print(f"deploy from the UI: states seen {seen_states}; progress seen {len(seen_progress)} values, "
          f"e.g. {seen_progress[:1] + seen_progress[-1:]}", flush=True)
    check(seen_states[-1:] == ["active"], f"the deploy ended in {seen_states}")
    check("deploying" in seen_states or "wait call-back" in seen_states,
          f"the page showed the node deploying: {seen_states}")
    check(len(seen_progress) >= 2, f"the page showed the progress changing: {seen_progress}")
    check(page.evaluate("window.__notReloaded === true"), "the page was not reloaded")


def deploy_and_abort(page: Page, endpoint, uuid):
    open_node(page, endpoint, uuid)
    page.evaluate("window.__notReloaded = true")
    page.click("[data-action=active]")
    page.fill("dialog input[name=image_source]", IMAGE)
    page.fill("dialog input[name=image_checksum]", CHECKSUM)
    page.click("#confirm-ok")
    page.wait_for_selector("#node-header .badge[data-state='wait call-back']", timeout=30000)
    page.wait_for_selector("[data-action=abort]:not([disabled])")
    page.click("[data-action=abort]")
    page.click("#confirm-ok")
    page.wait_for_selector("#node-header .badge[data-state='deploy failed']", timeout=30000)
    check(page.evaluate("window.__notReloaded === true"), "the page was not reloaded")
    print("abort from the UI: wait call-back → deploy failed", flush=True)


def console_terminal(page: Page, endpoint, shots, uuid, real):
    typed = []
    if not real:
        # The console WebSocket (the contract in docs/ui.md), faked in the browser: the retained
        # boot messages first, then echo what is typed.
        def on_socket(socket):
            socket.send(BOOT_LOG)
            socket.on_message(lambda message: (typed.append(message), socket.send(
                message if isinstance(message, bytes) else message.encode())))

        page.route_web_socket("**/console/stream*", on_socket)
        page.route(f"**/v1/nodes/{uuid}/states/console", lambda route: route.fulfill(
            status=200, content_type="application/json",
            body=json.dumps({"console_enabled": True, "console_info": {"type": "websocket", "url": None}})))
    open_node(page, endpoint, uuid)
    page.click("#console-open")
    try:
        page.wait_for_function("document.querySelector('#terminal').textContent.includes('login:')", timeout=15000)
    except Exception:
        print(f"console status: {page.inner_text('#console-status')!r}; terminal: "
              f"{page.inner_html('#terminal')[:400]!r}", file=sys.stderr)
        raise
    page.click("#terminal")
    page.keyboard.type("root")
    page.keyboard.press("Enter")
    if not real:
        page.wait_for_function("document.querySelector('#terminal').textContent.includes('login: root')")
        check("".join(m if isinstance(m, str) else m.decode() for m in typed) == "root\r",
              f"keystrokes reached the socket: {typed}")
    page.locator("#console").scroll_into_view_if_needed()
    screenshot(page, shots, "console")
    print("console terminal: boot messages shown, keystrokes sent", flush=True)


def reader_is_read_only(browser, endpoint, shots, uuid):
    context = browser.new_context(viewport={"width": 1200, "height": 760}, bypass_csp=True)
    page = context.new_page()
    log_in(page, endpoint, READER)
    open_node(page, endpoint, uuid)
    page.wait_for_selector("#read-only")
    buttons = page.locator("#actions button")
    check(buttons.count() >= 10, f"the action bar has its buttons ({buttons.count()})")
    enabled = [b.inner_text() for b in buttons.all() if b.is_enabled()]
    check(not enabled, f"a reader can press {enabled}")
    check(page.locator("#console-toggle").is_disabled(), "a reader can switch the console")
    screenshot(page, shots, "node-reader")
    context.close()
    print("reader: every action disabled", flush=True)


def member_acts_on_its_own_nodes(browser, endpoint, count, member_uuid, other_uuid):
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    # The overview reads the member's nodes (p-red's quarter of the fleet and demo-member)
    # in pages of 1,000; the last one is the first not full.
    pages = (len(range(0, count, 4)) + 1) // 1000 + 1
    listed = []
    page.on("requestfinished", lambda request: "limit=1000" in request.url and listed.append(request))
    log_in(page, endpoint, MEMBER)
    # The node's page, opened at once after the log-in while the overview still reads: once
    # the overview has read every page, the node's page must still be shown, not drawn over
    # by the overview finishing late.
    open_node(page, endpoint, member_uuid)
    deadline = time.monotonic() + 30
    while len(listed) < pages and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    check(len(listed) == pages, f"the overview read {len(listed)} pages of nodes, not {pages}")
    page.wait_for_timeout(300)
    check(page.locator("#actions").count() == 1, f"the node's page was replaced: {page.inner_text('#view')[:80]!r}")
    check(page.locator("[data-action='power off']").is_enabled(), "the member may act on its node")
    check(page.locator("#read-only").count() == 0, "the member's own node is not read-only")
    page.goto(f"{endpoint}/ui/#/nodes/{other_uuid}")
    # The previous node's page may still be up for a moment: wait for the refusal itself.
    page.wait_for_selector("#view p.error:has-text('could not be found')", timeout=15000)
    context.close()
    print("member: acts on p-red's node, cannot see others", flush=True)


# Whether the terminal holds `text`: in xterm.js's buffer (scrollback included; the DOM has
# only the visible rows), or in the plain-text view without the widget.
TERMINAL_HOLDS = """(text) => {
  const screen = document.querySelector('#terminal');
  const buffer = screen.terminal?.buffer?.active;
  if (!buffer) return screen.textContent.includes(text);
  // Rows the terminal wrapped (a line longer than its 100 columns) join their line unbroken.
  let held = '';
  for (let i = 0; i < buffer.length; i++) {
    const line = buffer.getLine(i);
    if (i > 0 && !line?.isWrapped) held += '\\n';
    held += line?.translateToString(true) ?? '';
  }
  return held.includes(text);
}"""


def lab_console(options):
    """`--lab-console NODE`: only the console, on a real machine (crates/ferric/tests/
    lab_console.rs runs it beside `ferric node console`). On a server without authentication,
    opens NODE's page, enables its console if it is off, opens the terminal and waits for each
    `--expect` text in turn (boot messages as the machine starts); then, with `--type TEXT`,
    types it and waits for the machine's echo of it (its serial tty echoes what it receives)."""
    started = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=options.chromium, args=["--no-sandbox"])
        page = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True).new_page()
        page.on("pageerror", lambda error: print(f"browser error: {error}", file=sys.stderr))
        page.goto(f"{options.endpoint}/ui/#/nodes/{options.lab_console}")
        page.wait_for_selector("#console-open")
        if page.inner_text("#console-toggle") == "Enable console":
            page.click("#console-toggle")
            page.wait_for_selector("#console-toggle:has-text('Disable console')", timeout=60000)
        page.click("#console-open")
        page.wait_for_selector("#console-status:has-text('Connected')", timeout=30000)
        print(f"lab console: terminal connected at {time.monotonic() - started:.1f} s", flush=True)

        def wait_for_text(text, seconds, last=True):
            try:
                page.wait_for_function(TERMINAL_HOLDS, arg=text, timeout=seconds * 1000)
            except Exception:
                shown = page.inner_text("#terminal")
                print(f"lab console: {text!r} not shown after {seconds} s; status "
                      f"{page.inner_text('#console-status')!r}; terminal ends {shown[-600:]!r}",
                      file=sys.stderr, flush=True)
                if not last:
                    return False
                screenshot(page, options.screenshots, "lab-console")
                raise
            print(f"lab console: {text!r} shown in the terminal at {time.monotonic() - started:.1f} s", flush=True)
            return True

        for text in options.expect:
            wait_for_text(text, options.timeout)
        if options.type:
            page.click("#terminal")
            # The machine is still booting: the kernel's and the ramdisk's own lines go to the
            # same serial port as the tty's echo and can land in the middle of it. Typed again
            # until one echo arrives whole (nothing in the ramdisk reads the console's input).
            attempts = 6
            for attempt in range(1, attempts + 1):
                page.keyboard.type(options.type)
                if wait_for_text(options.type, 15, last=attempt == attempts):
                    break
                print(f"lab console: typing {options.type!r} again (attempt {attempt + 1})", flush=True)
        page.locator("#console").scroll_into_view_if_needed()
        screenshot(page, options.screenshots, "lab-console")
        browser.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--real-console", action="store_true")
    parser.add_argument("--lab-console", metavar="NODE")
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--type")
    parser.add_argument("--timeout", type=int, default=300, help="seconds for each --expect")
    options = parser.parse_args()
    if options.lab_console:
        lab_console(options)
        return
    started = time.monotonic()
    api = Api(options.endpoint, ADMIN)
    demo = seed(api, options.nodes)
    shots = options.screenshots
    with sync_playwright() as playwright:
        # bypass_csp: the test's own wait conditions are evaluated scripts, which the UI's CSP
        # refuses. --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=options.chromium, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1200, "height": 760}, bypass_csp=True)
        page = context.new_page()
        page.on("pageerror", lambda error: print(f"browser error: {error}", file=sys.stderr))
        page.goto(f"{options.endpoint}/ui/")
        page.wait_for_selector("#login:visible")
        screenshot(page, shots, "login")
        page.fill("#login input[name=user]", "admin")
        page.fill("#login input[name=password]", "wrong")
        page.click("#login button[type=submit]")
        page.wait_for_selector("#login-error:visible")
        check("Wrong user or password" in page.inner_text("#login-error"), "a wrong password is refused")
        log_in(page, options.endpoint, ADMIN)

        page.wait_for_selector("#states")
        states = set(page.locator("#states [data-state]").evaluate_all("cards => cards.map(c => c.dataset.state)"))
        check({"enroll", "manageable", "available", "active", "deploy failed", "maintenance"} <= states,
              f"the overview shows several states: {states}")
        first = page.locator("#attention tbody tr").first
        check("demo-failed" in first.inner_text(), "the failed node is listed first")
        check(first.locator(".last-error").inner_text().strip() != "", "the failed node's last_error is shown")
        print(f"overview: states {sorted(states)}; first to look at: {first.inner_text()!r}", flush=True)
        screenshot(page, shots, "overview")

        test_table(page, options.endpoint, shots, options.nodes, demo)
        watch_deploy(page, options.endpoint, shots, demo["deploy"])
        open_node(page, options.endpoint, demo["deploy"])
        page.wait_for_selector("#ports table")
        screenshot(page, shots, "node")
        deploy_and_abort(page, options.endpoint, demo["abort"])
        console_terminal(page, options.endpoint, shots, demo["active"], options.real_console)
        context.close()
        reader_is_read_only(browser, options.endpoint, shots, demo["failed"])
        member_acts_on_its_own_nodes(browser, options.endpoint, options.nodes, demo["member"], demo["active"])
        browser.close()
    print(f"ui test passed in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
