"""Self-contained HTML report (and PNG overview) of an ``evidence.json`` document.

The report is one HTML file that works offline: every image (thumbnail, heatmap, crops, matched
figures) is inlined as base64 PNG/JPEG, there are no scripts, fonts or external links other
than DOI links. Every text taken from the inputs is HTML-escaped.

>>> html_text = render_report(evidence, thumbnail=thumb, thumbnail_downsample=32.0,
...                           base_dir="out/slide")          # doctest: +SKIP
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from PIL import Image, UnidentifiedImageError

from .._atomic import atomic_path, write_bytes_atomic
from .._version import __version__
from ..evidence.regions_geojson import scale_colour
from ..evidence.result import EvidenceResult
from ..evidence.sanitise import valid_doi
from ..selection.selectors.grid import AttentionMap
from .overlay import (
    OverlayError,
    artefact_rings,
    as_attention_map,
    as_rgb_thumbnail,
    heatmap_rgba,
    overview_image,
    place_labels,
    tissue_rings,
)

__all__ = [
    "EVIDENCE_LEVELS",
    "ReportError",
    "render_overview_png",
    "render_report",
    "write_report",
]

ReportError = OverlayError

#: Evidence levels of literature figures (ARCHITECTURE.md).
EVIDENCE_LEVELS: dict[int, str] = {
    1: "guideline", 2: "systematic review / meta-analysis", 3: "randomised controlled trial",
    4: "observational / cohort study", 5: "case report", 6: "consensus statement",
    7: "textbook", 8: "expert opinion",
}

THUMB_MAX_PX = 1600
CROP_MAX_PX = 512
FIGURE_MAX_PX = 360


def _e(value: Any) -> str:
    """HTML-escape any value (None -> em dash)."""
    if value is None or value == "":
        return "—"
    return html.escape(str(value), quote=True)


def _num(value: Any, fmt: str = ".3f") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        return _e(value)
    if fmt == "d":
        return _e(f"{int(value):,}")
    v = float(value)
    return _e(format(v, fmt)) if math.isfinite(v) else _e(v)


def _data_uri(img: Image.Image | np.ndarray, *, max_px: int | None = None,
              fmt: str = "JPEG") -> str:
    if isinstance(img, np.ndarray):
        img = Image.fromarray(img)
    if max_px is not None and max(img.size) > max_px:
        img = img.copy()
        img.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    if fmt == "JPEG":
        if img.mode not in ("RGB", "L"):
            bg = Image.new("RGB", img.size, (255, 255, 255))
            rgba = img.convert("RGBA")
            bg.paste(rgba, mask=rgba.getchannel("A"))
            img = bg
        img.save(buf, format="JPEG", quality=85, optimize=True)
        mime = "image/jpeg"
    else:
        img.save(buf, format="PNG", optimize=True)
        mime = "image/png"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def _load_image(path: Any, base_dir: Path, max_px: int, absolute: Any = None
                ) -> tuple[str | None, str]:
    """Inline an image file: ``path`` relative to ``base_dir``, else ``absolute``; returns
    (data URI or None, problem)."""
    if not path and not absolute:
        return None, "no image path"
    p = Path(str(path or absolute))
    if not p.is_absolute():
        p = base_dir / p
    if not p.is_file() and absolute:
        p = Path(str(absolute))
    elif not p.is_file() and path and Path(str(path)).is_file():
        p = Path(str(path))  # evidence.json of wsikit < 0.2: relative to the working dir
    try:
        with Image.open(p) as im:
            im.load()
            return _data_uri(im, max_px=max_px), ""
    except FileNotFoundError:
        return None, f"image not found: {path}"
    except (UnidentifiedImageError, OSError) as exc:
        return None, f"cannot read image {path}: {exc}"


def _percentile(p: Any) -> str:
    """``p97.3`` badge: the similarity's percentile against unrelated figures."""
    if not isinstance(p, (int, float)) or isinstance(p, bool):
        return ""
    short = f"{float(p):.1f}".removesuffix(".0")
    return (f'<span class="pct" title="higher than {float(p):.1f}% of similarities between '
            f'unrelated figures of the index">p{short} vs unrelated figures</span>')


