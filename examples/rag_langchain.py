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

from wsikit.integrations.examples import example_inputs, example_parser, example_select_options


def main() -> int:
    args = example_parser(__doc__).parse_args()
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from wsikit.integrations.langchain import WsikitRetriever

    index, query, work = example_inputs(args)

    retriever = WsikitRetriever(index=str(index), k=args.k, min_similarity=args.min_similarity,
                                out=str(work / "out"),
                                select_options=example_select_options(args))

    def format_docs(docs) -> str:
        if not docs:
            return "(no figure passed the similarity floor)"
        return "\n\n".join(
            f"[{n}] region {d.metadata['region_id']} ({d.metadata['region_scale']}x): "
            f"{d.metadata['figure_label'] or 'Figure'} - {d.page_content}\n"
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
