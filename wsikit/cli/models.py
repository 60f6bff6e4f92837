"""``wsikit doctor`` (installed components, GPUs, model weights) and ``wsikit models``:
argument parsing and printing around :func:`wsikit.models.doctor` and the encoder registry.

``doctor`` stays fast: :mod:`wsikit.models.environment` imports neither torch, timm nor faiss,
and neither does this module.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["format_doctor", "model_rows", "register"]


def _table(rows: list[tuple[str, ...]], width: int) -> list[str]:
    """Left-aligned columns; the last column wraps to ``width``."""
    import textwrap

    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    indent = sum(widths) + 2 * len(widths)
    out = []
    for i, row in enumerate(rows):
        head = "".join(cell.ljust(w + 2) for cell, w in zip(row, widths, strict=False))
        lines = textwrap.wrap(row[-1], max(30, width - indent)) or [""]
        out.append((head + lines[0]).rstrip())
        out.extend(" " * indent + line for line in lines[1:])
        if i == 0:
            out.append("  ".join("-" * w for w in widths) + "  " + "-" * min(
                max(30, width - indent), max(len(r[-1]) for r in rows)))
    return out


def format_doctor(report: dict[str, Any], *, width: int = 100) -> str:
    """``report`` (from :func:`wsikit.models.doctor`) as the readable tables ``wsikit doctor``
    prints."""
    import platform

    from .._version import __version__
    from ..models.environment import COMPONENTS

    rows: list[tuple[str, ...]] = [("component", "status", "version", "notes")]
    for label, info in report["backends"].items():
        purpose = next(c[3] for c in COMPONENTS if c[0] == label)
        if info is None:
            rows.append((label, "missing", "-", purpose))
            continue
        notes = [purpose]
        if info.get("library"):
            notes.append(f"libopenslide {info['library']}")
        if "gpu_build" in info:
            notes.append("GPU build (runs CPU indexes too)" if info["gpu_build"] else "CPU build")
        if "cuda_build" in info:
            notes.append("CUDA build" if info["cuda_build"] else "CPU-only build")
        status = "ok"
        if info.get("error"):
            status, notes = "BROKEN", [info["error"]]
        rows.append((label, status, info["version"], "; ".join(notes)))
    gpus = report.get("gpus") or []
    rows.append(("NVIDIA GPUs", "ok" if gpus else "none", str(len(gpus)),
                 ", ".join(gpus) or "CPU only (features run on the CPU)"))
    lines = [f"wsikit {__version__} on Python {platform.python_version()} "
             f"({platform.system()} {platform.machine()})", ""]
    lines += _table(rows, width)
    if "weights" in report:
        rows = [("model", "weights", "access", "where / how to get them")]
        for row in report["weights"]:
            access = "gated" if row["gated"] else "open"
            if row["found"]:
                rows.append((row["name"], "found", access, f"{row['path']} ({row['source']})"))
            elif row["gated"]:
                rows.append((row["name"], "MISSING", access,
                             f"request access at https://huggingface.co/{row['repo']}, then "
                             f"'hf auth login' and: {row.get('fetch', '')}"))
            else:
                rows.append((row["name"], "MISSING", access, row.get("fetch") or ""))
        fetchable = [r["name"] for r in report["weights"] if not r["gated"] and not r["found"]]
        lines += ["", *_table(rows, width), ""]
        if fetchable:
            lines += [f"Open models fetchable now without approval ({len(fetchable)}): "
                      f"{', '.join(fetchable)}; run the 'hf download' line shown (needs the "
                      "network once), or copy the file here and pass --weights NAME=PATH; "
                      "some hubs ask to accept their terms while logged in (automatic).", ""]
        lines += [
                  f"Hugging Face cache: {report['hf_cache']}",
                  f"Weights config:     {report['weights_config']}",
                  *(f"  PROBLEM: {problem}" for problem in report["weights_config_problems"]),
                  "Without weights wsikit uses the labelled weight-free 'heuristic' encoder "
                  "and scorer."]
    return "\n".join(lines)


def _doctor_cmd(args: argparse.Namespace) -> int:
    import shutil

    from ..models.environment import doctor

    report = doctor()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(format_doctor(report, width=min(120, shutil.get_terminal_size((100, 24)).columns)))
    return 0


def model_rows() -> list[dict[str, Any]]:
    """Every registered encoder's config (as JSON) with ``weights_found`` and
    ``weights_source`` (local lookup only: environment, weights config, Hugging Face cache)."""
    from ..errors import WeightsError
    from ..models.configs import list_configs
    from ..models.hub import resolve_weights

    rows = []
    for config in list_configs():
        row = config.to_dict()
        found = None
        if not config.heuristic:
            try:
                found = resolve_weights(config.name, local_only=True)
            except WeightsError:
                found = None
        row["weights_found"] = True if config.heuristic else found is not None
        row["weights_source"] = ("none needed" if config.heuristic else
                                 f"{found.source}: {found.path}" if found else None)
        rows.append(row)
    return rows


def _models_cmd(args: argparse.Namespace) -> int:
    rows = model_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table: list[tuple[str, ...]] = [("name", "role", "dim", "input", "licence", "access",
                                     "weights", "what it is")]
    for r in rows:
        table.append((r["name"], r["role"], str(r["dim"]),
                      f"{r['input_px']}px@{r['target_mpp']:g}µm/px",
                      str(r["license"]).split(" (")[0], "gated" if r["gated"] else "open",
                      "found" if r["weights_found"] else "-", r["description"]))
    import shutil

    width = min(160, shutil.get_terminal_size((140, 24)).columns)
    print("\n".join(_table(table, width)), file=sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    """Add ``doctor`` and ``models`` to the ``wsikit`` command line."""
    p = subparsers.add_parser("doctor", help="check backends and which model weights are found",
                              description="Report, as a table, the installed slide backends "
                              "(OpenSlide, tiffslide, wsidicom), faiss (CPU/GPU build), torch, "
                              "NVIDIA GPUs, and for each model whether weights are found (and "
                              "where) or how to get them.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_doctor_cmd)
    p = subparsers.add_parser("models", help="list registered encoders and their configs",
                              description="List encoders usable with --encoder: name, role, output "
                              "dim, input size and resolution, licence, gated or open, whether "
                              "their weights are found locally, and what each is for.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_models_cmd)
