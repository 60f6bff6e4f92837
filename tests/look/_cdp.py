"""Headless Chromium driven over the DevTools protocol, with the standard library only.

A small WebSocket client (RFC 6455: masked text frames out, fragmented frames in) talks to
``chromium --remote-debugging-port=0``; one page is attached with a flat session. Enough for
the viewer's browser tests: navigate, evaluate JavaScript, dispatch real mouse and key events,
record every network request, take screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium_missing() -> str | None:
    """Why headless Chromium cannot run here (None when it can)."""
    if not Path(CHROMIUM).exists():
        return f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    return None


class _WebSocket:
    def __init__(self, url: str, timeout: float = 60.0) -> None:
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        if not m:
            raise ValueError(f"not a ws:// URL: {url}")
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {m.group(3)} HTTP/1.1\r\nHost: {m.group(1)}:{m.group(2)}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                           ).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(head.decode(errors="replace"))

    def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytearray([0x81])
        if len(data) < 126:
            head.append(0x80 | len(data))
        elif len(data) < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(head) + mask + masked)

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (9, 10):
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium with one page (:attr:`requests` lists every URL it asked for)."""

    def __init__(self, *, width: int = 1400, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="wsikit-cdp-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-default-apps", "--disable-extensions",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = None
        deadline = time.monotonic() + 60
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                url = found.group(1)
                break
        if url is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools server")
        # keep reading its log, or a full pipe would block the browser
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.ws = _WebSocket(url)
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.requests: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target,
                                                           "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True)

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = False, timeout: float = 60.0) -> dict[str, Any]:
        """Send one DevTools command and wait for its answer (events are kept)."""
        self._id += 1
        wanted = self._id
        msg: dict[str, Any] = {"id": wanted, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data = json.loads(self.ws.recv())
            if data.get("id") == wanted:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})
            self._event(data)
        raise TimeoutError(method)

    def _event(self, data: dict[str, Any]) -> None:
        if data.get("method") == "Page.javascriptDialogOpening":  # e.g. unsaved edits
            self._id += 1
            self.ws.send(json.dumps({"id": self._id, "method": "Page.handleJavaScriptDialog",
                                     "params": {"accept": True},
                                     "sessionId": self.session}))
        if data.get("method") == "Network.requestWillBeSent":
            self.requests.append(data["params"]["request"]["url"])
        self.events.append(data)

    def js(self, expression: str, *, timeout: float = 60.0) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        res = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                             "returnByValue": True}, session=True,
                        timeout=timeout)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def goto(self, url: str) -> None:
        """Open ``url`` in the page."""
        self.call("Page.navigate", {"url": url}, session=True)

    def wait(self, expression: str, *, timeout: float = 60.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {expression}")
            time.sleep(0.1)

    def mouse(self, kind: str, x: float, y: float, *, button: str = "left",
              buttons: int = 0, clicks: int = 1, **extra: Any) -> None:
        """One mouse event (``mousePressed``, ``mouseMoved``, ``mouseReleased``,
        ``mouseWheel``) at page pixel ``(x, y)``."""
        self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                               "button": button, "buttons": buttons,
                                               "clickCount": clicks, **extra}, session=True)

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 8
             ) -> None:
        """Press at ``start``, move to ``end`` in ``steps``, release."""
        self.mouse("mouseMoved", *start)
        self.mouse("mousePressed", *start, buttons=1)
        for i in range(1, steps + 1):
            f = i / steps
            self.mouse("mouseMoved", start[0] + (end[0] - start[0]) * f,
                       start[1] + (end[1] - start[1]) * f, buttons=1)
        self.mouse("mouseReleased", *end)

    def click(self, x: float, y: float, clicks: int = 1) -> None:
        """A click at ``(x, y)``."""
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, buttons=1, clicks=clicks)
        self.mouse("mouseReleased", x, y, clicks=clicks)

    def click_element(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching ``selector``."""
        box = self.js(f"(function(){{var r=document.querySelector({json.dumps(selector)})"
                      ".getBoundingClientRect();return [r.x+r.width/2,r.y+r.height/2];})()")
        self.click(*box)

    def screenshot(self, path: str | os.PathLike[str]) -> Path:
        """A PNG of the page as shown."""
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def console_errors(self) -> list[str]:
        """Console errors and CSP violations seen so far."""
        out = []
        for e in self.events:
            if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error":
                out.append(e["params"]["entry"]["text"])
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(str(e["params"]["exceptionDetails"].get("text")))
        return out

    def close(self) -> None:
        """Stop Chromium and remove its profile."""
        try:
            if hasattr(self, "ws"):
                self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)
