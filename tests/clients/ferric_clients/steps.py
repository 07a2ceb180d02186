"""Running scenario steps: a CLI invocation or an openstacksdk call, its observation and its
expectation.

Each step yields an `Observation`: the command (argv, or the SDK call as text), exit code,
stdout (parsed JSON or table where the step asks for it), stderr, the HTTP requests the client
sent for it (from the recording proxy), and the node's state afterwards (read directly from
the server, not through the proxy, so the reads are not mistaken for the client's own). All of
it is normalized, so an Ironic observation can be stored as a golden and a Ferric one compared
with it.

An `Expect` states what the step must do whatever the golden says (exit 0 and these fields, or
HTTP 404 with this message): it keeps the goldens honest when they are recorded and explains a
failure in words when Ferric is run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from .normalize import Normalizer, parse_table
from .proxy import RecordingProxy


@dataclass
class Expect:
    """What a step must do. Unset members are not checked."""

    ok: bool = True
    # HTTP status of the last request the client sent (error cases: 400, 404, 406, 409).
    status: int | None = None
    # Substrings of stderr (for the CLI) or of the exception text (for the SDK).
    message: list[str] = field(default_factory=list)
    # Fields of the JSON object printed (CLI `-f json`) or returned (SDK).
    fields: dict[str, Any] = field(default_factory=dict)
    # Column names of a printed list, in order.
    columns: list[str] | None = None
    # Node fields after the step (read from the server).
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Observation:
    name: str
    title: str
    argv: list[str]
    exit_code: int
    stdout: Any
    stderr: str
    http: list[str]
    after: dict[str, Any] | None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class StepResult:
    observation: Observation
    problems: list[str]  # expectation failures, in words
    negotiated: str | None  # the microversion of the client's last successful request
    seconds: float


STATE_FIELDS = (
    "provision_state",
    "target_provision_state",
    "power_state",
    "target_power_state",
    "maintenance",
    "maintenance_reason",
    "last_error",
)


class Run:
    """One run of the scenarios against one server."""

    def __init__(self, endpoint: str, proxy: RecordingProxy, wait_timeout: float):
        self.endpoint = endpoint.rstrip("/")
        self.proxy = proxy
        self.wait_timeout = wait_timeout
        self.normalizer = Normalizer([self.endpoint, proxy.url], [])
        self.results: list[StepResult] = []
        self.baremetal = str(Path(sys.executable).parent / "baremetal")
        # A private HOME: the CLI caches negotiated versions under ~/.cache, and nothing from
        # another run (or the user's clouds.yaml) may leak into this one.
        self.home = tempfile.mkdtemp(prefix="ferric-clients-home-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        self.env.update(HOME=self.home, PYTHONWARNINGS="ignore", LC_ALL="C.UTF-8")
        self.env.pop("CLIFF_MAX_TERM_WIDTH", None)

    # --- direct reads, not recorded ------------------------------------------------------

    def node_fields(self, ident: str) -> dict[str, Any] | None:
        request = urllib.request.Request(
            f"{self.endpoint}/v1/nodes/{ident}",
            headers={"X-OpenStack-Ironic-API-Version": "latest", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def node_state(self, ident: str) -> dict[str, Any]:
        node = self.node_fields(ident)
        if node is None:
            return {"error": f"GET /v1/nodes/{ident} failed"}
        return {key: node.get(key) for key in STATE_FIELDS}

    def wait_for(self, ident: str, wanted: dict[str, Any]) -> None:
        """Polls the node until every wanted field has its value, or the wait times out."""
        deadline = time.monotonic() + self.wait_timeout
        while time.monotonic() < deadline:
            node = self.node_fields(ident) or {}
            if all(node.get(key) == value for key, value in wanted.items()):
                return
            time.sleep(0.25)

    # --- steps ---------------------------------------------------------------------------

    def cli(
        self,
        name: str,
        title: str,
        args: list[str],
        expect: Expect,
        output: str = "text",
        node: str | None = None,
        wait_for: dict[str, Any] | None = None,
        api_version: str | None = None,
        register: Callable[[Any], None] | None = None,
    ) -> Observation:
        """Runs `baremetal ARGS` against the proxy. `output` is json, table or text."""
        argv = ["baremetal", "--os-auth-type", "none", "--os-endpoint", self.proxy.url]
        if api_version:
            argv += ["--os-baremetal-api-version", api_version]
        argv += args
        started = time.monotonic()
        self.proxy.begin()
        completed = subprocess.run(
            [self.baremetal, *argv[1:]],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=self.wait_timeout * 2 + 60,
        )
        records = self.proxy.end()
        parsed: Any = completed.stdout
        if output == "json" and completed.returncode == 0:
            try:
                parsed = json.loads(completed.stdout)
            except ValueError:
                pass
        elif output == "table":
            parsed = parse_table(completed.stdout) or completed.stdout
        if register and completed.returncode == 0:
            register(parsed)  # before normalizing, so the new UUID gets its name at once
        return self._finish(
            name,
            title,
            argv,
            completed.returncode,
            parsed,
            completed.stderr,
            records,
            expect,
            node,
            wait_for,
            started,
        )

    def sdk(
        self,
        name: str,
        title: str,
        call: str,
        function: Callable[[], Any],
        expect: Expect,
        node: str | None = None,
        wait_for: dict[str, Any] | None = None,
        register: Callable[[Any], None] | None = None,
    ) -> tuple[Observation, Any]:
        """Runs one openstacksdk call; `call` is how the step shows it. Returns the result."""
        started = time.monotonic()
        self.proxy.begin()
        result, stdout, stderr, exit_code = None, None, "", 0
        try:
            result = function()
            stdout = sdk_value(result)
            if register:
                register(stdout)
        except Exception as error:  # noqa: BLE001 - every failure is an observation
            exit_code = 1
            status = getattr(error, "status_code", None)
            stderr = f"{type(error).__name__}" + (f" (HTTP {status})" if status else "")
            stderr += f": {error}"
        records = self.proxy.end()
        observation = self._finish(
            name, title, [call], exit_code, stdout, stderr, records, expect, node, wait_for, started
        )
        return observation, result

    def http(
        self,
        name: str,
        title: str,
        method: str,
        path: str,
        expect: Expect,
        body: Any = None,
        version: str | None = None,
        node: str | None = None,
        wait_for: dict[str, Any] | None = None,
        register: Callable[[Any], None] | None = None,
        project: Callable[[Any], Any] | None = None,
    ) -> tuple[Observation, Any]:
        """Sends one request as a Go client (gophercloud, what Metal3's baremetal-operator
        uses) would: its headers, its JSON body, at `version`. The step shows `METHOD path`
        and the body; stdout is the answer's JSON (through `project`, which keeps what the
        client reads), stderr the error's `faultstring`. Returns the parsed answer."""
        headers = {"Accept": "application/json", "User-Agent": "gophercloud/v2.9.0"}
        if version:
            headers["X-OpenStack-Ironic-API-Version"] = version
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(
            f"{self.proxy.url}{path}", data=data, headers=headers, method=method
        )
        started = time.monotonic()
        self.proxy.begin()
        try:
            with urllib.request.urlopen(request, timeout=self.wait_timeout + 30) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        except OSError as error:
            status, payload = 599, str(error).encode()
        records = self.proxy.end()
        answer: Any = None
        if payload:
            try:
                answer = json.loads(payload)
            except ValueError:
                answer = payload.decode(errors="replace")
        stderr = ""
        if status >= 400:
            stderr = fault_string(answer)
        elif register:
            register(answer)
        shown = project(answer) if project and status < 400 else answer
        argv = [f"{method} {path}"] + ([json.dumps(body, sort_keys=True)] if body is not None else [])
        observation = self._finish(
            name,
            title,
            argv,
            0 if status < 400 else 1,
            shown if status < 400 else None,
            stderr,
            records,
            expect,
            node,
            wait_for,
            started,
        )
        return observation, answer

    def _finish(
        self, name, title, argv, exit_code, stdout, stderr, records, expect, node, wait_for,
        started,
    ) -> Observation:
        if wait_for and node and exit_code == 0:
            # Only when the client says it worked: a refused request changes nothing, and
            # waiting the full timeout for it would only slow the report down.
            self.wait_for(node, wait_for)
        after = self.node_state(node) if node else None
        n = self.normalizer
        observation = Observation(
            name=name,
            title=title,
            argv=[n.text(arg) for arg in argv],
            exit_code=exit_code,
            stdout=n.value(stdout) if not isinstance(stdout, str) else n.text(stdout),
            stderr=n.text(stderr),
            http=n.http(records),
            after=n.value(after) if after is not None else None,
        )
        problems = check(
            expect, exit_code, observation.stdout, observation.stderr, records, observation.after
        )
        negotiated = next(
            (r["version"] for r in reversed(records) if r["status"] < 400 and r["version"]),
            None,
        )
        self.results.append(
            StepResult(observation, problems, negotiated, time.monotonic() - started)
        )
        return observation


