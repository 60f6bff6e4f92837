"""The question's blend: per-slide ranks, one documented rule, the question's share honoured."""

from __future__ import annotations

import numpy as np
import pytest

from wsikit.errors import SelectionError
from wsikit.selection.question import (
    QUESTION_RULE,
    blend_question,
    rank_normalise,
)
from wsikit.selection.question import steer as steer_scores


def test_ranks_are_uniform_share_ties_and_keep_nan() -> None:
    r = rank_normalise(np.array([5.0, 1.0, np.nan, 3.0, 3.0]))
    # finite values 1 < 3 = 3 < 5: ranks 1, 2.5, 2.5, 4 of 4 -> (r - 0.5) / 4
    np.testing.assert_allclose(r, [0.875, 0.125, np.nan, 0.5, 0.5])
    x = np.random.default_rng(0).normal(size=200)
    assert sorted(rank_normalise(x)) == pytest.approx((np.arange(200) + 0.5) / 200)
    assert np.isnan(rank_normalise(np.array([np.nan]))).all()


def test_the_blend_does_not_care_for_units() -> None:
    rng = np.random.default_rng(1)
    imp, sim = rng.random(50), rng.normal(0.25, 0.02, 50)  # cosines in a narrow band
    a = blend_question(imp, sim, weight=0.5)
    # any increasing rescaling of either score gives the same blend
    b = blend_question(np.exp(5 * imp), 1000 * sim - 7, weight=0.5)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.min() > 0 and a.max() < 1


def test_the_weight_is_the_questions_share() -> None:
    rng = np.random.default_rng(2)
    imp, sim = rng.random(40), rng.random(40)
    np.testing.assert_array_equal(np.argsort(blend_question(imp, sim, weight=0.0)),
                                  np.argsort(imp))
    np.testing.assert_array_equal(np.argsort(blend_question(imp, sim, weight=1.0)),
                                  np.argsort(sim))
    # at w = 0.5 the top of the blend is salient and relevant: a patch last on either is
    # never first, and the patch first on both is first
    imp[7], sim[7] = 2.0, 2.0
    imp[3], sim[3] = 3.0, -1.0
    top = int(np.argmax(blend_question(imp, sim, weight=0.5)))
    assert top == 7


@pytest.mark.parametrize(("kwargs", "needle"), [({"weight": 1.5}, "in \\[0, 1\\]"),
                                                ({"weight": True}, "in \\[0, 1\\]")])
def test_bad_weights_are_refused(kwargs: dict, needle: str) -> None:
    with pytest.raises(SelectionError, match=needle):
        blend_question(np.ones(3), np.ones(3), **kwargs)


def test_bad_scores_are_refused() -> None:
    with pytest.raises(SelectionError, match="same patches"):
        blend_question(np.ones(3), np.ones(4))
    with pytest.raises(SelectionError, match="similarity has 1 non-finite"):
        blend_question(np.ones(3), np.array([1.0, np.nan, 2.0]))


def test_steering_records_the_rule_and_why_each_region() -> None:
    coords = np.array([[0, 0], [256, 0], [0, 256], [256, 256]])
    imp = np.array([0.9, 0.1, 0.2, 0.3])
    sims = {"a": np.array([0.1, 0.9, 0.2, 0.3]), "b": np.array([0.0, 0.8, 0.1, 0.2])}
    st = steer_scores(imp, sims, question="q", weight=1.0, coords=coords, patch_size_l0=256,
                      labels=["A", "B"])
    assert int(np.argmax(st.blended)) == 1  # both towers agree on patch 1
    d = st.to_dict()
    assert d["applied"] and d["rule"] == QUESTION_RULE and d["towers"] == ["a", "b"]
    assert d["weight"] == 1.0 and d["question"] == "q" and "random_weights" not in d
    why = st.region_fields({"x": 256, "y": 0, "width": 256, "height": 256})["question"]
    assert why == {"importance_rank": 0.125, "similarity_rank": 0.875, "blended": 0.875}
    assert st.region_fields({"x": 5000, "y": 0, "width": 10, "height": 10}) == {}
