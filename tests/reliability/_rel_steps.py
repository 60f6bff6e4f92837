"""Test-only batch step of the reliability suite (imported by workers through ``plugins``).

``relsleep`` sleeps for ever on slides whose file starts with ``HANG`` (a stand-in for a read
that never returns) and records the slide's content hash otherwise.
"""

from __future__ import annotations

import hashlib
import time

from wsikit.run import register_step


@register_step("relsleep")
def relsleep_step(ctx):
    data = ctx.slide.path.read_bytes()
    while data.startswith(b"HANG"):
        time.sleep(0.2)
    with ctx.output("text", "relsleep", f"{ctx.slide_id}.txt") as tmp:
        tmp.write_text(hashlib.sha256(data).hexdigest() + "\n")
    return {"n_patches": 1}


@register_step("relgate", requires=("features",))
def relgate_step(ctx):
    """Waits (at most 120 s) until ``<job>/gate.open`` exists: the batch run holds the slide's
    lock, with its grid and features written, until the test opens the gate."""
    gate = ctx.job.root / "gate.open"
    (ctx.job.root / "gate.reached").write_text("1")
    deadline = time.monotonic() + 120
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {}
