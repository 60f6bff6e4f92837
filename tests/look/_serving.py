"""A ``wsikit view`` server in a thread for the viewer tests, and requests to it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

from wsikit.look.viewer import ViewerSource, make_server


class Serving:
    """``wsikit view target`` on a free port: :attr:`url` (with the token) opens the page."""

    def __init__(self, target: Path) -> None:
        self.source = ViewerSource.open(target)
        self.server = make_server(self.source, port=0)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.port}/"
        self.url = self.server.url

    def request(self, path: str, body: object = None, *, headers: dict | None = None,
                token: bool = True, raw: bytes | None = None) -> tuple[int, bytes]:
        """GET ``path`` (POST ``body`` as JSON, or ``raw`` bytes, from the page's origin)."""
        url = self.base + path + (f"?token={self.server.token}" if token else "")
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json", "Origin": self.base.rstrip("/")}
        hdrs.update(headers or {})
        req = urllib.request.Request(url, data=data, headers=hdrs if data is not None else {},
                                     method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def close(self) -> None:
        """Stop the server and close the slide."""
        self.server.shutdown()
        self.server.server_close()
        self.source.close()
