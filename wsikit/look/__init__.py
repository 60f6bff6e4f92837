"""What a person looks at: the report, the overview and heatmap images, the viewer.

:mod:`wsikit.look.overlay` draws on thumbnails (pure functions over arrays),
:mod:`wsikit.look.report` writes the self-contained HTML report and the overview PNG, and
:mod:`wsikit.look.viewer` serves a slide (deep zoom) with its tissue, heatmap and regions,
its page in ``wsikit/look/data/viewer.html``.
"""
