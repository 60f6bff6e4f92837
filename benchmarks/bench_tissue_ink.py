"""Ink and folds on real pixels: what the tissue mask flags, and what it keeps.

Every real TCGA tile of ``tests/data/real_tiles`` alone as a slide (level-1 tiles at 1 µm/px,
level-2 tiles at 4, the ``tcga-green-pen`` thumbnail at 2, as the tests take them), the glass
scenes of ``tests/tissue/test_tissue_glass.py`` (pale stroma, dense tumour and three pale
mucins on the real glass of CMU-1-Small-Region and of small.svs), the mosaic of tiles of
``tests/tissue/test_real_tissue.py`` and the two real slides, each segmented the way a user
runs it (``segment_tissue``). Recorded per input, on the mask's own grid:

* ``tissue``, ``ink``, ``fold``: fractions of the mask flagged as each;
* ``ink found``: of the ink present, the share flagged ink. Ink present is the hand-drawn truth
  on the red-pen tile (``high-nuclei-score-red-pen-level1.truth.json``, with its fold), and a
  colour rule elsewhere, a proxy named in the table (pen on glass: every pixel darker than the
  glass; green pen: OD with red absorbed more than green; red pen over fat: the red rule);
* ``clean kept``: tissue of the clean part of the red-pen tile; on all-tissue tiles the
  tissue fraction (issue 40 item 12: pale stroma and mucin kept, no glass taken);
* on the glass scenes, each piece's tissue and ink fractions and the glass taken.

``--compare DIR`` runs the same inputs with the wsikit of another checkout (e.g. the main
branch, before the change) in a subprocess, side by side; ``--png DIR`` writes an overlay per
input (tissue outlined green, ink filled red, fold filled blue, the hand truth outlined yellow;
before and after side by side with ``--compare``) to look at.

Run: ``python benchmarks/bench_tissue_ink.py [--compare /work/main] [--png /tmp/ink]`` (about
two minutes). Writes ``benchmarks/results/bench_tissue_ink.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "tissue"))
os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")

import conftest as truth  # noqa: E402  (the hand-drawn truth, one definition)
import test_tissue_glass as scenes  # noqa: E402

TILES = HERE.parent / "tests" / "data" / "real_tiles"
SLIDES = HERE.parent / "tests" / "data"
RED_PEN = "high-nuclei-score-red-pen-level1"
#: Tile -> (µm/px, what is known of it: the README of the fixtures).
TILE_SET = {
    "almost-white-1": (1.0, "glass only"),
    "no-tissue-line": (1.0, "glass and a coverslip line"),
    "no-tissue-green-pen": (1.0, "green pen on glass"),
    "no-tissue-red-pen": (1.0, "red and black pen on glass"),
    RED_PEN: (1.0, "dense tumour, red smear and a narrow fold"),
    "medium-nuclei-score-green-pen-level1": (1.0, "tumour and fat under green marker"),
    "very-low-nuclei-score-red-pen-level1": (1.0, "fat under red pen"),
    "tcga-green-pen": (2.0, "tumour and stroma, a green marker stroke"),
    "medium-nuclei-score-level1-2": (1.0, "tumour (all tissue)"),
    "medium-nuclei-score-level1": (1.0, "muscle and loose stroma (all tissue)"),
    "low-nuclei-score-level1": (1.0, "fat"),
    "high-nuclei-score-level2": (4.0, "tumour edge on glass"),
    "medium-nuclei-score-level2": (4.0, "tumour and haemorrhage, glass corner"),
    "tissue-level2-1784-6289-5880-10386": (4.0, "loose stroma, vessels, clots"),
    "tissue-level2-4640-4649-8736-8746": (4.0, "loose stroma, vessels, clots"),
}
ALL_TISSUE = {"medium-nuclei-score-level1-2", "medium-nuclei-score-level1", RED_PEN}


def _rgb(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(TILES / f"{name}.png") as im:
        return np.asarray(im.convert("RGB"))


def _on(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A full-resolution bool mask on a coarser grid ``shape`` (cells at least half set)."""
    from PIL import Image

    m = Image.fromarray(mask.astype(np.uint8) * 255)
    return np.asarray(m.resize(shape[::-1], Image.BOX)) >= 128


#: The tile mosaic of ``tests/tissue/test_real_tissue.py`` and ``bench_saliency.py``.
LAYOUT = [["medium-nuclei-score-level1-2", RED_PEN, "medium-nuclei-score-level1",
           "low-nuclei-score-level1"],
          ["very-low-nuclei-score-red-pen-level1", "medium-nuclei-score-green-pen-level1",
           "almost-white-1", "no-tissue-green-pen"],
          ["no-tissue-red-pen", "no-tissue-line", "medium-nuclei-score-level1-2",
           "medium-nuclei-score-level1"]]


