"""``wsikit doctor`` (installed components, GPUs, model weights) and ``wsikit models``.

``doctor`` stays fast (well under 3 s): component versions come from the installed
distributions' metadata and GPUs from the NVIDIA driver, and the weights lookup reads the
torch-free config table (:mod:`wsikit.models.configs`), so torch, timm and faiss are never
imported.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
from typing import Any

__all__ = ["register", "doctor", "format_doctor", "models"]


#: (row label, import name, distributions to ask for a version, what it is for)
_COMPONENTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("openslide", "openslide", ("openslide-python",), "slide reader (SVS, NDPI, MRXS, ...)"),
    ("tiffslide", "tiffslide", ("tiffslide",), "reader for TIFFs OpenSlide rejects"),
    ("wsidicom", "wsidicom", ("wsidicom",), "DICOM WSI reader (extra: dicom)"),
    ("faiss", "faiss", ("faiss-gpu", "faiss-gpu-cu12", "faiss-cpu"), "figure index"),
    ("torch", "torch", ("torch",), "model inference"),
    ("timm", "timm", ("timm",), "Virchow2 / ViT building blocks"),
    ("huggingface_hub", "huggingface_hub", ("huggingface-hub", "huggingface_hub"),
     "weight download and cache"),
    ("pypdfium2", "pypdfium2", ("pypdfium2",), "PDF figure extraction"),
    ("ray", "ray", ("ray",), "batch on many machines (extra: ray)"),
)


def _distribution(names: tuple[str, ...]) -> tuple[str, str] | None:
    """``(distribution, version)`` of the first installed of ``names`` (no import)."""
    from importlib import metadata

    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _nvidia_gpus() -> list[str]:
    """GPUs the NVIDIA driver exposes (``/proc/driver/nvidia``), without initialising CUDA."""
    from pathlib import Path

    root = Path("/proc/driver/nvidia/gpus")
    names = []
    with contextlib.suppress(OSError):
        for info in sorted(root.glob("*/information")):
            model = next((line.split(":", 1)[1].strip() for line in
                          info.read_text(errors="replace").splitlines()
                          if line.startswith("Model:")), info.parent.name)
            names.append(model)
    return names


def doctor(*, weights: bool = True) -> dict[str, Any]:
    """What is installed, whether CUDA GPUs are visible, and which model weights are found.

    Fast (no torch, timm or faiss import: versions come from the installed distributions,
    GPUs from the NVIDIA driver, weights from the torch-free config table).
    ``backends[name]`` is ``None`` when a component is not installed.
    """
    backends: dict[str, Any] = {}
    for label, module, dists, purpose in _COMPONENTS:
        found = _distribution(dists)
        if found is None or importlib.util.find_spec(module) is None:
            backends[label] = None
            continue
        info: dict[str, Any] = {"version": found[1], "distribution": found[0], "for": purpose}
        if label == "openslide":
            try:
                import openslide

                info["library"] = openslide.__library_version__
            except Exception as exc:
                info["error"] = f"{type(exc).__name__}: {exc}"
        elif label == "faiss":
            info["gpu_build"] = "gpu" in found[0]
        elif label == "torch":
            info["cuda_build"] = "+cpu" not in found[1]
        backends[label] = info
    gpus = _nvidia_gpus()
    report: dict[str, Any] = {"backends": backends, "gpus": gpus}
    if weights:
        from ..models.hub import config_path, config_problems, hf_cache_dir, weights_status

        report.update(weights=weights_status(), hf_cache=str(hf_cache_dir()),
                      weights_config=str(config_path()),
                      weights_config_problems=config_problems())
    return report


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
    """``report`` (from :func:`doctor`) as the readable tables ``wsikit doctor`` prints."""
    import platform

    from .._version import __version__

    rows: list[tuple[str, ...]] = [("component", "status", "version", "notes")]
    for label, info in report["backends"].items():
        purpose = next(c[3] for c in _COMPONENTS if c[0] == label)
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
        rows = [("model", "weights", "where / how to get them")]
        for row in report["weights"]:
            if row["found"]:
                rows.append((row["name"], "found", f"{row['path']} ({row['source']})"))
            else:
                rows.append((row["name"], "MISSING", row["how_to_get"] or row["error"] or ""))
        lines += ["", *_table(rows, width), "",
                  f"Hugging Face cache: {report['hf_cache']}",
                  f"Weights config:     {report['weights_config']}",
                  *(f"  PROBLEM: {problem}" for problem in report["weights_config_problems"]),
                  "Without weights wsikit uses the labelled weight-free 'heuristic' encoder "
                  "and scorer."]
    return "\n".join(lines)


def models() -> list[dict[str, Any]]:
    """Configs of every registered encoder."""
    from ..models import get_config, list_encoders

    return [get_config(n).to_dict() for n in list_encoders()]


def _doctor_cmd(args: argparse.Namespace) -> int:
    import shutil

    report = doctor()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(format_doctor(report, width=min(120, shutil.get_terminal_size((100, 24)).columns)))
    return 0


def _models_cmd(args: argparse.Namespace) -> int:
    rows = models()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        print(f"{r['name']:12s} role={r['role']:5s} dim={r['dim']:<5d} input={r['input_px']}px "
              f"@{r['target_mpp']}µm/px  {r['license']}{' gated' if r['gated'] else ''}  "
              f"{r['description']}", file=sys.stdout)
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
                              description="List encoders (name, role, output dim, input size, "
                              "resolution, licence) usable with --encoder.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_models_cmd)
