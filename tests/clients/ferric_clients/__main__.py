"""Runs the client scenarios against a Bare Metal API endpoint and records or compares goldens.

    python -m ferric_clients --endpoint http://127.0.0.1:6385 [--record] [--server ferric]

Run it with the clients venv's Python (scripts/clients-venv.sh); `cargo xtask clients` starts
the server and does this for you. With --record the observations become the goldens (only
from Ironic, and only if every step met its expectation); without it each step is compared
with its golden. Exit status 0 = everything matched (or was recorded), 1 = differences.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import urllib.request
from pathlib import Path

from . import bmo_scenario, cli_scenario, sdk_scenario
from .compare import report, requests_document, write_golden
from .proxy import RecordingProxy
from .steps import Run

HERE = Path(__file__).resolve().parent.parent
SCENARIOS = {"cli": cli_scenario.run, "sdk": sdk_scenario.run, "bmo": bmo_scenario.run}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m ferric_clients", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", required=True, help="the server, e.g. http://127.0.0.1:6385")
    parser.add_argument("--server", default="server", help="its name in the report (ferric, ironic)")
    parser.add_argument("--golden", type=Path, default=HERE / "golden", help="golden directory")
    parser.add_argument("--record", action="store_true", help="write goldens instead of comparing")
    parser.add_argument("--scenario", default="cli,sdk", help="comma list of: cli, sdk, bmo")
    parser.add_argument("--wait-timeout", type=float, default=30.0,
                        help="seconds to wait for a node to reach a state (default 30)")
    parser.add_argument("--report-dir", type=Path,
                        help="also write report.txt and observations.json here")
    args = parser.parse_args()

    endpoint = args.endpoint.rstrip("/")
    server_version = wait_for_endpoint(endpoint)
    print(f"clients: {args.server} at {endpoint} (API {server_version})", file=sys.stderr)

    scenarios = [name.strip() for name in args.scenario.split(",") if name.strip()]
    for name in scenarios:
        if name not in SCENARIOS:
            parser.error(f"unknown scenario {name!r}")

    with RecordingProxy(endpoint) as proxy:
        run = Run(endpoint, proxy, args.wait_timeout)
        try:
            for name in scenarios:
                print(f"clients: running the {name} scenario", file=sys.stderr)
                SCENARIOS[name](run)
        finally:
            shutil.rmtree(run.home, ignore_errors=True)

    text, passed = report(run.results, args.golden, args.server, args.record)
    print(text)
    if args.report_dir:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        (args.report_dir / "report.txt").write_text(text)
        (args.report_dir / "observations.json").write_text(
            json.dumps([r.observation.to_json() for r in run.results], indent=2) + "\n"
        )
    if args.record:
        if not passed:
            print("clients: not recording: some steps did not meet their expectations",
                  file=sys.stderr)
            return 1
        for name in scenarios:
            shutil.rmtree(args.golden / name, ignore_errors=True)
        for result in run.results:
            write_golden(args.golden, result)
        for name in scenarios:
            mine = [r for r in run.results if r.observation.name.startswith(name + "/")]
            (args.golden / name / "REQUESTS.md").write_text(
                requests_document(mine, f"API {server_version}")
            )
        print(f"clients: recorded {len(run.results)} goldens in {args.golden}", file=sys.stderr)
    return 0 if passed else 1


def wait_for_endpoint(endpoint: str, timeout: float = 60.0) -> str:
    """Waits until `GET /` answers; returns the server's maximum microversion."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{endpoint}/", timeout=5) as response:
                document = json.load(response)
                return document.get("default_version", {}).get("version", "?")
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise SystemExit(f"clients: {endpoint} did not answer within {timeout:g} s")
            time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
