#!/usr/bin/env python
"""A LlamaIndex multi-modal retrieval step over a wsikit figure index: image -> ImageNodes ->
prompt.

No LLM is called: the script prints the prompt a query engine would send. With no --index it
builds the small synthetic demo index (a few seconds, weight-free heuristic encoder) and
queries it with a synthetic dense-nuclei crop.

    python examples/rag_llamaindex.py                     # demo index + demo crop
    python examples/rag_llamaindex.py --index lit_index --query crop.png
    python examples/rag_llamaindex.py --index lit_index --query slide.svs  # runs select
"""

from __future__ import annotations

import argparse
from pathlib import Path

QUESTION = "Which published figures resemble this region, and what do their captions say?"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--index", default=None, help="figure index folder (default: demo index)")
    p.add_argument("--query", default=None,
                   help="image, slide or evidence.json (default: a synthetic crop)")
    p.add_argument("--work", default="wsikit_rag_demo",
                   help="folder for the demo index, demo crop and select outputs")
    p.add_argument("-k", type=int, default=5, help="figures looked up per region")
    p.add_argument("--min-similarity", default="p95",
                   help="floor: background percentile (p95) or cosine similarity")
    p.add_argument("--question", default=QUESTION)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    from llama_index.core import PromptTemplate
    from llama_index.core.schema import MetadataMode

    from wsikit.demo import demo_crop, demo_index
    from wsikit.integrations.llamaindex import WsikitMultiModalRetriever

    work = Path(args.work)
    index = args.index or demo_index(work, progress=False)
    query = args.query or demo_crop(work / "query_dense_crop.png")
    retriever = WsikitMultiModalRetriever(index, k=args.k, min_similarity=args.min_similarity,
                                          out=work / "out")
    hits = retriever.image_to_image_retrieve(str(query))
    # what a multi-modal LLM would get: the text (caption + citation metadata, no layout
    # fields) and the figure images by path
    context = "\n\n".join(f"[{n}] {h.node.get_content(metadata_mode=MetadataMode.LLM)}"
                          for n, h in enumerate(hits, start=1)) or \
        "(no figure passed the similarity floor)"
    template = PromptTemplate(
        "Figures retrieved for the query image (cite them as [n]; similarity is not a "
        "diagnosis):\n---------------------\n{context_str}\n---------------------\n"
        "Images: {image_paths}\nQuestion: {query_str}\nAnswer: ")
    print(template.format(context_str=context, query_str=args.question,
                          image_paths=", ".join(h.node.image_path for h in hits) or "none"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