def _floor_text(ev: Mapping[str, Any]) -> str:
    floor = (ev.get("selection") or {}).get("min_similarity")
    if not isinstance(floor, Mapping):
        return "threshold"
    sim = floor.get("similarity")
    at = "" if not isinstance(sim, (int, float)) else f", cosine {float(sim):.3f}"
    if floor.get("kind") == "percentile":
        return f"{floor.get('given')} of unrelated-figure similarities{at}"
    return f"min similarity {floor.get('given')}"


def _doi_link(doi: Any) -> str:
    """A doi.org link for a real DOI; anything else in the field is shown as escaped text."""
    if not doi:
        return ""
    d = valid_doi(doi)
    if d is None:  # "javascript:...", a URL, markup: text, never a link
        return f"doi {_e(doi)}"
    href = "https://doi.org/" + quote(d, safe="/:;()._-")
    return f'<a href="{_e(href)}" rel="noopener noreferrer">doi:{_e(d)}</a>'


def _level(match: Mapping[str, Any]) -> tuple[str, str]:
    level = match.get("evidence_level")
    name = match.get("evidence_level_name")
    if level is None:
        return "unknown", "level-unknown"
    try:
        lv = int(level)
    except (TypeError, ValueError):
        return str(level), "level-unknown"
    name = name or EVIDENCE_LEVELS.get(lv, "unknown")
    return f"{name} (level {lv})", f"level-{lv}" if 1 <= lv <= 8 else "level-unknown"


CSS = """
:root{--fg:#1f2933;--muted:#64748b;--bg:#f6f7f9;--card:#fff;--line:#e2e8f0;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,
sans-serif;color:var(--fg);background:var(--bg)}
header{background:#0f172a;color:#f8fafc;padding:20px 32px}
header h1{margin:0;font-size:24px;font-weight:600;word-break:break-all}
header .sub{margin:4px 0 0;color:#cbd5e1;font-size:13px}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:16px 20px;margin:16px 0;box-shadow:0 1px 2px rgba(15,23,42,.04)}
h2{margin:0 0 12px;font-size:18px}
h3{margin:0;font-size:16px}
h4{margin:12px 0 8px;font-size:14px;color:var(--muted);text-transform:uppercase;
letter-spacing:.04em}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:500;width:200px}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600}
.b-heur{background:#fef3c7;color:#92400e}.b-model{background:#dcfce7;color:#166534}
.b-synth{background:#fee2e2;color:#991b1b}
.banner{border-radius:8px;padding:10px 14px;margin:12px 0 0;font-size:14px}
.banner.synth{background:#fee2e2;color:#7f1d1d}.banner.heur{background:#fef3c7;color:#78350f}
.chips span{display:inline-block;background:#eef2ff;color:#3730a3;border-radius:6px;
padding:2px 8px;margin:0 6px 6px 0;font-size:13px}
.empty li{color:#9a3412}
.overview figure{margin:0}
.overview svg{width:100%;height:auto;max-height:80vh;display:block;background:#fff;
border:1px solid var(--line);border-radius:6px}
.overview .heat{image-rendering:pixelated}
#show-heat:not(:checked)~figure .heat,#show-tissue:not(:checked)~figure .tissue,
#show-artefacts:not(:checked)~figure .artefacts,
#show-win:not(:checked)~figure .wins{display:none}
.toggles{font-size:13px;color:var(--muted);margin-right:14px}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:13px;color:var(--muted);margin-top:8px}
.swatch{display:inline-block;width:14px;height:14px;border-radius:3px;vertical-align:-2px;
margin-right:5px;border:2px solid currentColor}
.ramp{display:inline-block;width:120px;height:12px;border-radius:3px;vertical-align:-1px;
background:linear-gradient(90deg,#313695,#74add1,#fee090,#f46d43,#a50026)}
.region{border-left:6px solid var(--c)}
.region-head{display:flex;align-items:baseline;gap:12px;flex-wrap:wrap}
.region-head .score{color:var(--muted)}
.region-body{display:grid;grid-template-columns:minmax(220px,360px) 1fr;gap:20px;margin-top:10px}
.crop img{width:100%;border-radius:6px;border:1px solid var(--line);display:block}
.cropwrap{position:relative}
.scalebar{position:absolute;right:10px;bottom:10px;height:5px;background:#111;
border:1px solid #fff;box-sizing:content-box}
.scalebar span{position:absolute;right:0;bottom:8px;font-size:12px;font-weight:700;color:#111;
text-shadow:0 0 3px #fff,0 0 3px #fff;white-space:nowrap}
.crop figcaption,.muted{color:var(--muted);font-size:13px}
.matches ol{list-style:none;padding:0;margin:0}
.match{display:grid;grid-template-columns:140px 1fr;gap:12px;padding:10px 0;
border-top:1px solid var(--line)}
.match img{width:140px;border-radius:4px;border:1px solid var(--line)}
.match .noimg{width:140px;height:100px;border-radius:4px;background:#f1f5f9;color:var(--muted);
font-size:12px;display:flex;align-items:center;justify-content:center;text-align:center;
padding:6px;overflow:hidden;overflow-wrap:anywhere;word-break:break-all}
.noimg{overflow:hidden;overflow-wrap:anywhere}
.pct{font-size:12px;color:var(--muted)}
.match-head{display:flex;gap:10px;flex-wrap:wrap;align-items:baseline}
.flabel{font-weight:600}.sim{color:var(--accent);font-weight:600}
.caption{margin:4px 0;white-space:pre-wrap}
.source{margin:0;color:var(--muted);font-size:13px}
.level{font-size:12px;padding:1px 8px;border-radius:999px;background:#e2e8f0}
.level-1,.level-2,.level-3{background:#dcfce7;color:#166534}
.level-4,.level-5,.level-6{background:#e0f2fe;color:#075985}
.level-7,.level-8{background:#f3e8ff;color:#6b21a8}
.level-unknown{background:#f1f5f9;color:#475569}
footer{text-align:center;color:var(--muted);font-size:12px;padding:24px}
@media (max-width:800px){.grid2,.region-body{grid-template-columns:1fr}}
"""


