"""Select the few regions of a slide that matter, from Python, and look at what came out.

    python examples/select_regions.py                     # a generated slide, a few seconds
    python examples/select_regions.py slide.svs --out results/

Without model weights wsikit runs its labelled weight-free heuristics (a colour-deconvolution
and texture embedding; nuclear density, crowding, size and darkness on the haematoxylin channel,
ranked per slide, as importance). The regions are
what those heuristics find, and every output says so: they are not CONCH/TITAN results.
"""

import argparse
import tempfile
from pathlib import Path

import wsikit
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("slide", nargs="?",
                    help="slide to read (default: a generated 2048x1536 slide at 0.5 µm/px "
                         "with a planted region of dense nuclei)")
parser.add_argument("--out", help="output folder (default: a new temporary folder)")
parser.add_argument("--mpp", type=float, help="level-0 µm/px, for slides without it")
parser.add_argument("--encoder", default="heuristic",
                    help="patch encoder: heuristic (no weights), auto or conch_v1_5")
args = parser.parse_args()

out = Path(args.out or tempfile.mkdtemp(prefix="wsikit-select-"))
out.mkdir(parents=True, exist_ok=True)
slide = args.slide
if slide is None:
    # A small synthetic slide: one tissue ellipse and a dense-nuclei patch at a known place.
    spec = SyntheticSpec(2048, 1536, mpp=0.5, dense=[(1100, 500, 600, 600)])
    slide = write_synthetic_slide(out / "synthetic.svs", spec, downsamples=(1, 4))

# One call runs tissue -> patches at exactly 0.5 µm/px -> features -> attention ->
# multi-scale windows (4x4, 2x2, 1x1 patches of 256 px) -> crops, and caches every stage
# under `out` (rerun it and only what changed is recomputed).
result = wsikit.select(slide, out=out, encoder=args.encoder, attention="heuristic",
                       patch_px=256, scales=(4, 2, 1), mpp=args.mpp, progress=False)

print(f"slide {result.slide['name']}: {result.slide['mpp']:.3g} µm/px "
      f"({result.slide['mpp_source']})")
for name, model in result.models.items():
    print(f"  {name}: {model.get('label', model)}")
for region in result.regions:
    box = region.box
    print(f"  region {region.id}: {region.scale}x{region.scale} patches, score "
          f"{region.score:.3f}, level-0 box x={box['x']} y={box['y']} "
          f"{box['width']}x{box['height']} px")
for scale, reason in result.empty_scales.items():
    print(f"  scale {scale}: nothing selected ({reason})")

# The same result as the evidence.json document, and as text for an LLM prompt.
document = result.to_dict()
print(f"{len(document['regions'])} regions; evidence.json and report.html are in "
      f"{out / 'select' / result.slide['name']}")
print(result.to_prompt_context()[:300])