def _mosaic() -> np.ndarray:
    from wsikit.slide.synthetic import tile_mosaic

    return tile_mosaic([[_rgb(n) for n in row] for row in LAYOUT])


def _ink_present(name: str, img: np.ndarray) -> tuple[np.ndarray | None, str]:
    """The ink a tile holds (full resolution) and how it was found."""
    from scipy import ndimage as ndi

    od = -np.log10(np.maximum(img.astype(np.float64), 1.0) / 255.0)
    od = np.stack([ndi.uniform_filter(od[..., c], 5) for c in range(3)], -1)
    total = od.sum(-1)
    if name == RED_PEN:
        return truth.truth_masks()["ink"], "hand-drawn truth"
    if name.startswith("no-tissue-") and "pen" in name:
        return total > 0.15, "darker than glass (OD > 0.15)"
    if "green-pen" in name:
        return (total > 0.15) & (od[..., 0] - od[..., 1] > 0.15 * total), "green: fR - fG > 0.15"
    if "red-pen" in name:
        return (total > 0.3) & (od[..., 0] < 0.12 * total), "red: fR < 0.12, OD > 0.3"
    return None, "none"


def measure(png_dir: Path | None) -> dict:
    """Input -> numbers, with the wsikit on ``sys.path``; masks saved under ``png_dir``."""
    import wsikit
    from wsikit.slide import open_slide
    from wsikit.tissue.mask import segment_tissue

    out: dict = {"_wsikit": str(Path(wsikit.__file__).parent)}

    def save(key: str, tm) -> None:
        if png_dir is not None:
            np.savez_compressed(png_dir / f"{key}.npz", mask=tm.mask,
                                **{k: np.asarray(v, bool) for k, v in tm.artefacts.items()})

    def fractions(tm) -> dict:
        a = tm.artefacts
        return {"tissue": float(tm.mask.mean()), "ink": float(np.mean(a.get("ink", 0))),
                "fold": float(np.mean(a.get("fold", 0)))}

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for name, (mpp, _what) in TILE_SET.items():
            img = _rgb(name)
            tm = scenes.segment(img, mpp, t)
            save(f"tile-{name}", tm)
            row = fractions(tm)
            present, _how = _ink_present(name, img)
            shape = tm.mask.shape
            if present is not None:
                p = _on(present, shape)
                row["ink_found"] = float(tm.artefacts["ink"][p].mean()) if p.any() else None
                row["ink_present"] = float(p.mean())
            if name == RED_PEN:
                t_fold = truth.truth_masks()["fold"]
                from scipy import ndimage as ndi

                clean = ~ndi.binary_dilation(truth.truth_masks()["ink"] | t_fold, iterations=16)
                row["fold_found"] = float(tm.artefacts["fold"][_on(t_fold, shape)].mean())
                row["clean_kept"] = float(tm.mask[_on(clean, shape)].mean())
                row["clean_flagged"] = float((tm.artefacts["ink"] | tm.artefacts["fold"])[
                    _on(clean, shape)].mean())
            out[f"tile {name}"] = row
        for which in ("cmu", "small"):
            img, boxes = scenes.scene(which)
            tm = scenes.segment(img, scenes.PX_UM, t)
            save(f"scene-{which}", tm)
            row = {"glass_taken": scenes.glass_fraction(tm, boxes, img.shape[:2])}
            for piece, box in boxes.items():
                row[f"{piece}: tissue"] = scenes.box_fraction(tm.mask, box, img.shape[:2])
                row[f"{piece}: ink"] = scenes.box_fraction(tm.artefacts["ink"], box,
                                                           img.shape[:2])
            out[f"scene {which}"] = row
        f = scenes.field()
        tm = scenes.segment(f, scenes.PX_UM, t)
        save("scene-field", tm)
        out["scene field"] = fractions(tm)
        mosaic = _mosaic()
        tm = scenes.segment(mosaic, 1.0, t)
        save("mosaic", tm)
        row = fractions(tm)
        k = 512 // (mosaic.shape[0] // tm.mask.shape[0])
        sub = (slice(0, k), slice(k, 2 * k))
        row["red-pen tile: ink found"] = float(tm.artefacts["ink"][sub][
            _on(truth.truth_masks()["ink"], (k, k))].mean())
        row["red-pen tile: fold found"] = float(tm.artefacts["fold"][sub][
            _on(truth.truth_masks()["fold"], (k, k))].mean())
        out["mosaic"] = row
        for slide in ("CMU-1-Small-Region", "small"):
            with open_slide(SLIDES / f"{slide}.svs") as s:
                tm = segment_tissue(s)
            save(f"slide-{slide}", tm)
            out[f"slide {slide}"] = fractions(tm)
    return out