def _kv_table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _slide_section(ev: Mapping[str, Any]) -> str:
    s = ev.get("slide") or {}
    size = (f"{_num(s.get('width'), 'd')} × {_num(s.get('height'), 'd')} px"
            if isinstance(s.get("width"), int) and isinstance(s.get("height"), int)
            else "—")
    rows = [("name", _e(s.get("name"))), ("path", _e(s.get("path"))), ("size (level 0)", size),
            ("resolution", f"{_num(s.get('mpp'), '.4g')} µm/px "
                           f"<span class='muted'>(source: {_e(s.get('mpp_source'))})</span>"),
            ("reader", f"{_e(s.get('backend'))} · vendor {_e(s.get('vendor'))}")]
    return f'<section id="slide"><h2>Slide</h2>{_kv_table(rows)}</section>'


def _models_section(ev: Mapping[str, Any]) -> tuple[str, bool]:
    models = ev.get("models") or {}
    rows = []
    any_heur = False
    for role, m in models.items():
        m = m if isinstance(m, Mapping) else {"name": m}
        heur = bool(m.get("heuristic"))
        any_heur |= heur
        badge = ('<span class="badge b-heur">heuristic (no trained weights)</span>' if heur
                 else '<span class="badge b-model">model</span>')
        rows.append(f"<tr><th>{_e(role.replace('_', ' '))}</th><td><b>{_e(m.get('name'))}</b> "
                    f"{badge}<br><span class='muted'>{_e(m.get('label'))}</span></td></tr>")
    if not rows:
        rows.append("<tr><td class='muted'>no model information recorded</td></tr>")
    idx = ev.get("index")
    if isinstance(idx, Mapping):
        rows.append(f"<tr><th>figure index</th><td>{_e(idx.get('path'))} "
                    f"<span class='muted'>({_e(idx.get('kind'))}, {_e(idx.get('count'))} "
                    f"figures, encoder {_e(idx.get('encoder'))}, dim {_e(idx.get('dim'))})"
                    "</span></td></tr>")
        bg = idx.get("background")
        if isinstance(bg, Mapping):
            rows.append(
                "<tr><th>similarity</th><td>cosine similarity of "
                f"{_e(idx.get('encoder'))} embeddings, calibrated against "
                f"{_e(bg.get('pairs'))} {_e(bg.get('method'))}: median "
                f"{_num(bg.get('p50'))}, 95th percentile {_num(bg.get('p95'))}, 99th "
                f"{_num(bg.get('p99'))}<br><span class='muted'>floor: "
                f"{_e(_floor_text(ev))}; weaker matches are not shown</span></td></tr>")
    else:
        rows.append("<tr><th>figure index</th><td class='muted'>none (no literature matching)"
                    "</td></tr>")
    return (f'<section id="models"><h2>Models and heuristics</h2><table>{"".join(rows)}'
            "</table></section>", any_heur)


