"""A retriever given no ``out`` says, once, where its slide queries write (issue 40, 11)."""

from __future__ import annotations

import warnings

import pytest


def test_the_default_output_folder_is_said_once(figure_index, cmu_small, tmp_path,
                                                fast_options, monkeypatch):
    from wsikit.integrations import core
    from wsikit.integrations.core import EvidenceSource

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(core, "_TOLD", set())
    opts = {k: v for k, v in fast_options.items() if k != "progress"}
    source = EvidenceSource(index=str(figure_index), min_similarity="none", select_options=opts)
    with pytest.warns(UserWarning, match=r"under .*/wsikit_out/select/; pass out=FOLDER"):
        result = source.retrieve(str(cmu_small))
    assert result.base_dir == tmp_path / "wsikit_out" / "select" / "CMU-1-Small-Region"
    assert (result.base_dir / "evidence.json").is_file()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source.retrieve(str(cmu_small))
    assert not _told(caught)  # said once per process, not at every query
    # an out the caller chose is not worth a word
    chosen = EvidenceSource(index=str(figure_index), min_similarity="none",
                            select_options=opts, out=str(tmp_path / "mine"))
    monkeypatch.setattr(core, "_TOLD", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen.retrieve(str(cmu_small))
    assert not _told(caught) and (tmp_path / "mine" / "select").is_dir()


def _told(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "pass out=FOLDER" in str(w.message)]
