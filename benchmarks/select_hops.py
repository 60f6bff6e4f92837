"""Count the hops of a ``wsikit select`` run from the command line to ``evidence.json``.

Method (issue 31): run ``wsikit select`` in process (``wsikit.cli.main``) on a slide with a
figure index, and

* **hops** (depth): at the moment ``evidence.json`` is written (the call of
  ``wsikit._atomic.write_json_atomic`` with that path), take the call stack from
  ``wsikit.cli.main`` down to that call and count the calls whose callee lies in another module
  than its caller (a call within one module is not a hop; context-manager entries and
  generator frames count like calls, as they appear on the stack);
* **modules**: the wsikit modules with at least one function called during the run
  (``sys.setprofile``);
* **repeated work**: how often the slide's content fingerprint
  (``wsikit.slide.fingerprint.slide_fingerprint``) is computed, the figure index opened
  (``FigureIndex.open``) and a selector built (``wsikit.selection.selectors.create_selector``):
  each is expected once per run (``EXPECTED``; the fingerprint is computed once, in the run's
  ``SlideContext``, and passed to every ``slide_ops`` check); ``as_expected`` says whether
  the run matched, and the script exits non-zero when it did not.

Usage: ``python benchmarks/select_hops.py [SLIDE] [--index DIR]`` (default: the CMU-1 small
region of ``tests/data`` and the demo index built into a temporary folder). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: How often each piece of one-time work is expected in one fresh ``select`` run.
EXPECTED = {"fingerprint": 1, "index_open": 1, "selector_built": 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("slide", nargs="?", default=str(ROOT / "tests/data/CMU-1-Small-Region.svs"))
    ap.add_argument("--index", default=None)
    args = ap.parse_args()

    import wsikit._atomic as atomic
    from wsikit.cli import main as cli_main
    from wsikit.run.demos import demo_index

    tmp = Path(tempfile.mkdtemp(prefix="wsikit-hops-"))
    index = args.index or str(demo_index(tmp / "demo", progress=False))
    counts: Counter[str] = Counter()
    modules: set[str] = set()
    stack_at_write: list[traceback.FrameSummary] = []
    watched = {("wsikit.slide.fingerprint", "slide_fingerprint"): "fingerprint",
               ("wsikit.evidence.index", "open"): "index_open",
               ("wsikit.selection.selectors.registry", "create_selector"): "selector_built"}

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("wsikit"):
            modules.add(module)
            key = watched.get((module, frame.f_code.co_name))
            if key is not None:
                counts[key] += 1

    original = atomic.write_json_atomic

    def spy(path, *a, **kw):
        if Path(path).name == "evidence.json" and not stack_at_write:
            stack_at_write.extend(traceback.extract_stack()[:-1])
        return original(path, *a, **kw)

    _patch(atomic, original, spy)
    sys.setprofile(profile)
    try:
        code = cli_main(["select", args.slide, "--out", str(tmp / "out"), "--index", index,
                         "--encoder", "heuristic", "--no-report", "--format", "json"])
    finally:
        sys.setprofile(None)
        _patch(atomic, spy, original)
    frames = list(stack_at_write)
    start = next(i for i, f in enumerate(frames)
                 if f.filename.endswith("wsikit/cli/__init__.py"))
    path = [(_module(f.filename), f.name) for f in frames[start:]] + [
        ("wsikit._atomic", "write_json_atomic")]
    hops = [f"{a[0]}.{a[1]} -> {b[0]}.{b[1]}" for a, b in zip(path, path[1:], strict=False)
            if a[0] != b[0]]
    found = {k: counts[k] for k in watched.values()}
    print(json.dumps({"exit_code": code, "hops": len(hops), "path": hops,
                      "modules_called": len(modules), **found,
                      "as_expected": found == EXPECTED}, indent=1),
          file=sys.stderr)
    if code != 0 or found != EXPECTED:
        sys.exit(1)


def _module(filename: str) -> str:
    rel = Path(filename).resolve()
    try:
        rel = rel.relative_to(ROOT)
    except ValueError:
        return rel.stem
    return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")


def _patch(module, old, new) -> None:
    """Replace ``old`` by ``new`` wherever a wsikit module imported it by name."""
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("wsikit"):
            for name, value in list(vars(mod).items()):
                if value is old:
                    setattr(mod, name, new)


if __name__ == "__main__":
    main()
