"""Build a literature figure index from PDFs and a manifest, then query it with an image.

    python examples/build_figure_index.py                  # a generated PDF, seconds
    python examples/build_figure_index.py --pdf paper1.pdf paper2.pdf --manifest figs.jsonl \
        --out lit_index/

Figures and their captions are pulled out of each PDF (pypdfium2) into ``images/`` plus an
editable ``manifest.jsonl``; review it (captions, evidence levels), then the index embeds
every figure with the chosen encoder and stores a FAISS index with the figures' metadata.
``wsikit select --index DIR`` and ``wsikit.select(..., index=DIR)`` match regions against it.
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from wsikit.evidence import (
    FigureIndex,
    extract_pdf_figures,
    read_figure_manifest,
    write_figure_manifest,
    write_synthetic_pdf,
)
from wsikit.models import create_encoder

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--pdf", nargs="*", default=[],
                    help="PDFs to take figures from (default: one generated atlas PDF)")
parser.add_argument("--manifest", nargs="*", default=[],
                    help="existing manifests (JSONL or CSV: image, caption, doi, "
                         "evidence_level, ...) to index as well")
parser.add_argument("--evidence-level", default="textbook",
                    help="evidence level of the PDFs' figures (1-8, a name, or unknown)")
parser.add_argument("--out", help="index folder (default: a new temporary folder)")
parser.add_argument("--encoder", default="heuristic",
                    help="figure encoder: heuristic (no weights) or virchow2 (gated)")
args = parser.parse_args()

work = Path(args.out or tempfile.mkdtemp(prefix="wsikit-index-")).resolve()
work.mkdir(parents=True, exist_ok=True)
pdfs = [Path(p) for p in args.pdf]
if not pdfs and not args.manifest:
    # A synthetic atlas: captioned H&E-like figures on a few pages, a title and a DOI.
    pdfs = [write_synthetic_pdf(work / "atlas.pdf")]

# 1. PDFs -> figure images + nodes (caption, figure label, page, title, DOI), saved as a
#    manifest you can edit before indexing.
figures = work / "figures"
nodes = []
for pdf in pdfs:
    found = extract_pdf_figures(pdf, figures, evidence_level=args.evidence_level)
    print(f"{pdf.name}: {len(found)} figures")
    nodes.extend(found)
if nodes:
    manifest = write_figure_manifest(nodes, figures / "manifest.jsonl")
    print(f"manifest: {manifest}")
    nodes = read_figure_manifest(manifest)  # what an edited manifest would give
for extra in args.manifest:
    nodes.extend(read_figure_manifest(extra))

# 2. Embed every figure and write the index (assembled aside, renamed into place).
encoder = create_encoder(args.encoder, role="figure")
index = FigureIndex.build(nodes, encoder, work / "index", overwrite=True, progress_bar=False)
print(f"index: {work / 'index'} ({len(nodes)} figures, encoder {encoder.label})")

# 3. Query with an image: here the first figure, slightly cropped (a region crop in practice).
query = np.asarray(Image.open(nodes[0].image).convert("RGB"))
query = query[5:-5, 5:-5]
for match in index.query_images([query], encoder, k=3)[0]:
    node = match.node
    print(f"  {match.similarity:.3f}  {node.figure_label or '?'} p.{node.page}: "
          f"{(node.caption or '')[:70]}  doi:{node.doi}")
