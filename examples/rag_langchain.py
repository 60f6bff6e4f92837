#!/usr/bin/env python
"""A LangChain retrieval chain over a wsikit figure index: query image -> figures -> prompt.

No LLM is called: the script prints the prompt the chain would send. With no --index it
builds the small synthetic demo index (a few seconds, weight-free heuristic encoder) and
queries it with a synthetic dense-nuclei crop.

    python examples/rag_langchain.py                      # demo index + demo crop
    python examples/rag_langchain.py --index lit_index --query crop.png
    python examples/rag_langchain.py --index lit_index --query slide.svs   # runs select
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
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from wsikit.demo import demo_crop, demo_index
    from wsikit.integrations.langchain import WsikitRetriever

    work = Path(args.work)
    index = args.index or demo_index(work, progress=False)
    query = args.query or demo_crop(work / "query_dense_crop.png")
    retriever = WsikitRetriever(index=str(index), k=args.k, min_similarity=args.min_similarity,
                                out=str(work / "out"))

    def format_docs(docs) -> str:
        if not docs:
            return "(no figure passed the similarity floor)"
        return "\n\n".join(
            f"[{n}] {d.metadata['figure_label'] or 'Figure'} - {d.page_content}\n"
            f"    source: {d.metadata['source_title']} ({d.metadata['source']}); evidence: "
            f"{d.metadata['evidence_level_name']}; similarity {d.metadata['similarity']:.3f} "
            f"(higher than {d.metadata['similarity_percentile']}% of unrelated figures; "
            f"{d.metadata['score_type']}); image: {d.metadata['image_path']}"
            for n, d in enumerate(docs, start=1))

    prompt = ChatPromptTemplate.from_messages([
        ("system", "You are a pathology assistant. Answer from the numbered figures only and "
                   "cite them as [n]. Similarity is not a diagnosis."),
        ("human", "Figures:\n{context}\n\nQuestion: {question}")])
    chain = ({"context": retriever | RunnableLambda(format_docs),
              "question": RunnableLambda(lambda _: args.question)}
             | RunnablePassthrough() | prompt)
    print(chain.invoke(str(query)).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
