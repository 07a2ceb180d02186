"""Comparing a run with the goldens recorded from Ironic, and the reports people read.

A step matches when its exit code, stdout, stderr, the requests the client sent (method, path
and status; the microversion is shown but not compared, and a 406 that the client answered by
retrying the same request at a lower version is left out as negotiation) and the node's state
afterwards all equal the golden. Each difference is named in words: a missing field, an extra
column, a changed value, a different error message.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

from . import allowed, normalize
from .steps import StepResult

MAX_LINES_PER_STEP = 30
VERSION = re.compile(r" \[[^\]]*\] -> ")


def golden_path(golden_dir: Path, name: str) -> Path:
    return golden_dir / f"{name}.json"


def load_golden(golden_dir: Path, name: str) -> dict | None:
    path = golden_path(golden_dir, name)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def write_golden(golden_dir: Path, result: StepResult) -> None:
    path = golden_path(golden_dir, result.observation.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = result.observation.to_json()
    data["negotiated"] = result.negotiated
    path.write_text(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def comparable_http(lines: list[str]) -> list[str]:
    """Drops microversions, negotiation and repeated polls: what was called, how it ended.

    Node names and UUIDs become `{node}` (see `endpoint_key`).

    Negotiation is a request answered 406 that the client sends again, right away or after
    reading the version documents (`GET /` or `GET /v1`, which the CLI does in between): the
    406 and the version reads are left out, the retry and its answer stay.
    """
    plain = [endpoint_key(VERSION.sub(" -> ", line)) for line in lines]
    request = [line.rsplit(" -> ", 1)[0] for line in plain]
    discovery = {"GET /", "GET /v1", "GET /v1/"}
    out: list[str] = []
    index = 0
    while index < len(plain):
        if plain[index].endswith("-> 406"):
            after = index + 1
            while after < len(plain) and request[after] in discovery:
                after += 1
            if after < len(plain) and request[after] == request[index]:
                index = after  # keep only the retry
                continue
        # Polling shows once: a wait may read the node by name, then by UUID, as often as
        # the server's speed makes it.
        if not out or out[-1] != plain[index]:
            out.append(plain[index])
        index += 1
    return out


def short(value: Any, limit: int = 90) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def diff_values(golden: Any, actual: Any, path: str = "") -> list[str]:
    """Differences between two JSON values, one line each, named by their path."""
    where = path or "(top)"
    if isinstance(golden, dict) and isinstance(actual, dict):
        lines = []
        missing = [k for k in golden if k not in actual]
        extra = [k for k in actual if k not in golden]
        if missing:
            lines.append(f"{where}: missing fields {missing}")
        if extra:
            lines.append(f"{where}: unexpected fields {extra}")
        for key in golden:
            if key in actual:
                lines += diff_values(golden[key], actual[key], f"{path}.{key}" if path else key)
        return lines
    if isinstance(golden, list) and isinstance(actual, list):
        lines = []
        if golden and actual and all(isinstance(x, dict) for x in golden + actual):
            golden_keys = list(dict.fromkeys(k for row in golden for k in row))
            actual_keys = list(dict.fromkeys(k for row in actual for k in row))
            missing = [k for k in golden_keys if k not in actual_keys]
            extra = [k for k in actual_keys if k not in golden_keys]
            if missing:
                lines.append(f"{where}[*]: missing fields/columns {missing}")
            if extra:
                lines.append(f"{where}[*]: unexpected fields/columns {extra}")
            common = [k for k in golden_keys if k in actual_keys]
            golden = [{k: row.get(k) for k in common} for row in golden]
            actual = [{k: row.get(k) for k in common} for row in actual]
        if len(golden) != len(actual):
            lines.append(f"{where}: {len(actual)} items, golden has {len(golden)}")
        for index, (g, a) in enumerate(zip(golden, actual)):
            lines += diff_values(g, a, f"{path}[{index}]")
        return lines
    if golden != actual:
        return [f"{where}: {short(actual)}, golden {short(golden)}"]
    return []


def diff_text(golden: str, actual: str) -> list[str]:
    if golden == actual:
        return []
    return [
        line
        for line in difflib.unified_diff(
            golden.splitlines(), actual.splitlines(), "golden", "actual", lineterm="", n=0
        )
        if not line.startswith(("---", "+++", "@@"))
    ]


def diff_step(golden: dict, actual: dict) -> list[str]:
    """Everything that differs between a golden and an observation, grouped by aspect
    (after evening out the allowed differences of `allowed.py`)."""
    golden, actual = allowed.apply(actual["name"], golden, actual)
    lines: list[str] = []
    if golden["exit_code"] != actual["exit_code"]:
        lines.append(f"exit code: {actual['exit_code']}, golden {golden['exit_code']}")
    g_http, a_http = comparable_http(golden["http"]), comparable_http(actual["http"])
    if g_http != a_http:
        lines.append("requests (golden -> actual):")
        lines += [f"  {line}" for line in diff_text("\n".join(g_http), "\n".join(a_http))]
    g_out, a_out = golden["stdout"], actual["stdout"]
    if g_out != a_out and (a_out in ("", None) or g_out in ("", None)):
        lines.append(f"stdout: {describe(a_out)}, golden {describe(g_out)}")
    elif isinstance(g_out, str) or isinstance(a_out, str):
        if g_out != a_out:
            lines.append("stdout:")
            lines += [f"  {line}" for line in diff_text(_as_text(g_out), _as_text(a_out))]
    else:
        out = diff_values(g_out, a_out)
        if out:
            lines.append("stdout:")
            lines += [f"  {line}" for line in out]
    g_err, a_err = (
        normalize.comparable_text(side["stderr"]) if isinstance(side["stderr"], str)
        else side["stderr"]
        for side in (golden, actual)
    )
    if g_err != a_err:
        lines.append("stderr:")
        lines += [f"  {line}" for line in diff_text(g_err, a_err)]
    after = diff_values(golden.get("after"), actual.get("after"))
    if after:
        lines.append("node afterwards:")
        lines += [f"  {line}" for line in after]
    return lines


def describe(value: Any) -> str:
    """A one-phrase summary of an output, for when one side printed nothing."""
    if value in ("", None):
        return "nothing"
    if isinstance(value, dict):
        if "columns" in value and "rows" in value:
            return f"a table with columns {value['columns']} and {len(value['rows'])} rows"
        return f"an object with {len(value)} fields"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    return short(value)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=1, sort_keys=True)


RESOURCE_NAMES = re.compile(
    r"(?<=[/=])(clients-node|clients-abort|sdk-node|sdk-abort|\{node\.uuid\}|\{abort_node\.uuid\})"
    r"(?=/|\?|&|\s|$)"
)


def endpoint_key(request: str) -> str:
    """`PUT /v1/nodes/clients-node/states/power` -> `PUT /v1/nodes/{node}/states/power`."""
    request = RESOURCE_NAMES.sub("{node}", request)
    # What the scenario uses when a create step failed and there is no UUID to name.
    request = re.sub(r"uuid-of-(?:clients|sdk)-(?:node|abort)", "{node}", request)
    return request.replace("{port.uuid}", "{port}").replace("uuid-of-port", "{port}")


def endpoint_differences(golden: dict, actual: dict) -> list[tuple[str, str, str]]:
    """(endpoint, golden status, actual status) for each request answered differently."""
    def statuses(lines):
        answered: dict[str, str] = {}
        for line in comparable_http(lines):
            request, status = line.rsplit(" -> ", 1)
            answered[endpoint_key(request)] = status
        return answered

    wanted, got = statuses(golden["http"]), statuses(actual["http"])
    return [
        (request, status, got.get(request, "not sent"))
        for request, status in wanted.items()
        if got.get(request) != status
    ]


def endpoint_summary(by_endpoint: dict[tuple[str, str, str], list[str]]) -> str:
    if not by_endpoint:
        return ""
    lines = ["## Endpoints that answer differently from Ironic", ""]
    width = max(len(request) for request, _, _ in by_endpoint)
    for (request, wanted, got), steps in sorted(by_endpoint.items()):
        names = ", ".join(steps[:4]) + (f" +{len(steps) - 4}" if len(steps) > 4 else "")
        lines.append(f"{request.ljust(width)}  ironic {wanted}, got {got:<8}  ({names})")
    return "\n".join(lines) + "\n\n"


def report(
    results: list[StepResult],
    golden_dir: Path,
    server: str,
    record: bool,
) -> tuple[str, bool]:
    """The per-step table and details. Returns the text and whether the run passed."""
    rows, details = [], []
    by_endpoint: dict[tuple[str, str, str], list[str]] = {}
    n_match = n_expect = 0
    for index, result in enumerate(results, 1):
        observation = result.observation.to_json()
        golden = None if record else load_golden(golden_dir, result.observation.name)
        if record:
            verdict = "recorded"
            differences: list[str] = []
        elif golden is None:
            verdict = "NO GOLDEN"
            differences = ["no golden file: record one with --against ironic --record"]
        else:
            differences = diff_step(golden, observation)
            verdict = "match" if not differences else "DIFF"
            for difference in endpoint_differences(golden, observation):
                by_endpoint.setdefault(difference, []).append(result.observation.name)
        n_match += verdict == "match"
        n_expect += not result.problems
        golden_version = (golden or {}).get("negotiated") or "-"
        version = result.negotiated or "-"
        versions = version if record else f"{golden_version}->{version}"
        first = (result.problems or differences or [""])[0]
        if first.endswith(":") and len(differences) > 1:  # an aspect's heading: add its first line
            first = first + " " + differences[1].strip()
        rows.append(
            (
                str(index),
                result.observation.name,
                verdict,
                "ok" if not result.problems else "FAIL",
                versions,
                f"{result.seconds:.1f}s",
                first if len(first) <= 100 else first[:99] + "…",
            )
        )
        if differences or result.problems:
            block = [f"## {index}. {result.observation.name} — {result.observation.title}"]
            block.append("$ " + " ".join(_quote(arg) for arg in result.observation.argv))
            block += [f"expectation: {problem}" for problem in result.problems]
            if len(differences) > MAX_LINES_PER_STEP:
                more = len(differences) - MAX_LINES_PER_STEP
                differences = differences[:MAX_LINES_PER_STEP] + [f"… {more} more lines"]
            block += differences
            details.append("\n".join(block))
    header = ("#", "step", "golden", "expect", "version" if record else "version ironic->"
              + server, "time", "first problem")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    table = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in [header, *rows]
    ]
    total = len(results)
    summary = (
        f"{n_expect}/{total} steps met their expectations"
        if record
        else f"{n_match}/{total} steps match the Ironic goldens; "
        f"{n_expect}/{total} met their expectations ({server})"
    )
    text = (
        "\n".join(table)
        + "\n\n"
        + "\n\n".join(details)
        + ("\n\n" if details else "")
        + endpoint_summary(by_endpoint)
        + summary
    )
    passed = n_expect == total if record else n_match == total
    return text + "\n", passed


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w@%+=:,./{}-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


def requests_document(results: list[StepResult], server_version: str) -> str:
    """Which endpoints each client command calls: the checked-in companion to the goldens."""
    lines = [
        "# What the clients send, step by step",
        "",
        "Generated by `cargo xtask clients --against ironic --record` from the recording proxy's",
        f"log while the scenario ran against Ironic ({server_version}); do not edit by hand.",
        "Each request shows `[microversion asked for] -> status`; consecutive identical polls",
        "(`--wait`, SDK waits) are shown once.",
        "",
    ]
    for result in results:
        observation = result.observation
        lines.append(f"## {observation.name}")
        lines.append("")
        lines.append("`" + " ".join(_quote(arg) for arg in observation.argv) + "`")
        lines.append("")
        lines += [f"    {line}" for line in observation.http] or ["    (no request)"]
        lines.append("")
    return "\n".join(lines)
