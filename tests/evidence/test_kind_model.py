"""The figure kind model: features of an analysed figure, the numpy logistic regression, the
shipped model file (loading, feature-name check) and the rule/learned registry."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _he_figures import he_grid

from wsikit.errors import EvidenceError
from wsikit.evidence import kind_model as km
from wsikit.evidence.caption_parts import CaptionParts
from wsikit.evidence.kinds import FigureKind
from wsikit.evidence.panels import FigureAnalysis, FigurePanel, Panel, analyse_figure


def _panel_kind(kind: str, picture_share: float, **features: float) -> FigureKind:
    scores = dict.fromkeys(("micrograph", "photograph", "chart", "diagram"), 0.1)
    scores[kind] = 0.8
    return FigureKind(kind=kind, scores=scores, reason="",
                      features={"picture_share": picture_share, **features})


def _analysis(panel_kinds: list[FigureKind], whole: FigureKind, caption: str
              ) -> FigureAnalysis:
    panels = tuple(FigurePanel(panel=Panel(box=(i * 110, 0, i * 110 + 100, 100),
                                           label=chr(65 + i), lettered=True),
                               kind=k, caption=caption) for i, k in enumerate(panel_kinds))
    return FigureAnalysis(kind=whole, panels=panels, caption_parts=CaptionParts(shared=caption))


def test_features_follow_the_panels_and_the_caption():
    micro = _panel_kind("micrograph", 0.95, stain=0.7)
    chart = _panel_kind("chart", 0.0, ticks=2.0, chart_share=0.8)
    whole = FigureKind(kind="mixed", scores={"mixed": 0.5, "chart": 0.3}, reason="",
                       features={"picture_share": 0.5, "ticks": 1.0, "texture": 20.0})
    a = _analysis([micro, micro, chart], whole, "(A, B) H&E, ×200. (C) Kaplan-Meier curves.")
    x = dict(zip(km.FEATURE_NAMES, km.figure_features(a, caption=None), strict=True))
    assert x["has_panels"] == 1.0 and x["panels_log"] == pytest.approx(np.log(4))
    assert x["panel_area_micrograph"] == pytest.approx(2 / 3)
    assert x["panel_area_chart"] == pytest.approx(1 / 3)
    assert x["panel_ticks"] == pytest.approx(1 / 3)
    assert x["panel_firm_picture"] == pytest.approx(2 / 3)
    assert x["rule_mixed"] == 1.0 and x["rule_chart"] == 0.0
    assert x["whole_log_ticks"] == pytest.approx(np.log(2))
    assert x["whole_balance"] == pytest.approx(0.5)
    assert x["caption_micrograph"] > 0.5 and x["caption_chart"] > 0.5
    assert x["caption_diagram"] == 0.0


def _toy(n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Feature rows where one feature per kind says the kind (plus noise)."""
    kinds = ("micrograph", "chart", "diagram")
    cols = [km.FEATURE_NAMES.index(f"panel_area_{k}") for k in kinds]
    x = rng.normal(0, 0.1, (n, len(km.FEATURE_NAMES)))
    y = []
    for i in range(n):
        k = i % 3
        x[i, cols[k]] += 1.0
        y.append(kinds[k])
    return x, y


def test_fitting_learns_a_separable_toy_problem_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    x, y = _toy(90, rng)
    model = km.fit_kind_model(x, y, l2=0.01, trained_on=["toy"])
    xt, yt = _toy(30, rng)
    assert model.predict(xt) == yt
    assert model.predict_proba(xt).sum(axis=1) == pytest.approx(np.ones(30))
    # the feature that says "chart" pushes chart over diagram most
    top = model.contributions(xt[1], "chart", "diagram")[0][0]
    assert top in ("panel_area_chart", "panel_area_diagram")
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model.to_dict()), encoding="utf-8")
    back = km.load_kind_model(path)
    assert back.predict(xt) == yt and back.trained_on == ("toy",)
    with pytest.raises(EvidenceError, match="photo"):
        km.fit_kind_model(x, ["photo"] * len(x))