def _selection_section(ev: Mapping[str, Any]) -> str:
    sel = ev.get("selection") or {}
    def chip(k: str, v: Any) -> str:
        if k == "min_similarity":
            return _floor_text(ev)
        if isinstance(v, Mapping):   # e.g. fusion: "method rrf, k 60, channels image + text"
            return ", ".join(f"{kk} {chip(str(kk), vv)}" for kk, vv in v.items())
        if isinstance(v, (list, tuple)):
            return " + ".join(str(chip(k, x)) for x in v)
        return _num(v, ".4g") if isinstance(v, float) else v  # 0.4653, not 17 digits

    # a similarity floor means nothing without an index: no "min_similarity = threshold"
    chips = "".join(f"<span>{_e(k)} = {_e(chip(k, v))}</span>" for k, v in sel.items()
                    if k not in ("warnings", "question_steering") and v is not None
                    and not (k == "min_similarity" and not isinstance(v, Mapping)))
    notes = [str(w) for w in sel.get("warnings") or []]
    warn_html = "".join(f'<p class="banner heur"><b>Warning.</b> {_e(w)}</p>' for w in notes)
    empty = ev.get("empty_scales") or {}
    items = "".join(f"<li><b>{_e(k)}×{_e(k)}</b>: {_e(v)}</li>" for k, v in empty.items())
    empty_html = (f'<h4>Scales without a window</h4><ul class="empty">{items}</ul>' if items
                  else "")
    return (f'<section id="selection"><h2>Selection</h2>{warn_html}'
            f'<div class="chips">{chips}</div>{_selection_text(sel)}{empty_html}</section>')


def question_text(steering: Mapping[str, Any]) -> str:
    """One sentence on how a question chose the regions (``selection.question_steering``), or
    why it did not."""
    q = steering.get("question")
    if not steering.get("applied"):
        return f"Question “{q}”: {steering.get('why', 'it ranks the figures only')}."
    towers = ", ".join(str(t) for t in steering.get("towers") or ())
    text = (f"Regions chosen for the question “{q}”: each patch's similarity to it under "
            f"{towers}, blended with the importance by rule {steering.get('rule')} "
            f"({steering.get('rule_text')}), question weight w = {steering.get('weight')}; "
            "each region lists its mean importance and similarity ranks.")
    if steering.get("random_weights"):
        text += (" A tower has random weights (a test of the mechanics): its similarity "
                 "means nothing.")
    return text


#: One sentence per layout and for the floor (the report explains what the numbers mean).
LAYOUT_TEXT = {
    "nested": "Layout nested: a finer window may lie wholly inside a coarser one (a zoom "
              "chain into the most salient region); any other two windows keep an "
              "edge-to-edge gap of at least the margin.",
    "disjoint": "Layout disjoint: every two windows keep an edge-to-edge gap of at least the "
                "margin, so they show separate places.",
}


def _selection_text(sel: Mapping[str, Any]) -> str:
    parts = []
    if sel.get("layout") in LAYOUT_TEXT:
        parts.append(LAYOUT_TEXT[str(sel["layout"])])
    floor = sel.get("min_score_value")
    if floor is not None:
        what = ("the median patch-cell score of this slide, so every region is more salient "
                "than half of the tissue" if sel.get("min_score") == "median"
                else "an absolute floor")
        parts.append(f"Floor: every region scores at least {_num(floor)} ({what}).")
    elif "min_score" in sel:
        parts.append("Floor: none (min_score 0).")
    steering = sel.get("question_steering")
    if isinstance(steering, Mapping):
        parts.append(question_text(steering))
    return "".join(f"<p class='muted'>{_e(p)}</p>" for p in parts)


