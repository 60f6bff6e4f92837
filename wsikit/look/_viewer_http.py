"""A small HTTP/1.1 server for the viewer: a bounded pool of threads, idle connections cost none.

``http.server.ThreadingHTTPServer`` starts a thread per connection and keeps it while the
connection stays open: 300 idle connections are 300 threads (the address space grows by a
stack each, and under a limit new threads fail, so the owner's own request is dropped). Here
one thread owns every socket (a selector): it accepts, reads each request's head and body
without blocking, and only a *complete* request goes to one of ``workers`` threads, which
answers it and gives the connection back (keep-alive). So:

* an idle connection, or one that sends its request slowly, holds no thread: it is closed
  after ``idle_timeout`` seconds without a request, ``read_timeout`` seconds into an
  unfinished one;
* at most ``max_connections`` are open; past that the longest idle one is closed;
* heads above 64 KiB (431) and bodies above ``max_body`` bytes (413) are refused before
  they are read; only ``Content-Length`` bodies (no chunked uploads, 411).

The application is one function ``Request -> Response``; it never sees a socket.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus

from ..errors import WsikitError

__all__: list[str] = []

MAX_HEAD = 64 * 1024
_RECV = 64 * 1024


@dataclass
class Request:
    """One HTTP request: ``path`` is the decoded path without the query, ``query`` the
    parsed query (last value of each name), ``headers`` lower-case names."""

    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Response:
    """What the application answers."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def text(cls, message: str, status: int) -> Response:
        """A plain-text answer (errors: one line that says what to do)."""
        return cls(status, message.encode("utf-8"))


class _Conn:
    __slots__ = ("sock", "buf", "since", "reading_since", "busy")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.since = time.monotonic()  # idle (or open) since
        self.reading_since: float | None = None  # first byte of an unfinished request
        self.busy = False


