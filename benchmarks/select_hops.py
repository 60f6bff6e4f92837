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

* **data walk** (issue 38): a static walk of the source from the ``select`` step's function
  (``select_step``): every wsikit function it calls, the functions those call, and so on, as
  far as the calls can be resolved from the source (a name imported from a wsikit module, a
  module attribute, ``self.method``, ``Class.method``; a call on an object of unknown type is
  not followed). **stops** are the functions reached, **modules** the modules they lie in; the
  modules with most stops are listed. ``--walk-only --root DIR`` measures another checkout's
  source (no run), so two trees are compared by one script.

Usage: ``python benchmarks/select_hops.py [SLIDE] [--index DIR]`` (default: the CMU-1 small
region of ``tests/data`` and the demo index built into a temporary folder). Prints JSON.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import traceback
from collections import Counter, deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: How often each piece of one-time work is expected in one fresh ``select`` run.
EXPECTED = {"fingerprint": 1, "index_open": 1, "selector_built": 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("slide", nargs="?", default=str(ROOT / "tests/data/CMU-1-Small-Region.svs"))
    ap.add_argument("--index", default=None)
    ap.add_argument("--walk-only", action="store_true", help="only the static data walk")
    ap.add_argument("--root", default=str(ROOT), help="checkout whose source is walked")
    args = ap.parse_args()
    walk = data_walk(Path(args.root))
    if args.walk_only:
        print(json.dumps(walk, indent=1), file=sys.stderr)
        return

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
                      "as_expected": found == EXPECTED, **walk}, indent=1),
          file=sys.stderr)
    if code != 0 or found != EXPECTED:
        sys.exit(1)


# --------------------------------------------------------------------------- the data walk
def data_walk(root: Path, start: str = "select_step") -> dict[str, object]:
    """The static walk from the function ``start`` of ``root``'s ``wsikit`` (module notes)."""
    walker = _Walker(root)
    first = next(k for k in walker.funcs if k[1] == start)
    seen, queue = {first}, deque([first])
    while queue:
        for callee in walker.calls(queue.popleft()):
            if callee not in seen:
                seen.add(callee)
                queue.append(callee)
    per_module = Counter(m for m, _ in seen)
    return {"walk_from": f"{first[0]}.{first[1]}", "walk_stops": len(seen),
            "walk_modules": len(per_module), "walk_most": per_module.most_common(6)}


class _Walker:
    """Functions and classes of every module under ``root/wsikit``, and their imports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trees = {self._name(p): ast.parse(p.read_text(encoding="utf-8"))
                      for p in sorted((root / "wsikit").rglob("*.py"))}
        self.funcs: dict[tuple[str, str], ast.AST] = {}
        self.classes: set[tuple[str, str]] = set()
        for mod, tree in self.trees.items():
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.funcs[(mod, node.name)] = node
                elif isinstance(node, ast.ClassDef):
                    self.classes.add((mod, node.name))
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self.funcs[(mod, f"{node.name}.{item.name}")] = item
        self.imports = {m: self._imports(m, [n for n in t.body
                                             if isinstance(n, (ast.Import, ast.ImportFrom))])
                        for m, t in self.trees.items()}

    def _name(self, path: Path) -> str:
        parts = list(path.relative_to(self.root).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def _source(self, mod: str, node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        pkg = mod.split(".")
        base = pkg if (self.root / Path(*pkg) / "__init__.py").exists() else pkg[:-1]
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _imports(self, mod: str, nodes: list[ast.AST]) -> dict[str, tuple[str, str | None]]:
        names: dict[str, tuple[str, str | None]] = {}
        for node in nodes:
            for n in ast.walk(node):
                if isinstance(n, ast.ImportFrom):
                    for a in n.names:
                        names[a.asname or a.name] = (self._source(mod, n), a.name)
                elif isinstance(n, ast.Import):
                    for a in n.names:
                        names[a.asname or a.name.split(".")[0]] = (a.name, None)
        return names

    def target(self, mod: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """The function (or class constructor) ``name`` of ``mod``, through re-exports."""
        if depth > 6 or mod not in self.trees:
            return None
        if (mod, name) in self.funcs:
            return mod, name
        if (mod, name) in self.classes:
            return ("class", f"{mod}:{name}")
        src, orig = self.imports[mod].get(name, ("", None))
        if orig is None or f"{src}.{orig}" in self.trees:
            return None
        return self.target(src, orig, depth + 1)

    def _method(self, found: tuple[str, str] | None, attr: str) -> tuple[str, str] | None:
        if found is None or found[0] != "class":
            return None
        mod, cls = found[1].split(":")
        key = (mod, f"{cls}.{attr}")
        return key if key in self.funcs else None

    def calls(self, key: tuple[str, str]) -> set[tuple[str, str]]:
        mod, qual = key
        node = self.funcs[key]
        local = {**self.imports[mod], **self._imports(mod, [node])}
        cls = qual.split(".")[0] if "." in qual else None
        out: set[tuple[str, str]] = set()
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            found = self._resolve(mod, cls, local, call.func)
            if found is not None and found[0] != "class":
                out.add(found)
            elif found is not None:  # a constructor: its __init__
                init = self._method(found, "__init__")
                if init is not None:
                    out.add(init)
        return out

    def _resolve(self, mod: str, cls: str | None, local: dict[str, tuple[str, str | None]],
                 func: ast.AST) -> tuple[str, str] | None:
        if isinstance(func, ast.Name):
            if func.id in local:
                src, orig = local[func.id]
                return self.target(src, orig) if orig is not None else None
            return self.target(mod, func.id)
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return None
        owner = func.value.id
        if owner in ("self", "cls") and cls is not None:
            return self._method(("class", f"{mod}:{cls}"), func.attr)
        if owner in local:
            src, orig = local[owner]
            if orig is None or f"{src}.{orig}" in self.trees:  # a module
                return self.target(src if orig is None else f"{src}.{orig}", func.attr)
            return self._method(self.target(src, orig), func.attr)
        return self._method(self.target(mod, owner), func.attr)


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
