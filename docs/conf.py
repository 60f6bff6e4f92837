"""Sphinx configuration of the wsikit documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (what .ci/run runs;
warnings are errors). The CLI reference and the API pages are generated at each build from the
argument parser and the packages' ``__all__`` (``docs/_ext``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from wsikit._version import __version__  # noqa: E402

project = "wsikit"
author = "wsikit contributors"
copyright = "wsikit contributors, Apache-2.0"
release = __version__
version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
    "wsikit_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc: members in each module's __all__, in source order, type hints in the signature
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_default_options = {"undoc-members": False}

# numpydoc: no autosummary tables of class members (autodoc documents them), no cross-reference
# guessing of parameter types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

html_theme = "furo"
html_title = f"wsikit {__version__}"
html_static_path: list[str] = []