def fault_string(answer: Any) -> str:
    """The message of an Ironic error body (`{"error_message": "{\\"faultstring\\": …}"}`)."""
    if isinstance(answer, dict) and "error_message" in answer:
        inner = answer["error_message"]
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                return inner
        if isinstance(inner, dict):
            return str(inner.get("faultstring", inner))
    return answer if isinstance(answer, str) else json.dumps(answer)


def sdk_value(value: Any) -> Any:
    """An SDK result as plain JSON data: resources become dicts without client-side `location`."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {k: sdk_value(v) for k, v in value.items() if k != "location"}
    if isinstance(value, (list, tuple)) or hasattr(value, "__next__"):
        return [sdk_value(item) for item in value]
    if hasattr(value, "to_dict"):
        return sdk_value(value.to_dict())
    if hasattr(value, "__dict__"):
        return sdk_value({k: v for k, v in vars(value).items() if not k.startswith("_")})
    return repr(value)


def check(expect: Expect, exit_code, stdout, stderr, records, after) -> list[str]:
    problems = []
    if expect.ok and exit_code != 0:
        lines = stderr.strip().splitlines() or [""]
        # The CLI's line with the server's message carries "(HTTP nnn)"; else the last line.
        line = next((line for line in lines if "(HTTP " in line), lines[-1])
        problems.append(f"expected success, got exit {exit_code}: {line}")
    if not expect.ok and exit_code == 0:
        problems.append("expected a failure, the command succeeded")
    if expect.status is not None:
        statuses = [r["status"] for r in records]
        if expect.status not in statuses:
            problems.append(f"expected HTTP {expect.status}, the server answered {statuses}")
    for text in expect.message:
        if text not in stderr:
            problems.append(f"expected message containing {text!r}")
    if expect.fields:
        if not isinstance(stdout, dict):
            problems.append(f"expected a JSON object with {sorted(expect.fields)}")
        else:
            for key, value in expect.fields.items():
                if stdout.get(key) != value:
                    problems.append(f"expected {key}={value!r}, got {stdout.get(key, '<missing>')!r}")
    if expect.columns is not None:
        columns = None
        if isinstance(stdout, list):
            columns = list(stdout[0].keys()) if stdout else None
        elif isinstance(stdout, dict) and "columns" in stdout:
            columns = stdout["columns"]
        if columns is not None and columns != expect.columns:
            problems.append(f"expected columns {expect.columns}, got {columns}")
        elif columns is None and exit_code == 0:
            problems.append(f"expected a non-empty list with columns {expect.columns}")
    for key, value in expect.state.items():
        got = (after or {}).get(key, "<missing>")
        if got != value:
            problems.append(f"expected node {key}={value!r} afterwards, got {got!r}")
    return problems