def test_a_model_trained_on_other_features_is_refused_by_name(tmp_path):
    data = km.load_kind_model().to_dict()
    renamed = dict(data, feature_names=["old_feature", *data["feature_names"][1:]])
    path = tmp_path / "old.json"
    path.write_text(json.dumps(renamed), encoding="utf-8")
    with pytest.raises(EvidenceError, match=r"old\.json.*does not measure.*old_feature"):
        km.load_kind_model(path)
    with pytest.raises(EvidenceError, match="retrain"):
        km.load_kind_model(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(EvidenceError, match="cannot read"):
        km.load_kind_model(path)
    with pytest.raises(EvidenceError, match="no figure kind model 'neural'; registered: "
                                            "learned, rule"):
        km.get_kind_model("neural")


def test_the_shipped_model_records_what_it_was_trained_on():
    model = km.load_kind_model()
    assert set(model.feature_names) <= set(km.FEATURE_NAMES)
    # held-out-5 is the honest test of this model: fitting on it waits until it has been
    # scored (benchmarks/train_figure_kinds.py TRAIN_SETS; then this line changes too)
    assert "held-out-5" not in model.trained_on and "held-out-4" in model.trained_on
    assert set(model.info["leave_one_set_out"]) == set(model.trained_on)


def test_the_shipped_model_on_plain_cases():
    """Figures whose panels, pixels and caption all agree get that kind."""
    model = km.load_kind_model()
    micro = _panel_kind("micrograph", 0.97, stain=0.7, texture=30.0)
    whole = FigureKind(kind="micrograph", scores={"micrograph": 1.1, "photograph": 0.1},
                       reason="", features={"picture_share": 0.97, "stain": 0.7,
                                            "picture_area": 0.9, "texture": 30.0})
    a = _analysis([micro] * 4, whole, "(A–D) H&E sections, original magnification ×200.")
    assert model.predict(km.model_features(km.figure_features(a), model))[0] == "micrograph"
    chart = _panel_kind("chart", 0.0, ticks=2.0, chart_share=0.8, hlines=4.0)
    whole = FigureKind(kind="chart", scores={"chart": 0.9, "diagram": 0.2}, reason="",
                       features={"picture_share": 0.0, "ticks": 2.0, "chart_share": 0.8,
                                 "graphic_area": 0.3, "white_area": 0.7, "hlines": 6.0})
    a = _analysis([chart] * 2, whole, "(A) Kaplan-Meier curves of overall survival. (B) ROC.")
    assert model.predict(km.model_features(km.figure_features(a), model))[0] == "chart"


def test_rule_and_learned_decide_a_generated_figure():
    fig, _ = he_grid()
    caption = "(A–D) H&E, original magnification ×200."
    rule = analyse_figure(fig, caption=caption, kind_model="rule")
    learned = analyse_figure(fig, caption=caption, kind_model="learned")
    assert rule.kind.kind == learned.kind.kind == "micrograph"
    assert [p.kind for p in rule.panels] == [p.kind for p in learned.panels]
    assert learned.kind.reason.startswith("learned v") and "rule: " in learned.kind.reason
    assert sum(learned.kind.scores.values()) == pytest.approx(1.0, abs=1e-3)
    assert learned.kind.source == km.LEARNED_SOURCE != rule.kind.source
    # features are measured on the rule's analysis: a learned one's scores are probabilities
    with pytest.raises(EvidenceError, match="kind_model='rule'"):
        km.figure_features(learned)
    assert "rule" in km.list_kind_models() and km.DEFAULT_KIND_MODEL in km.list_kind_models()


def test_a_schematic_beside_plots_and_caption_parts_naming_both_are_measured():
    chart = _panel_kind("chart", 0.0, ticks=2.0, chart_share=0.8)
    scheme = _panel_kind("diagram", 0.0, boxes=3.0, chart_share=0.25)
    whole = FigureKind(kind="chart", scores={"chart": 0.6, "diagram": 0.4}, reason="",
                       features={"picture_share": 0.0, "ticks": 1.0})
    parts = CaptionParts(shared="", parts={"A": "Schematic of the assay.",
                                           "B": "Kaplan-Meier curves of survival."})
    panels = tuple(FigurePanel(panel=Panel(box=(i * 110, 0, i * 110 + 100, 100),
                                           label=chr(65 + i), lettered=True),
                               kind=k, caption="") for i, k in enumerate((scheme, chart)))
    a = FigureAnalysis(kind=whole, panels=panels, caption_parts=parts)
    x = dict(zip(km.FEATURE_NAMES, km.figure_features(a), strict=True))
    assert x["panel_firm_chart"] == x["panel_firm_diagram"] == pytest.approx(0.5)
    assert x["panel_chart_diagram_min"] == pytest.approx(0.5)
    assert x["panel_picture_graphic_min"] == 0.0
    assert x["caption_parts_chart"] == x["caption_parts_diagram"] == pytest.approx(0.5)
    assert x["caption_parts_families"] == 2.0 and x["caption_parts_picture"] == 0.0
    plots = FigureAnalysis(kind=whole, panels=(panels[1], panels[1]), caption_parts=CaptionParts(
        shared="", parts={"A": "Kaplan-Meier curves.", "B": "ROC curves."}))
    y = dict(zip(km.FEATURE_NAMES, km.figure_features(plots), strict=True))
    assert y["panel_chart_diagram_min"] == 0.0 and y["caption_parts_families"] == 1.0


def test_a_model_fitted_before_features_were_added_reads_its_own_columns(tmp_path):
    # a model on some of the features (fitted before the others were measured) keeps working:
    # its columns are picked by name, in its order
    names = [km.FEATURE_NAMES[3], km.FEATURE_NAMES[0]]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 2))
    model = km.fit_kind_model(x, ["chart" if v > 0 else "diagram" for v in x[:, 0]],
                              feature_names=names, classes=("chart", "diagram"))
    path = tmp_path / "subset.json"
    path.write_text(json.dumps(model.to_dict()), encoding="utf-8")
    back = km.load_kind_model(path)
    full = np.arange(len(km.FEATURE_NAMES), dtype=float)
    assert km.model_features(full, back).tolist() == [3.0, 0.0]
    assert km.model_features(full, km.load_kind_model()).shape == (
        len(km.load_kind_model().feature_names),)
