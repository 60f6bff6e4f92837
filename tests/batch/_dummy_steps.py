"""Test-only batch steps (imported by the tests and, through ``plugins``, by the workers).

``dummy`` writes ``dummy/<slide>.txt`` holding the SHA-256 of the slide file; it fails on files
whose content starts with ``BROKEN``, sleeps ``WSIKIT_TEST_SLEEP`` seconds, and appends one
line per execution to ``JOBDIR/executions.log`` so tests can count how often a slide ran.
``crash`` kills its own worker process (to test worker death).
"""

from __future__ import annotations

import hashlib
import os
import time

from wsikit.run import SkipSlide, register_step


@register_step("dummy", config_keys=("patch_px",))
def dummy_step(ctx):
    data = ctx.slide.path.read_bytes()
    with open(ctx.job.root / "executions.log", "a", encoding="utf-8") as fh:
        fh.write(f"{ctx.slide_id} {os.getpid()}\n")
    time.sleep(float(os.environ.get("WSIKIT_TEST_SLEEP", "0")))
    if data.startswith(b"BROKEN"):
        raise ValueError(f"cannot parse {ctx.slide.path.name}: broken header")
    if data.startswith(b"EMPTY"):
        raise SkipSlide("nothing to do")
    with ctx.output("text", "dummy", f"{ctx.slide_id}.txt") as tmp:
        tmp.write_text(hashlib.sha256(data).hexdigest() + f" {ctx.options.grid.patch_px}\n")
    return {"n_patches": len(data)}


@register_step("crash")
def crash_step(ctx):
    if ctx.slide.path.read_bytes().startswith(b"CRASH"):
        os.kill(os.getpid(), 9)
    return {}
