"""Rebuild the PDF figure development set from the repositories its truth names.

Each PDF of a development-set truth (``benchmarks/data/pdf_devset/truth_a.json``,
``truth_c.json``, …) carries ``source`` =
``owner/name@commit:path`` (a public GitHub repository where the article is kept as a test input)
and ``sha256``. Most of these articles are not openly licensed, so the repository holds only
their truth; this script takes each file out of a local copy of its repository::

    python benchmarks/fetch_pdf_devset.py benchmarks/data/pdf_devset/truth_a.json \
        --mirrors /work/.mirror --out /work/pdfset/pdfs

The figure-kind labels (``benchmarks/data/figure_kinds.json``, one entry per figure, each with
its ``source``) are rebuilt the same way, one sub-folder per labelled set (``dev``,
``held-out-1``, …), as ``bench_figure_kinds.py --pdfs`` takes them::

    python benchmarks/fetch_pdf_devset.py benchmarks/data/figure_kinds.json --out /work/kpdfs

A repository copy is looked for as ``MIRRORS/owner+name/<folder>``, bare or with its git
directory in ``<folder>/.git`` (as the session tool ``fetch github:owner/name`` leaves a
snapshot: ``<folder>`` is ``repo``), ``MIRRORS/owner+name``, ``MIRRORS/owner/name.git`` or
``MIRRORS/owner/name`` (a clone). A missing copy is the manual
step: fetch or ``git clone https://github.com/owner/name`` into MIRRORS, then run again. The file
is read at the recorded commit (``git show commit:path``), else at the snapshot's HEAD, and
kept only when its sha256 is the recorded one; it is written to a temporary name and renamed,
so a partial file never looks complete. One missing PDF never stops the others; the exit code
is 1 when any is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path


def parse_source(source: str) -> tuple[str, str, str]:
    """``owner/name@commit:path`` → (owner/name, commit, path)."""
    repo, _, rest = source.partition("@")
    commit, _, path = rest.partition(":")
    if not repo or not commit or not path:
        raise ValueError(f"source {source!r} is not owner/name@commit:path")
    return repo, commit, path


def git_dir(mirrors: Path, repo: str) -> Path | None:
    owner, name = repo.split("/", 1)
    snapshot = mirrors / f"{owner}+{name}"
    # a snapshot's folder holds its git directory under a name of its own ("repo"), bare or
    # as a work tree's .git
    inner = sorted(p for p in snapshot.iterdir() if p.is_dir()) if snapshot.is_dir() else []
    for cand in (snapshot / "repo", snapshot / "repo" / ".git", snapshot,
                 *[d for p in inner for d in (p, p / ".git")],
                 mirrors / owner / f"{name}.git", mirrors / owner / name / ".git",
                 mirrors / owner / name):
        if (cand / "HEAD").is_file() and (cand / "objects").is_dir():
            return cand
    return None


def read_blob(gdir: Path, commit: str, path: str) -> bytes | None:
    for rev in (commit, "HEAD"):
        proc = subprocess.run(["git", f"--git-dir={gdir}", "show", f"{rev}:{path}"],
                              capture_output=True, check=False)
        if proc.returncode == 0 and proc.stdout:
            return proc.stdout
    return None


def fetch_one(entry: dict, *, mirrors: Path, out: Path) -> str:
    """Write one PDF; return "ok", "present" or why it is missing."""
    target = out / entry["file"]
    want = entry.get("sha256")
    if target.is_file() and want and hashlib.sha256(target.read_bytes()).hexdigest() == want:
        return "present"
    repo, commit, path = parse_source(entry["source"])
    gdir = git_dir(mirrors, repo)
    if gdir is None:
        return (f"no copy of {repo} under {mirrors}: fetch github:{repo} (or git clone "
                f"https://github.com/{repo} {mirrors}/{repo}) and run again")
    blob = read_blob(gdir, commit, path)
    if blob is None:
        return f"{path} is not in {gdir} at {commit[:10]} nor at HEAD: fetch a newer snapshot"
    got = hashlib.sha256(blob).hexdigest()
    if want and got != want:
        return f"{path} in {gdir} has sha256 {got[:12]}…, the truth was made on {want[:12]}…"
    tmp = target.with_name(f".{target.name}.part")
    tmp.write_bytes(blob)
    os.replace(tmp, target)
    return "ok"


def entries(truth: dict, out: Path) -> list[tuple[dict, Path]]:
    """Each PDF of a truth once, with the folder it goes to.

    A PDF truth (``"pdfs"``) puts every file in ``out``; the figure-kind labels (``"figures"``,
    one entry per figure) put each file in ``out/<set>``.
    """
    if "pdfs" in truth:
        return [(entry, out) for entry in truth["pdfs"]]
    seen: dict[tuple[str, str], tuple[dict, Path]] = {}
    for fig in truth["figures"]:
        seen.setdefault((fig["set"], fig["file"]), (fig, out / fig["set"]))
    return list(seen.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("truth", type=Path)
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"),
                    help="folder holding the repository copies")
    ap.add_argument("--out", type=Path, required=True, help="folder the PDFs are written to")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    missing = 0
    for entry, out in entries(json.loads(args.truth.read_text(encoding="utf-8")), args.out):
        out.mkdir(parents=True, exist_ok=True)
        try:
            status = fetch_one(entry, mirrors=args.mirrors, out=out)
        except (OSError, ValueError) as exc:
            status = f"{type(exc).__name__}: {exc}"
        missing += status not in ("ok", "present")
        print(f"{entry['file']}: {status}", file=sys.stdout if status in ("ok", "present")
              else sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