def _overview_section(ev: Mapping[str, Any], thumb: np.ndarray, ds: float,
                      amap: AttentionMap | None, geojson: Mapping[str, Any] | None,
                      artefacts: Mapping[str, Any] | None = None) -> str:
    th, tw = thumb.shape[:2]
    parts = [f'<image href="{_data_uri(thumb, max_px=THUMB_MAX_PX)}" x="0" y="0" '
             f'width="{tw}" height="{th}" preserveAspectRatio="none"/>']
    if amap is not None:
        x, y, w, h = (v / ds for v in amap.l0_box())
        heat = _data_uri(heatmap_rgba(amap, alpha=0.55), fmt="PNG")
        parts.append(f'<image class="heat" href="{heat}" x="{x:.2f}" y="{y:.2f}" '
                     f'width="{w:.2f}" height="{h:.2f}" preserveAspectRatio="none"/>')
    rings = tissue_rings(geojson)
    sw = max(tw, th) / 400
    if rings:
        d = " ".join("M" + " L".join(f"{px / ds:.1f},{py / ds:.1f}" for px, py in r) + " Z"
                     for r in rings)
        parts.append(f'<path class="tissue" d="{d}" fill="none" stroke="#1e293b" '
                     f'stroke-dasharray="{sw * 3:.2f} {sw * 2:.2f}" stroke-width="{sw:.2f}" '
                     'fill-rule="evenodd"/>')
    kinds = artefact_rings(artefacts)
    for kind, (name, colour, krings) in kinds.items():
        d = " ".join("M" + " L".join(f"{px / ds:.1f},{py / ds:.1f}" for px, py in r) + " Z"
                     for r in krings)
        rgb = "#{:02x}{:02x}{:02x}".format(*colour)
        parts.append(f'<path class="artefacts" d="{d}" fill="{rgb}" fill-opacity="0.35" '
                     f'stroke="{rgb}" stroke-width="{sw:.2f}" fill-rule="evenodd">'
                     f'<title>{_e(name)} ({_e(kind)}): not used as tissue</title></path>')
    fs = max(tw, th) / 50
    wins, boxes, sizes, labels = [], [], [], []
    for i, r in enumerate(ev.get("regions") or []):
        try:
            b = r["box"]
            x, y, w, h = (float(b[k]) / ds for k in ("x", "y", "width", "height"))
            scale, score = int(r["scale"]), float(r["score"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"evidence region {i} needs scale, score and box "
                              f"{{x, y, width, height}}: {exc}") from exc
        rid = r.get("id", f"r{i + 1}")
        label = f"{rid} · {scale}×{scale} · {score:.2f}"
        boxes.append((x, y, x + w, y + h))
        sizes.append((0.62 * fs * len(label), 1.15 * fs))  # bold sans-serif, approximate
        labels.append((label, scale, (x, y, w, h)))
    spots = place_labels(boxes, sizes, bounds=(tw, th), pad=sw)
    # coarse first: zooms on top
    drawn = sorted(zip(labels, spots, strict=True), key=lambda t: -t[0][1])
    for (label, scale, (x, y, w, h)), (lx, ly) in drawn:
        c = scale_colour(scale)
        wins.append(
            f'<g><title>{_e(label)}</title><rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" '
            f'height="{h:.2f}" fill="none" stroke="{c}" stroke-width="{sw * 1.6:.2f}"/>'
            f'<text x="{lx:.2f}" y="{ly + 0.9 * fs:.2f}" font-size="{fs:.1f}" fill="{c}" '
            f'stroke="#fff" stroke-width="{fs / 6:.2f}" paint-order="stroke" '
            f'font-weight="700" font-family="system-ui,sans-serif">{_e(label)}</text></g>')
    parts.append(f'<g class="wins">{"".join(wins)}</g>')
    scales = sorted({int(r["scale"]) for r in ev.get("regions") or []}, reverse=True)
    legend = "".join(f'<span style="color:{scale_colour(s)}"><span class="swatch"></span>'
                     f"{_e(_scale_text(s, ev))}</span>" for s in scales)
    if amap is not None:
        legend += '<span>attention: low <span class="ramp"></span> high</span>'
    if rings:
        legend += ('<span style="color:#1e293b"><span class="swatch" '
                   'style="border-style:dashed"></span>tissue outline</span>')
    for name, colour, _ in kinds.values():
        rgb = "#{:02x}{:02x}{:02x}".format(*colour)
        legend += (f'<span style="color:{rgb}"><span class="swatch"></span>{_e(name)} '
                   "(not tissue)</span>")
    toggles = ""
    for key, label, present in (("heat", "heatmap", amap is not None),
                                ("tissue", "tissue outline", bool(rings)),
                                ("artefacts", "artefacts", bool(kinds)),
                                ("win", "windows", True)):
        if present:
            toggles += (f'<input type="checkbox" id="show-{key}" checked>'
                        f'<label class="toggles" for="show-{key}">{label}</label>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {tw} {th}" role="img" '
           f'aria-label="slide overview">{"".join(parts)}</svg>')
    return (f'<section id="overview" class="overview"><h2>Overview</h2>{toggles}'
            f'<figure>{svg}</figure><div class="legend">{legend}</div></section>')


def _match_html(m: Mapping[str, Any], base_dir: Path) -> str:
    uri, problem = _load_image(m.get("image_path"), base_dir, FIGURE_MAX_PX,
                               m.get("image_abspath"))
    img = (f'<img src="{uri}" alt="{_e(m.get("figure_label"))}">' if uri
           else f'<div class="noimg">{_e(problem)}</div>')
    level, level_cls = _level(m)
    src = [f"<i>{_e(m.get('source_title'))}</i>"]
    if m.get("year") is not None:
        src.append(_e(m.get("year")))
    if m.get("page") is not None:
        src.append(f"p. {_e(m.get('page'))}")
    if m.get("doi"):
        src.append(_doi_link(m.get("doi")))
    if m.get("license"):
        src.append(f"licence {_e(m.get('license'))}")
    return (f'<li class="match">{img}<div><div class="match-head">'
            f'<span class="flabel">{_e(m.get("figure_label"))}'
            f'{", panel " + _e(m.get("panel")) if m.get("panel") else ""}</span>'
            f'<span class="sim">similarity {_num(m.get("similarity"))}</span>'
            f'{_percentile(m.get("percentile"))}'
            f'<span class="level {level_cls}">evidence: {_e(level)}</span></div>'
            f'<p class="caption">{_e(m.get("caption"))}</p>'
            f'<p class="source">{" · ".join(src)}</p></div></li>')


def _scale_text(scale: int, ev: Mapping[str, Any]) -> str:
    """A window's size as a pathologist reads it: patches (a "cell" is a nucleus to them) and
    its side in µm, from the run's patch size and resolution.

    >>> _scale_text(2, {"selection": {"patch_px": 256, "target_mpp": 0.5}})
    '2×2 patches, 256 µm'
    >>> _scale_text(1, {})
    '1 patch'
    """
    sel = ev.get("selection") or {}
    try:
        side = float(scale) * float(sel["patch_px"]) * float(sel["target_mpp"])
    except (KeyError, TypeError, ValueError):
        side = math.nan
    size = "1 patch" if scale == 1 else f"{scale}×{scale} patches"
    return f"{size}, {side:.0f} µm" if math.isfinite(side) and side > 0 else size


def _scale_bar(crop: Mapping[str, Any]) -> str:
    """A scale bar over a crop (an overlay: the crop's pixels, which the crop encoder sees,
    are never drawn on): the round length nearest a quarter of the crop's width."""
    try:
        width_um = float(crop["mpp"]) * float(crop["width"])
    except (KeyError, TypeError, ValueError):
        return ""
    if not (math.isfinite(width_um) and width_um > 0):
        return ""
    bar = min((v for v in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)),
              key=lambda v: abs(math.log(v / (width_um / 4))))
    pct = 100.0 * bar / width_um
    label = f"{bar // 1000} mm" if bar >= 1000 else f"{bar} µm"
    return (f'<div class="scalebar" style="width:{pct:.2f}%" title="scale bar">'
            f"<span>{label}</span></div>")


