"""Differences from Ironic that are allowed, each with its reason (tests/clients/README.md,
"Allowed differences", says the same in prose; keep the two in step).

Each rule rewrites a golden and an observation of one step into forms that compare equal when
the difference is only the allowed one, and still differ otherwise: a subset rule keeps
failing when Ferric lacks something Ironic has, a type rule when the field disappears or
changes type. Nothing here applies to status codes, requests or error messages beyond the
server's own maximum microversion.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Callable

# The server's maximum microversion, where a message quotes it (the CLI's 406 text and
# openstacksdk's ConfigException). Ferric advertises the highest version whose features it
# implements (docs: ARCHITECTURE.md, ferric-api); Ironic 39 advertises 1.115.
MAX_VERSION = re.compile(r"(range is 1\.1 to |a maximum of |\[1\.1, )1\.\d+")


def _max_version(text: str) -> str:
    return MAX_VERSION.sub(r"\g<1>{max_version}", text)


def _collapse_repeats(text: str) -> str:
    """Consecutive identical lines once: the CLI prints its "Attempt 6 of 6" line once per
    microversion it tried, so against a server whose maximum is below 1.115 the 409 retry
    loop (which runs again after the 406 negotiation) prints it twice."""
    out: list[str] = []
    for line in text.split("\n"):
        repeat = out and out[-1] == line and line.startswith("Error contacting Ironic server:")
        if not repeat:
            out.append(line)
    return "\n".join(out)


def _items(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    if isinstance(value, str):
        return [item for item in value.split(", ") if item]
    return None


def _subset(golden: Any, actual: Any) -> tuple[Any, Any]:
    """Ferric may list more than Ironic, never less: equal when every golden item is there."""
    g, a = _items(golden), _items(actual)
    if g is not None and a is not None and set(g) <= set(a):
        return golden, golden
    return golden, actual


def _same_type(golden: Any, actual: Any) -> tuple[Any, Any]:
    """Present and of the same JSON type; the value itself may differ."""
    if type(golden) is type(actual):
        return golden, golden
    return golden, actual


def _in_transition_or_done(golden: Any, actual: Any) -> tuple[Any, Any]:
    """The golden caught the node mid-action (a target set); the observation may show it
    mid-action too or done (no target). Anything else still differs."""
    if golden is not None and actual in (golden, None):
        return golden, golden
    return golden, actual


def _walk(golden: Any, actual: Any, key: str, rule) -> tuple[Any, Any]:
    """Applies `rule` to every pair of values named `key`, at any depth, in both trees."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        for name in golden:
            if name not in actual:
                continue
            if name == key:
                golden[name], actual[name] = rule(golden[name], actual[name])
            else:
                golden[name], actual[name] = _walk(golden[name], actual[name], key, rule)
    elif isinstance(golden, list) and isinstance(actual, list):
        for index in range(min(len(golden), len(actual))):
            golden[index], actual[index] = _walk(golden[index], actual[index], key, rule)
    return golden, actual


class Rule:
    def __init__(self, steps: Callable[[str], bool], key: str, rule, reason: str):
        self.steps, self.key, self.rule, self.reason = steps, key, rule, reason


def _named(*names: str) -> Callable[[str], bool]:
    return lambda step: step in names


def _every(step: str) -> bool:
    return True


RULES = [
    Rule(
        _every,
        "driver_internal_info",
        _same_type,
        "the conductor's private scratchpad (read-only in the API, 'internal metadata set and "
        "stored by the node's driver'): Ironic keeps its own bookkeeping there (its agent's "
        "erase settings, finished step lists as null), Ferric its own; no client reads it",
    ),
    Rule(
        _named("cli/driver-show", "sdk/driver-get"),
        "*_interfaces",
        _subset,
        "Ironic narrows each interface kind by configuration (enabled_<kind>_interfaces in "
        "scripts/ironic-standalone.sh: no pxe boot, no agent/inspector inspection, no flat "
        "network); Ferric has no such settings and lists every interface its fake-hardware "
        "supports. Every interface Ironic lists must be listed by Ferric too",
    ),
    Rule(
        _named("cli/node-boot-device-supported", "sdk/node-boot-device-supported"),
        "supported_boot_devices",
        _subset,
        "Ironic's fake management interface supports only pxe; Ferric's fake supports pxe, "
        "disk, cdrom, bios and safe. pxe must be there",
    ),
    Rule(
        _named("bmo/power-reboot"),
        "target_power_state",
        _in_transition_or_done,
        "a reboot of a node that is on: the step's wait (power_state 'power on') is met before "
        "the reboot starts, so the read after it shows the reboot under way "
        "(target_power_state 'power on', Ironic's recording) or done (null), as fast as the "
        "server's worker is; both servers pass through both",
    ),
    Rule(
        _named("cli/node-boot-device-show", "sdk/node-boot-device-get"),
        "persistent",
        _same_type,
        "Ironic's fake management interface reports persistent=false whatever was set; "
        "Ferric's fake reports what was set (true here). The field must be a boolean",
    ),
]


def apply(name: str, golden: dict, actual: dict) -> tuple[dict, dict]:
    """The golden and the observation of step `name`, with the allowed differences evened."""
    golden, actual = copy.deepcopy(golden), copy.deepcopy(actual)
    for rule in RULES:
        if not rule.steps(name):
            continue
        for aspect in ("stdout", "after"):
            if rule.key.startswith("*"):
                suffix = rule.key[1:]
                keys = {
                    k
                    for k in (golden.get(aspect) or {})
                    if isinstance(golden.get(aspect), dict) and k.endswith(suffix)
                }
            else:
                keys = {rule.key}
            for key in keys:
                golden[aspect], actual[aspect] = _walk(
                    golden.get(aspect), actual.get(aspect), key, rule.rule
                )
    for side in (golden, actual):
        if isinstance(side.get("stderr"), str):
            side["stderr"] = _collapse_repeats(_max_version(side["stderr"]))
    return golden, actual
