"""The viewer's HTTP server: a bounded pool of threads, idle and slow connections hold none,
the owner's request is answered whatever else is connected (issue 40.6)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from pathlib import Path

import pytest

from wsikit.look._viewer_http import HttpServer, Request, Response


def _app(request: Request) -> Response:
    if request.path == "/slow":
        time.sleep(0.5)
    return Response(200, f"{request.method} {request.path} {len(request.body)}".encode())


@pytest.fixture
def server():
    srv = HttpServer(_app, port=0, workers=4, idle_timeout=5.0, read_timeout=4.0,
                     max_connections=1000, max_body=1000)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(10)


def _get(port: int, path: str = "/", *, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("wsikit-view"))


def test_hundreds_of_idle_and_slow_connections_hold_no_thread(server: HttpServer) -> None:
    """300 connections that send nothing and 100 that send half a request: the owner's own
    request is still answered at once, by one of the few threads of the pool."""
    port = server.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
    slow = []
    for _ in range(100):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")   # no end of head: never done
        slow.append(s)
    try:
        deadline = time.monotonic() + 5
        while server.open_connections < 400 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.open_connections == 400
        t0 = time.monotonic()
        assert _get(port, "/mine") == (200, b"GET /mine 0")
        assert time.monotonic() - t0 < 1.0
        assert _threads() <= 4
        # idle ones are closed after idle_timeout, half-sent ones after read_timeout
        for s in idle[:5] + slow[:5]:
            s.settimeout(15)
            assert s.recv(100) == b""
    finally:
        for s in idle + slow:
            s.close()
    deadline = time.monotonic() + 15
    while server.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.open_connections == 0


def test_many_parallel_requests_run_on_the_bounded_pool(server: HttpServer) -> None:
    port = server.server_address[1]
    results: list[int] = []
    seen = []

    def one() -> None:
        seen.append(_threads())
        results.append(_get(port, "/slow", timeout=60)[0])

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    peak = 0
    while any(t.is_alive() for t in threads):
        peak = max(peak, _threads())
        time.sleep(0.01)
    assert results == [200] * 40 and peak <= 4


def test_keep_alive_answers_several_requests_on_one_connection(server: HttpServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        for i in range(5):
            conn.request("GET", f"/n{i}")
            resp = conn.getresponse()
            assert resp.read() == f"GET /n{i} 0".encode()
            assert resp.getheader("Connection") == "keep-alive"
        conn.request("POST", "/p", body=b"x" * 10, headers={"Content-Type": "text/plain"})
        assert conn.getresponse().read() == b"POST /p 10"
    finally:
        conn.close()
    assert server.answered >= 6


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
    (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    (b"NONSENSE\r\n\r\n", 400),
    (b"GET /%ff HTTP/1.1\r\nHost: x\r\n\r\n", 400),
])
def test_requests_it_cannot_answer_are_refused_before_reading_them(server: HttpServer,
                                                                  raw: bytes, status: int
                                                                  ) -> None:
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as s:
        s.sendall(raw)
        head = s.recv(200)
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert _get(server.server_address[1])[0] == 200   # and the server lives on


def test_a_viewer_answers_its_owner_beside_300_idle_connections(cmu_small: Path) -> None:
    """The viewer itself (the report's case: 300 idle connections under an address-space
    limit made new threads fail and dropped the owner's request)."""
    from wsikit.look.viewer import ViewerSource, make_server

    source = ViewerSource.open(cmu_small)
    srv = make_server(source, port=0, workers=3)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(300)]
    try:
        status, body = _get(srv.port, f"/slide_files/12/1_1.jpeg?token={srv.token}")
        assert status == 200 and body[:2] == b"\xff\xd8"
        assert _threads() <= 3
    finally:
        for s in idle:
            s.close()
        srv.shutdown()
        srv.server_close()
        source.close()