def _regions_section(ev: Mapping[str, Any], base_dir: Path) -> str:
    regions = ev.get("regions") or []
    has_index = isinstance(ev.get("index"), Mapping)
    attention = (ev.get("models") or {}).get("attention") or {}
    # what a region's score is: TITAN attention, or the weight-free nuclear importance
    score_name = "importance score" if attention.get("heuristic") else "attention score"
    cards = []
    for i, r in enumerate(regions):
        scale = int(r["scale"])
        rid = r.get("id", f"r{i + 1}")
        b = r.get("box") or {}
        crop = r.get("crop") or {}
        uri, problem = _load_image(crop.get("path"), base_dir, CROP_MAX_PX, crop.get("abspath"))
        crop_img = (f'<div class="cropwrap"><img src="{uri}" alt="crop of region {_e(rid)}">'
                    f"{_scale_bar(crop)}</div>" if uri
                    else f'<div class="noimg muted">{_e(problem)}</div>')
        crop_cap = (f"level-0 box x={_e(b.get('x'))}, y={_e(b.get('y'))}, "
                    f"{_e(b.get('width'))}×{_e(b.get('height'))} px")
        if crop:
            crop_cap += (f"<br>crop {_e(crop.get('width'))}×{_e(crop.get('height'))} px at "
                         f"{_num(crop.get('mpp'), '.3g')} µm/px")
        if isinstance(r.get("usable_tissue"), (int, float)):
            crop_cap += (f"<br>usable tissue {100 * float(r['usable_tissue']):.0f} % (no ink, "
                         "folds, debris or glass)")
        matches = r.get("matches") or []
        below = r.get("below_floor")
        if matches:
            hidden = (f"<p class='muted' style='margin:0 0 6px'>{_e(below)} weaker "
                      f"candidate(s) below the floor ({_e(_floor_text(ev))}) not shown</p>"
                      if below else "")
            body = (f"<h4>Matched figures ({len(matches)})</h4>{hidden}<ol>"
                    + "".join(_match_html(m, base_dir) for m in matches) + "</ol>")
        elif has_index:
            body = ("<h4>Matched figures</h4><p class='muted'>no figure passed the similarity "
                    f"floor ({_e(_floor_text(ev))})"
                    + (f"; {_e(below)} candidate(s) below it" if below else "") + "</p>")
        else:
            body = ("<h4>Matched figures</h4><p class='muted'>no figure index was given "
                    "(pass an index to match literature figures)</p>")
        zoom = (f' · inside <a href="#region-{_e(r["inside"])}">{_e(r["inside"])}</a>'
                if r.get("inside") else "")
        rank = f"rank {_e(r['rank'])} · " if r.get("rank") is not None else ""
        cards.append(
            f'<section class="region" id="region-{_e(rid)}" style="--c:{scale_colour(scale)}">'
            f'<div class="region-head"><h3>{_e(rid)} · {_e(_scale_text(scale, ev))}</h3>'
            f'<span class="score">{rank}{score_name} {_num(r.get("score"))}{zoom}</span>'
            '</div>'
            f'<div class="region-body"><figure class="crop" style="margin:0">{crop_img}'
            f'<figcaption>{crop_cap}</figcaption></figure><div class="matches">{body}</div>'
            "</div></section>")
    if not cards:
        cards.append("<section><p class='muted'>No region was selected.</p></section>")
    return f'<div id="regions"><h2 style="margin:24px 0 0">Regions by rank ({len(regions)})</h2>' \
           f'{"".join(cards)}</div>'


