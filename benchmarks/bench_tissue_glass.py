"""Tissue kept and glass taken, on real pixels: the tissue mask against the slide's own glass.

The scenes of ``tests/tissue/test_tissue_glass.py`` (pale loose stroma, dense tumour and pale
mucin pasted with gaps onto the real glass of CMU-1-Small-Region.svs and of small.svs; a field
covered by pale stroma and mucin with no glass), plus real TCGA tiles as slides by themselves
(tissue from edge to edge, or blank glass with a coverslip line) and the real
CMU-1-Small-Region slide, each written as a slide and segmented the way a user runs it
(``segment_tissue``). Recorded per scene: the tissue fraction inside each piece (truth: all
tissue), and the tissue fraction of the glass more than 48 µm from any piece (truth: none).

``--compare DIR`` runs the same scenes with the wsikit of another checkout (e.g. the main
branch, before the change) in a subprocess, side by side in one table.

Run: ``python benchmarks/bench_tissue_glass.py [--compare /path/to/other/checkout]`` (about a
minute). Writes ``benchmarks/results/bench_tissue_glass.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "tissue"))
os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")

import test_tissue_glass as scenes  # noqa: E402  (the scenes of the test, one definition)

#: Real TCGA tiles (1 µm/px) that are tissue from edge to edge, and blank ones.
ALL_TISSUE = ["medium-nuclei-score-level1-2", "high-nuclei-score-red-pen-level1"]
BLANK = ["no-tissue-line", "almost-white-1"]


def measure() -> dict[str, float]:
    """Scene -> measured fraction, with the wsikit on ``sys.path``."""
    import wsikit
    from wsikit.slide import open_slide
    from wsikit.tissue.mask import segment_tissue

    out: dict[str, float] = {"_wsikit": str(Path(wsikit.__file__).parent)}  # type: ignore[dict-item]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for which in ("cmu", "small"):
            img, boxes = scenes.scene(which)
            tm = scenes.segment(img, scenes.PX_UM, t)
            for name, box in boxes.items():
                out[f"{name} on {which} glass: tissue"] = scenes.box_fraction(
                    tm.mask, box, img.shape[:2])
            out[f"{which} glass around the pieces: tissue"] = scenes.glass_fraction(
                tm, boxes, img.shape[:2])
        out["field of pale stroma and mucin, no glass: tissue"] = float(
            scenes.segment(scenes.field(), scenes.PX_UM, t).mask.mean())
        for name in ALL_TISSUE:
            out[f"{name} alone (all tissue): tissue"] = float(
                scenes.segment(scenes.tile(name), 1.0, t).mask.mean())
        for name in BLANK:
            tile = scenes.tile(name)
            img = scenes.on_glass((tile.shape[0] + 256, tile.shape[1] + 256), "cmu")
            img[128:-128, 128:-128] = tile
            out[f"{name} on cmu glass (no tissue): tissue"] = float(
                scenes.segment(img, 1.0, t).mask.mean())
        with open_slide(scenes.DATA / "CMU-1-Small-Region.svs") as slide:
            out["CMU-1-Small-Region slide: tissue"] = segment_tissue(slide).tissue_fraction
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", type=Path, help="another checkout to run side by side")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    now = measure()
    if args.json:
        print(json.dumps(now))
        return
    other: dict[str, float] = {}
    if args.compare is not None:
        env = {**os.environ, "PYTHONPATH": str(args.compare.resolve())}
        res = subprocess.run([sys.executable, __file__, "--json"], env=env, check=True,
                             capture_output=True, text=True)
        other = json.loads(res.stdout.strip().splitlines()[-1])
    rows = ["| scene | truth | " + ("compared checkout | " if other else "") + "this checkout |",
            "|---|---|" + ("---|" if other else "") + "---|"]
    for key, value in now.items():
        if key.startswith("_"):
            continue
        truth = ("–" if "slide" in key else
                 "0" if ("glass" in key and "around" in key) or "no tissue" in key else "1")
        cells = [key, truth] + ([f"{other[key]:.3f}"] if other else []) + [f"{value:.3f}"]
        rows.append("| " + " | ".join(cells) + " |")
    text = ("# Tissue against the slide's own glass (real pixels)\n\n"
            "`python benchmarks/bench_tissue_glass.py"
            + (" --compare <main checkout>" if other else "") + "`: the scenes of "
            "`tests/tissue/test_tissue_glass.py` and real tiles and slides, segmented as a user "
            "runs it. Fractions of the mask pixels that are tissue (truth: 1 inside each piece of "
            "tissue, 0 on glass).\n\n"
            + (f"Compared checkout: `{other.get('_wsikit')}` (the saturation rule); this "
               f"checkout: `{now['_wsikit']}`.\n\n" if other else "")
            + "\n".join(rows) + "\n")
    out = HERE / "results" / "bench_tissue_glass.md"
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
