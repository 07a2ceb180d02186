"""A recording HTTP proxy between the clients and the server under test.

The clients talk to the proxy; the proxy forwards every request unchanged (Host header
included, so the server's links point back at the proxy) and notes method, path, the
microversion asked for and the status answered, under the name of the step that is running.
That is how each step's golden knows which endpoints the `baremetal` CLI or openstacksdk
called for it, for Ironic and Ferric alike, without reading either server's log.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Headers that describe one hop, not the message: never forwarded.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


class RecordingProxy:
    """Forwards to `target` (http://host:port) and records exchanges per step."""

    def __init__(self, target: str):
        parsed = urllib.parse.urlsplit(target)
        self.target_host = parsed.hostname or "127.0.0.1"
        self.target_port = parsed.port or 80
        self._lock = threading.Lock()
        self._records: list[dict] | None = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass  # the recording is the log

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() not in HOP_BY_HOP
                }
                connection = http.client.HTTPConnection(
                    proxy.target_host, proxy.target_port, timeout=120
                )
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                    status = response.status
                    response_headers = response.getheaders()
                except OSError as error:
                    status, payload, response_headers = 502, str(error).encode(), []
                finally:
                    connection.close()
                proxy._record(self, status, dict((k.lower(), v) for k, v in response_headers))
                self.send_response(status)
                for name, value in response_headers:
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()

    def begin(self) -> None:
        """Starts collecting exchanges for a new step."""
        with self._lock:
            self._records = []

    def end(self) -> list[dict]:
        """Stops collecting and returns what the step sent, in order."""
        with self._lock:
            records, self._records = self._records or [], None
        return records

    def _record(self, handler: BaseHTTPRequestHandler, status: int, response_headers: dict):
        requested = handler.headers.get("X-OpenStack-Ironic-API-Version")
        standard = handler.headers.get("OpenStack-API-Version")
        if requested is None and standard:
            requested = standard.replace("baremetal", "").strip()
        record = {
            "method": handler.command,
            "path": handler.path,
            "requested_version": requested,
            "status": status,
            "version": response_headers.get("x-openstack-ironic-api-version"),
        }
        with self._lock:
            if self._records is not None:
                self._records.append(record)
