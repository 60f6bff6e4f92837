"""Test-only step ``hold`` for the multi-node Ray test (imported by workers as a plugin).

It records where it runs (``JOBDIR/started/<slide>.<node id>.<pid>``) before sleeping
``WSIKIT_TEST_SLEEP`` seconds (``WSIKIT_TEST_SLEEP_<slide>`` for one slide), and appends
``<slide> <node id>`` to ``JOBDIR/completed.log`` only after finishing, so a test can kill a
node while a slide is held there and then count how often each slide completed. Its output is
the SHA-256 of the slide's feature file (deterministic).

Imported in a Ray actor that Ray restarted (actors load their plugins when they start), it
first sleeps ``WSIKIT_TEST_ACTOR_RESTART`` seconds: a slow set-up (torch, a large model), so a
test can make an actor's restart outlast the resubmits of the calls that were queued on it.
"""

from __future__ import annotations

import hashlib
import os
import time

from wsikit.run import register_step


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _in_restarted_actor() -> bool:
    import ray

    if not ray.is_initialized():
        return False
    context = ray.get_runtime_context()
    return context.get_actor_id() is not None and bool(context.was_current_actor_reconstructed)


if _in_restarted_actor():
    time.sleep(float(os.environ.get("WSIKIT_TEST_ACTOR_RESTART", "0")))


@register_step("hold", requires=("features",))
def hold_step(ctx):
    node = _node_id()
    started = ctx.job.root / "started"
    started.mkdir(exist_ok=True)
    (started / f"{ctx.slide_id}.{node}.{os.getpid()}").write_text("")
    time.sleep(float(os.environ.get(f"WSIKIT_TEST_SLEEP_{ctx.slide_id}",
                                    os.environ.get("WSIKIT_TEST_SLEEP", "0"))))
    digest = hashlib.sha256(ctx.output_path("features", "features").read_bytes()).hexdigest()
    with ctx.output("digest", "hold", f"{ctx.slide_id}.txt") as tmp:
        tmp.write_text(digest + "\n")
    with open(ctx.job.root / "completed.log", "a", encoding="utf-8") as fh:
        fh.write(f"{ctx.slide_id} {node}\n")
    return {"node": node}