class _Bad(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _parse(buf: bytearray, max_body: int) -> tuple[Request, bool, int] | None:
    """``(request, keep_alive, bytes used)`` when ``buf`` holds a whole request, None while
    it does not yet; :class:`_Bad` for a request that cannot be answered."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise _Bad(431, "request head too large")
        return None
    if end > MAX_HEAD:
        raise _Bad(431, "request head too large")
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Bad(400, "bad request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        name = name.strip().lower()
        if not sep or not name or name != line.partition(":")[0].lower():
            raise _Bad(400, "bad header line")
        if name in headers and name in ("host", "content-length", "origin"):
            raise _Bad(400, f"repeated {name} header")
        headers[name] = value.strip()
    if "transfer-encoding" in headers:
        raise _Bad(411, "send a Content-Length body (chunked uploads are not accepted)")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _Bad(400, "bad Content-Length") from None
    if length < 0:
        raise _Bad(400, "bad Content-Length")
    if length > max_body:
        raise _Bad(413, f"body of {length} bytes is above the {max_body} accepted")
    total = end + 4 + length
    if len(buf) < total:
        return None
    raw_path, _, raw_query = target.partition("?")
    query = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
    try:
        path = urllib.parse.unquote(raw_path, errors="strict") if "%" in raw_path else raw_path
    except UnicodeDecodeError:
        raise _Bad(400, "the path is not UTF-8") from None
    conn_hdr = headers.get("connection", "").lower()
    keep = ("close" not in conn_hdr) if version == "HTTP/1.1" else ("keep-alive" in conn_hdr)
    request = Request(method, target, path, query, headers, bytes(buf[end + 4:total]))
    return request, keep, total


class HttpServer:
    """Serve ``app`` on ``host:port`` (see the module notes).

    Parameters
    ----------
    app : callable
        ``Request -> Response``; an exception it raises is answered 500 (and printed).
    host, port : str, int
        Where to listen (port 0: a free one).
    workers : int
        Threads that run ``app`` (requests beyond wait in line).
    idle_timeout, read_timeout, write_timeout : float
        Seconds a connection may wait without a request, take to send one, and to take an
        answer.
    max_connections : int
        Open connections kept at most (past that the longest idle one is closed).
    max_body : int
        Largest request body accepted (bytes).

    Raises
    ------
    OSError
        The address cannot be bound.
    """

    def __init__(self, app: Callable[[Request], Response], *, host: str = "127.0.0.1",
                 port: int = 0, workers: int = 8, idle_timeout: float = 30.0,
                 read_timeout: float = 10.0, write_timeout: float = 30.0,
                 max_connections: int = 512, max_body: int = 32 * 2**20,
                 server_name: str = "wsikit") -> None:
        self.app = app
        self.idle_timeout, self.read_timeout = float(idle_timeout), float(read_timeout)
        self.write_timeout = float(write_timeout)
        self.max_connections, self.max_body = int(max_connections), int(max_body)
        self.workers = max(1, int(workers))
        self.server_name = server_name
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host, int(port)))
            self.socket.listen(128)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._pool: ThreadPoolExecutor | None = None
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._back: list[_Conn] = []
        self._back_lock = threading.Lock()
        self._conns: dict[int, _Conn] = {}
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        #: Requests answered (tests, benchmarks).
        self.answered = 0

    # -- life cycle --------------------------------------------------------------------------
    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Run until :meth:`shutdown` (in another thread)."""
        self._stop.clear()
        self._stopped.clear()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="wsikit-view")
        self._sel.register(self.socket, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stop.is_set():
                for key, _ in self._sel.select(timeout=min(poll_interval, 1.0)):
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    else:
                        self._read(key.data)
                self._take_back()
                self._expire()
        finally:
            for conn in list(self._conns.values()):
                if not conn.busy:
                    self._close(conn)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(self.socket)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(self._wake_r)
            self._pool.shutdown(wait=True, cancel_futures=True)
            for conn in list(self._conns.values()):
                self._close(conn)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait for it to return."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket."""
        self.socket.close()
        for s in (self._wake_r, self._wake_w):
            s.close()
        self._sel.close()

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._conns)

    # -- the selector thread -----------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._drop_idle()
                return
            sock.setblocking(False)
            conn = _Conn(sock)
            self._conns[id(conn)] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            if len(self._conns) > self.max_connections:
                self._drop_idle()

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if not conn.buf:
            conn.reading_since = time.monotonic()
        conn.buf += data
        self._try_dispatch(conn)

    def _try_dispatch(self, conn: _Conn) -> None:
        try:
            parsed = _parse(conn.buf, self.max_body)
        except _Bad as bad:
            self._unregister(conn)
            conn.busy = True
            assert self._pool is not None
            self._pool.submit(self._answer_bad, conn, bad)
            return
        if parsed is None:
            return
        request, keep, used = parsed
        del conn.buf[:used]
        self._unregister(conn)
        conn.busy = True
        assert self._pool is not None
        self._pool.submit(self._work, conn, request, keep)

    def _take_back(self) -> None:
        with self._back_lock:
            back, self._back = self._back, []
        for conn in back:
            conn.busy = False
            conn.since = time.monotonic()
            conn.reading_since = conn.since if conn.buf else None
            try:
                self._sel.register(conn.sock, selectors.EVENT_READ, conn)
            except (ValueError, OSError):
                self._close(conn)
                continue
            if conn.buf:
                self._try_dispatch(conn)

    def _expire(self) -> None:
        now = time.monotonic()
        for conn in list(self._conns.values()):
            if conn.busy:
                continue
            if conn.reading_since is not None:
                if now - conn.reading_since > self.read_timeout:
                    self._close(conn)
            elif now - conn.since > self.idle_timeout:
                self._close(conn)

    def _drop_idle(self) -> None:
        """Close the longest idle connection (no request under way)."""
        idle = [c for c in self._conns.values() if not c.busy and not c.buf]
        if idle:
            self._close(min(idle, key=lambda c: c.since))

    def _unregister(self, conn: _Conn) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(conn.sock)

    def _close(self, conn: _Conn) -> None:
        self._unregister(conn)
        self._conns.pop(id(conn), None)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _give_back(self, conn: _Conn) -> None:
        with self._back_lock:
            self._back.append(conn)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- worker threads ----------------------------------------------------------------------
    def _send(self, conn: _Conn, response: Response, *, keep: bool, head_only: bool = False
              ) -> bool:
        reason = HTTPStatus(response.status).phrase if response.status in \
            HTTPStatus._value2member_map_ else ""
        lines = [f"HTTP/1.1 {response.status} {reason}", f"Server: {self.server_name}",
                 f"Content-Type: {response.content_type}",
                 f"Content-Length: {len(response.body)}",
                 f"Connection: {'keep-alive' if keep else 'close'}"]
        lines += [f"{k}: {v}" for k, v in response.headers]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            conn.sock.settimeout(self.write_timeout)
            conn.sock.sendall(data if head_only else data + response.body)
            conn.sock.setblocking(False)
        except OSError:
            return False
        return True

    def _answer_bad(self, conn: _Conn, bad: _Bad) -> None:
        self._send(conn, Response.text(str(bad), bad.status), keep=False)
        self._finish(conn, keep=False)

    def _work(self, conn: _Conn, request: Request, keep: bool) -> None:
        try:
            response = self.app(request)
        except Exception as exc:  # one bad request never takes the server down
            print(f"wsikit view: {request.path}: unexpected {type(exc).__name__}: {exc} (a bug "
                  "in wsikit: please report it)", file=sys.stderr)
            response = Response.text(f"unexpected {type(exc).__name__} (see the wsikit view "
                                     "console)", 500)
        self.answered += 1
        ok = self._send(conn, response, keep=keep, head_only=request.method == "HEAD")
        self._finish(conn, keep=keep and ok)

    def _finish(self, conn: _Conn, *, keep: bool) -> None:
        if keep and not self._stop.is_set():
            self._give_back(conn)
            return
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)
        with self._back_lock:  # closed from this thread; the loop forgets it
            self._conns.pop(id(conn), None)
        with contextlib.suppress(OSError):
            conn.sock.close()


def bind_error(exc: OSError, port: int) -> WsikitError | None:
    """The clear error of a port that cannot be bound (in use, not allowed), else None."""
    if exc.errno == errno.EADDRINUSE:
        return WsikitError(f"port {port} on 127.0.0.1 is in use (another wsikit view?); "
                           "pass --port N, or --port 0 for a free one")
    if exc.errno == errno.EACCES:
        return WsikitError(f"port {port} on 127.0.0.1 is not allowed for this user; pass "
                           "--port N above 1023, or --port 0 for a free one")
    return None
