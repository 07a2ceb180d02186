"""Turns one server's answers into text that another server's answers can equal.

What differs between two correct servers is replaced by placeholders: UUIDs (named after the
resource the scenario created, e.g. `{node.uuid}`, else `{uuid}`), request ids, timestamps,
the endpoint URL and port, conductor host names, and the node a "no inventory" 404 names.
Everything else — field names, values, column sets, error messages, status codes — is kept,
because that is what clients see.
"""

from __future__ import annotations

import re
import socket
from typing import Any

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
)
LOCAL_URL = re.compile(r"https?://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?")
# `GET /v1/nodes/<name or uuid> [version] -> status`: one read of one node (group 1: status).
NODE_READ = re.compile(r"^GET /v1/nodes/[^/?\s]+ \[[^\]]*\] -> (\d+)$")
# Ironic's "no inventory" 404 names the node by its database row id ("for node 1"), which
# depends on how many nodes that database has held and which no API call accepts; Ferric names
# it by UUID. The words around it are compared (`comparable_text`).
NODE_INVENTORY_404 = re.compile(r"(Node inventory record for node )\S+( could not be found\.)")
# Keys whose value depends on timing, not on the server: `reservation` is the conductor that
# holds the node's lock at the instant of the read, which a client's wait may catch or miss.
VOLATILE_KEYS = {"reservation"}
# Keys whose string values are a conductor's host name.
HOST_KEYS = {"conductor", "reservation", "hosts", "Active host(s)", "hostname"}


class Normalizer:
    """Placeholders for one run: names the scenario gave to the UUIDs it created."""

    def __init__(self, endpoints: list[str], host_names: list[str]):
        self.endpoints = sorted(set(endpoints), key=len, reverse=True)
        self.host_names = {name for name in host_names if name} | {
            "ironic-reference",
            socket.gethostname(),
        }
        self.named: dict[str, str] = {}

    def name(self, value: str | None, placeholder: str) -> None:
        """Remembers that `value` (a UUID) is shown as `{placeholder}` from now on."""
        if value:
            self.named[value.lower()] = "{" + placeholder + "}"

    def text(self, value: str) -> str:
        for endpoint in self.endpoints:
            value = value.replace(endpoint, "{endpoint}")
        value = LOCAL_URL.sub("{endpoint}", value)
        value = REQUEST_ID.sub("{request_id}", value)
        value = UUID.sub(lambda m: self.named.get(m.group(0).lower(), "{uuid}"), value)
        value = TIMESTAMP.sub("{timestamp}", value)
        for host in self.host_names:
            value = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w.-])", "{host}", value)
        return value

    def value(self, value: Any, key: str | None = None) -> Any:
        if key and key.startswith("enabled_") and key.endswith("_interfaces"):
            # Ironic builds these from sets: their order means nothing.
            if isinstance(value, list):
                return sorted(self.value(item) for item in value)
            if isinstance(value, str):
                return ", ".join(sorted(self.text(value).split(", ")))
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item, key) for item in value]
        if key in VOLATILE_KEYS:
            return "{volatile}"
        if isinstance(value, str):
            if key in HOST_KEYS and value:
                return "{host}"
            return self.text(value)
        return value

    def http(self, records: list[dict]) -> list[str]:
        """The requests of a step, one line each, with polling repeats collapsed.

        `--wait` and SDK waits poll `GET /v1/nodes/X` as often as time allows (openstacksdk
        first by name, then by UUID), so a node read right after another read of a node with
        the same answer is counted once.
        """
        lines: list[str] = []
        for record in records:
            line = (
                f"{record['method']} {self.text(record['path'])} "
                f"[{record['requested_version'] or '-'}] -> {record['status']}"
            )
            poll = NODE_READ.match(line)
            previous = NODE_READ.match(lines[-1]) if lines else None
            if poll and previous and poll.group(1) == previous.group(1):
                continue
            if not lines or lines[-1] != line:
                lines.append(line)
        return lines


def comparable_text(text: str) -> str:
    """An error text as it is compared (goldens are stored as recorded): the node a "no
    inventory" 404 names becomes `{node}`, as `compare.comparable_http` does for paths."""
    return NODE_INVENTORY_404.sub(r"\g<1>{node}\g<2>", text)


def parse_table(text: str) -> dict | None:
    """Reads a cliff/PrettyTable box (`+---+` borders, `|` cells) into columns and rows."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("+"):
        return None
    rows: list[list[str]] = []
    for line in lines:
        if line.startswith("+"):
            continue
        if not line.startswith("|"):
            return None
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    if not rows:
        return None
    return {"columns": rows[0], "rows": rows[1:]}
