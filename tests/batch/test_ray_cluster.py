"""Ray on several nodes: a 3-node cluster on this machine, one worker node killed mid-run.

Nodes are ``ray.cluster_utils.Cluster`` raylets with their own resources (a head with no CPUs
that only coordinates, two worker nodes with 3 CPUs each); the job folder is shared because
every node is on this machine, as it would be on a cluster's shared file system. While a slide
is being processed on node B, node B is removed (its raylet and workers killed). Every slide
must still complete exactly once, and the outputs must equal a local-engine run's.

Slow-marked (cluster start-up and worker imports dominate: about a minute on 2 cores), so CI
runs it as its own step, with the [ray] extra installed:
``python -m pytest -q tests/batch/test_ray_cluster.py tests/batch/test_ray.py``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from _batch_options import OPTIONS
from _reference import read_outputs

from wsikit.batch import read_manifest, run_batch

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

HERE = Path(__file__).resolve().parent
GOOD = ["nompp", "slide0", "slide1", "slide2", "slide3"]


def _kill_when_busy(cluster, node, job: Path, stop: threading.Event, killed: dict) -> None:
    """Remove ``node`` as soon as a slide's ``hold`` step has started on it."""
    started = job / "started"
    while not stop.is_set():
        if started.is_dir():
            here = [p.name.split(".")[0] for p in started.iterdir()
                    if p.name.split(".")[1] == node.node_id]
            if here:
                killed["slide"] = here[0]
                killed["t"] = time.monotonic()
                cluster.remove_node(node, allow_graceful=False)
                return
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_node_killed_mid_run_every_slide_completes_once(cohort_csv, tmp_path, monkeypatch):
    local = run_batch(cohort_csv, tmp_path / "local", encoder="heuristic", workers=1,
                      echo=lambda _: None, progress=False, **OPTIONS)
    assert dict(local.counts) == {"done": 5, "failed": 1, "skipped": 0}

    # Raylets (and so every Ray worker) inherit this environment: the test plugin's folder on
    # the path, and a hold long enough to kill a node in the middle of it.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH",
                                                                                 "")]))
    monkeypatch.setenv("WSIKIT_TEST_SLEEP", "1.5")
    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "1")
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False})
    try:
        node_a = cluster.add_node(num_cpus=3, resources={"node_a": 1})
        node_b = cluster.add_node(num_cpus=3, resources={"node_b": 1})
        cluster.wait_for_nodes()
        job = tmp_path / "ray"
        stop, killed = threading.Event(), {}
        killer = threading.Thread(target=_kill_when_busy,
                                  args=(cluster, node_b, job, stop, killed), daemon=True)
        killer.start()
        t0 = time.monotonic()
        try:
            remote = run_batch(cohort_csv, job, steps="segment,patch,features,hold",
                               encoder="heuristic", workers=2, engine="ray",
                               ray_address=cluster.address, plugins=["_ray_steps"],
                               echo=lambda _: None, progress=False, **OPTIONS)
        finally:
            stop.set()
            killer.join(timeout=30)
        wall = time.monotonic() - t0
    finally:
        cluster.shutdown()

    assert "slide" in killed, "node B never ran a slide: nothing was killed"
    assert dict(remote.counts) == {"done": 5, "failed": 1, "skipped": 0}, remote.table()
    # Every slide completed exactly once, though one was in progress on the killed node.
    completed = [ln.split() for ln in (job / "completed.log").read_text().splitlines()]
    assert Counter(s for s, _ in completed) == Counter(dict.fromkeys(GOOD, 1))
    assert {n for _, n in completed} >= {node_a.node_id}
    victim = json.loads((job / "state" / f"{killed['slide']}.json").read_text())
    assert victim["status"] == "done" and victim["attempts"] == 1
    lost = victim["lost_attempts"]
    assert lost and lost[0]["part"] == "device"
    assert lost[0]["error"] in ("ActorDiedError", "ActorUnavailableError")
    assert victim["worker"]["node"] == node_a.node_id  # finished on the surviving node
    # Outputs equal the local engine's, byte for byte (GeoJSON) and value for value (arrays).
    for slide_id in GOOD:
        a = read_outputs(tmp_path / "local", slide_id)
        b = read_outputs(job, slide_id)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{slide_id} {key}")
    assert not list((job / "locks").glob("*.lock"))
    rows = {r["slide_id"]: r for r in read_manifest(job)}
    assert rows[killed["slide"]]["status"] == "done"
    assert rows["corrupt"]["status"] == "failed" and rows["corrupt"]["error_type"] == "SlideError"
    print(f"\nray 3-node run with node B killed: {wall:.1f} s wall; killed during "
          f"{killed['slide']}")
