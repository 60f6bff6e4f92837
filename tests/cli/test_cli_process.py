"""``wsikit`` in a real process: what a user sees on the terminal for broken inputs
(no traceback, no library noise, one error line) and for a closed pipe."""

from __future__ import annotations

import os
import subprocess
import sys


def _error_line(err: str, command: str) -> str:
    """The single ``wsikit CMD: error: ...`` line of ``err`` (and no traceback)."""
    errors = [ln for ln in err.splitlines() if ln.startswith(f"wsikit {command}: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def _wsikit(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WSIKIT_NO_PROGRESS": "1"}
    return subprocess.run([sys.executable, "-m", "wsikit", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_truncated_and_fake_slides_in_a_real_process(cmu_small, tmp_path) -> None:
    data = cmu_small.read_bytes()
    (tmp_path / "head.svs").write_bytes(data[:200_000])       # first directory cut off
    (tmp_path / "tail.svs").write_bytes(data[:-1_000])        # last directories cut off
    (tmp_path / "text.svs").write_text("not a slide\n")
    out = tmp_path / "out"
    res = _wsikit("segment", str(tmp_path / "head.svs"), "--out", str(out))
    assert res.returncode == 2
    line = _error_line(res.stderr, "segment")
    assert "head.svs" in line and "truncated" in line and "download the slide again" in line
    assert res.stderr.strip() == line  # no tifffile/PIL noise around the error
    res = _wsikit("info", str(tmp_path / "tail.svs"))
    assert res.returncode == 2 and res.stderr.strip() == _error_line(res.stderr, "info")
    assert "truncated" in res.stderr
    res = _wsikit("info", str(tmp_path / "text.svs"))
    assert res.returncode == 2 and "text.svs" in _error_line(res.stderr, "info")
    assert not out.exists()


def test_broken_pipe_is_quiet() -> None:
    env = {**os.environ, "WSIKIT_NO_PROGRESS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "wsikit", "models", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(5)
    proc.stdout.close()  # the reader leaves, like `| head -c 5`
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err