def _document(evidence: EvidenceResult | Mapping[str, Any],
              base_dir: str | os.PathLike[str] | None) -> tuple[Mapping[str, Any], Path]:
    """The document a page shows and the folder its images resolve against: from the result
    object (its :attr:`~EvidenceResult.base_dir` unless ``base_dir`` is given), or from an
    evidence.json document as read (the working folder unless ``base_dir`` is given)."""
    if isinstance(evidence, EvidenceResult):
        base = base_dir if base_dir is not None else evidence.base_dir or "."
        return evidence.to_dict(), Path(base)
    if not isinstance(evidence, Mapping):
        raise ReportError("evidence must be an EvidenceResult or an evidence.json document "
                          f"(a dict), got {type(evidence).__name__}")
    return evidence, Path(base_dir if base_dir is not None else ".")


def render_report(evidence: EvidenceResult | Mapping[str, Any], *, thumbnail: np.ndarray,
                  thumbnail_downsample: float, tissue_geojson: Mapping[str, Any] | None = None,
                  attention: AttentionMap | tuple[Any, Any, int] | None = None,
                  base_dir: str | os.PathLike[str] | None = None,
                  artefacts_geojson: Mapping[str, Any] | None = None) -> str:
    """Render an evidence result as one self-contained HTML page.

    Parameters
    ----------
    evidence : EvidenceResult or dict
        The result (what :func:`wsikit.run.pipeline.select` returns, or
        :meth:`EvidenceResult.read` of an evidence.json), or a ``wsikit.evidence/v1``
        document as a dict (slide, models, selection, empty_scales, regions).
    thumbnail : ndarray, shape (h, w, 3), uint8
        Slide thumbnail.
    thumbnail_downsample : float
        Level-0 pixels per thumbnail pixel.
    tissue_geojson : dict, optional
        Tissue polygons in level-0 pixels (drawn as an outline).
    attention : AttentionMap or (scores (N,), coords (N, 2), patch_size_l0), optional
        Per-patch attention, drawn as a heatmap (one colour per grid cell).
    base_dir : path, optional
        Folder that relative crop and figure image paths are resolved against (the folder of
        ``evidence.json``); default: the result's :attr:`~EvidenceResult.base_dir`, or the
        working folder for a dict.
    artefacts_geojson : dict, optional
        Artefacts removed from the tissue (:meth:`wsikit.tissue.mask.TissueMask.artefacts_geojson`:
        ink, folds, debris, scanner fill), drawn filled, one colour per kind.

    Returns
    -------
    str
        The HTML document. Images are inlined (base64); all input text is HTML-escaped.

    Raises
    ------
    ReportError
        Malformed thumbnail, attention, tissue GeoJSON or evidence regions.
    """
    evidence, base = _document(evidence, base_dir)
    thumb = as_rgb_thumbnail(thumbnail)
    if not (isinstance(thumbnail_downsample, (int, float, np.number))
            and not isinstance(thumbnail_downsample, bool) and thumbnail_downsample > 0):
        raise ReportError(f"thumbnail_downsample must be > 0, got {thumbnail_downsample!r}")
    ds = float(thumbnail_downsample)
    amap = as_attention_map(attention)
    slide = evidence.get("slide") or {}
    name = slide.get("name") or "slide"
    models_html, any_heur = _models_section(evidence)
    banners = ""
    if evidence.get("synthetic"):
        banners += ('<p class="banner synth"><b>Synthetic data.</b> This slide or its evidence '
                    "was generated for testing; it is not a real case.</p>")
    if any_heur:
        banners += ('<p class="banner heur"><b>Heuristic scores.</b> Some numbers below come '
                    "from weight-free heuristics, not trained models (see Models).</p>")
    synth_badge = ' <span class="badge b-synth">synthetic</span>' if evidence.get("synthetic") \
        else ""
    sub = (f"wsikit {_e(evidence.get('wsikit_version', __version__))} · "
           f"{_e(evidence.get('schema'))} · created {_e(evidence.get('created'))}")
    body = "".join([
        banners,
        '<div class="grid2">', _slide_section(evidence), _selection_section(evidence), "</div>",
        models_html,
        _overview_section(evidence, thumb, ds, amap, tissue_geojson, artefacts_geojson),
        _regions_section(evidence, base),
    ])
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>wsikit report · {_e(name)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_e(name)}{synth_badge}</h1><p class=\"sub\">{sub}</p></header>"
            f"<main>{body}</main><footer>Generated by wsikit {_e(__version__)}. Regions are "
            "candidates for review, not a diagnosis.</footer></body></html>\n")


