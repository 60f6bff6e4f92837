"""A corpus read through the Ray engine on a local Ray instance gives the local engine's bank
(slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_corpus import _paper

from wsikit.batch import ingest_corpus

try:
    import ray
except ImportError:  # the [ray] extra; CI installs it (.ci/run), where missing is a failure
    if os.environ.get("CI"):
        raise
    pytest.skip("ray is not installed: pip install -e '.[ray]'", allow_module_level=True)

HERE = Path(__file__).resolve().parent


def _rows(bank: Path) -> dict[str, dict]:
    rows = [json.loads(r) for r in (bank / "manifest.jsonl").read_text().splitlines()]
    return {r["node_id"]: {k: r[k] for k in ("caption", "figure_label", "page", "content_hash")}
            for r in rows}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ray_engine_reads_a_corpus_like_the_local_engine(tmp_path, monkeypatch):
    src = tmp_path / "in"
    for i in range(4):
        _paper(src / f"p{i}.pdf", seed=10 + i)
    (src / "damaged.pdf").write_bytes(b"%PDF-1.7\nnot really")
    (src / "stuck.hang").write_text("hangs")
    # Ray workers inherit this environment: the test readers' module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE),
                                                      os.environ.get("PYTHONPATH", "")]))
    local = ingest_corpus(src, tmp_path / "local", workers=2, timeout=20,
                          plugins=["_corpus_readers"], echo=lambda _: None, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = ingest_corpus(src, tmp_path / "ray", engine="ray", timeout=20,
                               plugins=["_corpus_readers"], echo=lambda _: None,
                               progress=False)
    finally:
        ray.shutdown()
    assert dict(remote.counts) == dict(local.counts)
    assert remote.counts["done"] == 4 and remote.counts["failed"] == 2
    rows = _rows(tmp_path / "ray")
    assert rows == _rows(tmp_path / "local") and len(rows) == 8
    by_name = {Path(d.path).name: d for d in remote.documents}
    assert "Timeout" in by_name["stuck.hang"].message
    assert "damaged" in by_name["damaged.pdf"].message
    workers = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert workers["engine"] == "ray"