def _overlay(img: np.ndarray, npz: Path, truth_masks: dict | None):
    from PIL import Image
    from scipy import ndimage as ndi

    d = np.load(npz)
    h, w = img.shape[:2]

    def up(m: np.ndarray) -> np.ndarray:
        return np.asarray(Image.fromarray(m.astype(np.uint8) * 255).resize(
            (w, h), Image.NEAREST)) > 0

    out = img.astype(np.float32).copy()
    for key, colour in (("ink", (255, 0, 0)), ("fold", (0, 60, 255))):
        if key in d and d[key].any():
            m = up(d[key])
            out[m] = 0.45 * out[m] + 0.55 * np.array(colour, np.float32)
    tissue = up(d["mask"])
    edge = tissue & ~ndi.binary_erosion(tissue, iterations=2)
    out[edge] = (0, 200, 0)
    if truth_masks:
        for m in truth_masks.values():
            e = m & ~ndi.binary_erosion(m, iterations=2)
            out[e] = (255, 230, 0)
    return Image.fromarray(out.astype(np.uint8))


def _pngs(png_dir: Path, before: Path | None, after: Path) -> None:
    from PIL import Image, ImageDraw

    def source(key: str) -> np.ndarray | None:
        if key.startswith("tile-"):
            return _rgb(key[5:])
        if key.startswith("scene-"):
            which = key[6:]
            return scenes.field() if which == "field" else scenes.scene(which)[0]
        return None

    for npz in sorted(after.glob("*.npz")):
        key = npz.stem
        img = source(key)
        if key == "mosaic":
            img = _mosaic()
        if img is None:
            d = np.load(npz)
            from wsikit.slide import open_slide
            with open_slide(SLIDES / f"{key[6:]}.svs") as s:
                img = s.read_at_mpp((0, 0, *s.dimensions), out_size=d["mask"].shape[::-1])
            img = np.asarray(img)[..., :3]
        tm = truth.truth_masks() if key == f"tile-{RED_PEN}" else None
        panels = [("after", _overlay(img, npz, tm))]
        if before is not None and (before / npz.name).exists():
            panels.insert(0, ("before", _overlay(img, before / npz.name, tm)))
        scale = max(1.0, 400 / max(img.shape[:2]))
        size = (int(img.shape[1] * scale), int(img.shape[0] * scale))
        sheet = Image.new("RGB", (len(panels) * (size[0] + 8), size[1] + 16), "white")
        for i, (label, p) in enumerate(panels):
            sheet.paste(p.resize(size, Image.NEAREST), (i * (size[0] + 8), 16))
            ImageDraw.Draw(sheet).text((i * (size[0] + 8) + 2, 2), f"{label}: {key}",
                                       fill=(0, 0, 0))
        sheet.save(png_dir / f"{key}.png")


def _fmt(v) -> str:
    return "–" if v is None else f"{100 * v:.1f} %" if isinstance(v, float) else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", type=Path, help="another checkout to run side by side")
    ap.add_argument("--png", type=Path, help="write overlays here")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--masks", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.masks)))
        return
    after_dir = before_dir = None
    if args.png is not None:
        after_dir, before_dir = args.png / "after", args.png / "before"
        for d in (after_dir, before_dir):
            d.mkdir(parents=True, exist_ok=True)
    now = measure(after_dir)
    other: dict = {}
    if args.compare is not None:
        env = {**os.environ, "PYTHONPATH": str(args.compare.resolve())}
        cmd = [sys.executable, __file__, "--json"]
        if before_dir is not None:
            cmd += ["--masks", str(before_dir)]
        res = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        other = json.loads(res.stdout.strip().splitlines()[-1])
    if args.png is not None:
        _pngs(args.png, before_dir if other else None, after_dir)
    head = "| input | measure | " + ("before | " if other else "") + "after |"
    rows = [head, "|---|---|" + ("---|" if other else "") + "---|"]
    for key, values in now.items():
        if key.startswith("_"):
            continue
        what = ""
        if key.startswith("tile "):
            name = key[5:]
            what = f" ({TILE_SET[name][1]}; ink present: {_ink_present(name, _rgb(name))[1]})"
        for m, v in values.items():
            cells = [key + what, m] + ([_fmt(other.get(key, {}).get(m))] if other else [])
            rows.append("| " + " | ".join(cells + [_fmt(v)]) + " |")
            what = ""
    text = ("# Ink and folds on real pixels\n\n"
            "`python benchmarks/bench_tissue_ink.py"
            + (" --compare <main checkout>" if other else "") + "`: real tiles alone as "
            "slides, the glass scenes of `tests/tissue/test_tissue_glass.py`, the tile mosaic and "
            "the two real slides, segmented as a user runs it. Fractions of mask pixels; `ink "
            "found`: share of the ink present flagged ink.\n\n"
            + (f"Before: `{other.get('_wsikit')}`; after: `{now['_wsikit']}`.\n\n" if other
               else "")
            + "\n".join(rows) + "\n")
    out = HERE / "results" / "bench_tissue_ink.md"
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