def write_report(path: str | os.PathLike[str],
                 evidence: EvidenceResult | Mapping[str, Any], *,
                 thumbnail: np.ndarray, thumbnail_downsample: float,
                 tissue_geojson: Mapping[str, Any] | None = None,
                 attention: AttentionMap | tuple[Any, Any, int] | None = None,
                 base_dir: str | os.PathLike[str] | None = None,
                 artefacts_geojson: Mapping[str, Any] | None = None) -> Path:
    """Render the report and write it atomically to ``path`` (``base_dir`` defaults to its
    folder). Returns the path."""
    path = Path(path)
    text = render_report(evidence, thumbnail=thumbnail, thumbnail_downsample=thumbnail_downsample,
                         tissue_geojson=tissue_geojson, attention=attention,
                         base_dir=path.parent if base_dir is None else base_dir,
                         artefacts_geojson=artefacts_geojson)
    return write_bytes_atomic(path, text.encode("utf-8"))


def render_overview_png(path: str | os.PathLike[str],
                        evidence: EvidenceResult | Mapping[str, Any], *,
                        thumbnail: np.ndarray, thumbnail_downsample: float,
                        tissue_geojson: Mapping[str, Any] | None = None,
                        attention: AttentionMap | tuple[Any, Any, int] | None = None,
                        artefacts_geojson: Mapping[str, Any] | None = None) -> Path:
    """Write a PNG overview (thumbnail + heatmap + tissue outline + artefacts + windows)
    atomically.

    See :func:`wsikit.look.overlay.overview_image` for the drawing; returns the path.
    """
    regions = (list(evidence.regions) if isinstance(evidence, EvidenceResult)
               else list(evidence.get("regions") or []))
    img = overview_image(thumbnail, thumbnail_downsample, regions=regions,
                         attention=attention, tissue_geojson=tissue_geojson,
                         artefacts_geojson=artefacts_geojson)
    with atomic_path(path) as tmp:
        Image.fromarray(img).save(tmp, format="PNG", optimize=True)
    return Path(path)
