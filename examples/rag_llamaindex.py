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

from wsikit.integrations.examples import example_inputs, example_parser, example_select_options


def main() -> int:
    args = example_parser(__doc__).parse_args()
    from llama_index.core import PromptTemplate
    from llama_index.core.schema import MetadataMode

    from wsikit.integrations.llamaindex import WsikitMultiModalRetriever

    index, query, work = example_inputs(args)

    retriever = WsikitMultiModalRetriever(index, k=args.k, min_similarity=args.min_similarity,
                                          out=work / "out",
                                          select_options=example_select_options(args))
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
