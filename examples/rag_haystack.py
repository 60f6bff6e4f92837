#!/usr/bin/env python
"""A Haystack pipeline over a wsikit figure index: WsikitRetriever -> PromptBuilder.

No LLM is called: the script prints the prompt the pipeline builds. With no --index it
builds the small synthetic demo index (a few seconds, weight-free heuristic encoder) and
queries it with a synthetic dense-nuclei crop.

    python examples/rag_haystack.py                       # demo index + demo crop
    python examples/rag_haystack.py --index lit_index --query crop.png
    python examples/rag_haystack.py --index lit_index --query slide.svs    # runs select
"""

from __future__ import annotations

from wsikit.integrations.examples import example_inputs, example_parser

TEMPLATE = """Figures retrieved for the query image (cite them as [n]; similarity is not a
diagnosis):
{% for doc in documents %}
[{{ loop.index }}] region {{ doc.meta.region_id }} ({{ doc.meta.region_scale }}x):
    {{- " " ~ (doc.meta.figure_label or "Figure") }} - {{ doc.content }}
    source: {{ doc.meta.source_title }} (doi {{ doc.meta.doi }});
    evidence: {{ doc.meta.evidence_level_name }};
    similarity {{ "%.3f"|format(doc.meta.wsikit_similarity) }}, higher than
    {{- " " ~ doc.meta.similarity_percentile }}% of unrelated figures
    ({{ doc.meta.score_type }})
    image: {{ doc.meta.file_path }}
{% else %}
(no figure passed the similarity floor)
{% endfor %}
Question: {{ question }}
Answer:"""


def main() -> int:
    args = example_parser(__doc__).parse_args()
    from haystack import Pipeline
    from haystack.components.builders import PromptBuilder

    from wsikit.integrations.haystack import WsikitRetriever

    index, query, work = example_inputs(args)

    pipe = Pipeline()
    pipe.add_component("figures", WsikitRetriever(index=str(index), k=args.k,
                                                  min_similarity=args.min_similarity,
                                                  out=str(work / "out")))
    pipe.add_component("prompt", PromptBuilder(template=TEMPLATE,
                                               required_variables=["documents", "question"]))
    pipe.connect("figures.documents", "prompt.documents")
    result = pipe.run({"figures": {"query": str(query)}, "prompt": {"question": args.question}})
    print(result["prompt"]["prompt"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
