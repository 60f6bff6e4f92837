"""``wsikit doctor`` (backends and model weights) and ``wsikit models`` (registered encoders)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

__all__ = ["register", "doctor", "models"]


def _version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - any import failure means "not usable"
        return None
    return str(getattr(mod, "__version__", "installed"))


def doctor() -> dict[str, Any]:
    """Backends (OpenSlide, tiffslide, faiss, torch/CUDA) and which model weights are found."""
    from ..models.hub import config_path, hf_cache_dir, weights_status

    backends: dict[str, Any] = {}
    try:
        import openslide

        backends["openslide"] = {"python": openslide.__version__,
                                 "library": openslide.__library_version__}
    except Exception as exc:  # noqa: BLE001
        backends["openslide"] = {"error": str(exc)}
    backends["tiffslide"] = _version("tiffslide")
    try:
        import faiss

        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        backends["faiss"] = {"version": faiss.__version__, "gpu_build": hasattr(faiss, "StandardGpuResources"),
                             "gpus": gpus}
    except Exception as exc:  # noqa: BLE001
        backends["faiss"] = {"error": str(exc)}
    import torch

    cuda = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    backends["torch"] = {"version": torch.__version__, "cuda_available": bool(cuda),
                         "cuda_devices": cuda}
    backends["timm"] = _version("timm")
    backends["huggingface_hub"] = _version("huggingface_hub")
    return {"backends": backends, "weights": weights_status(),
            "hf_cache": str(hf_cache_dir()), "weights_config": str(config_path()),
            "weights_config_problems": _config_problems(config_path())}


def _config_problems(path: Any) -> list[str]:
    """What is wrong with the weights config file (malformed, naming missing files)."""
    from ..errors import WeightsError
    from ..models.hub import _read_config

    if not path.exists():
        return []
    try:
        entries = _read_config(path)
    except WeightsError as exc:
        return [str(exc)]
    from pathlib import Path

    return [f"{path}: {name} = {value!r} names a file that does not exist; fix the path"
            for name, value in entries.items() if not Path(value).expanduser().is_file()]


def models() -> list[dict[str, Any]]:
    """Configs of every registered encoder."""
    from ..models import get_config, list_encoders

    return [get_config(n).to_dict() for n in list_encoders()]


def _doctor_cmd(args: argparse.Namespace) -> int:
    report = doctor()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("Backends:")
    for name, info in report["backends"].items():
        print(f"  {name:16s} {info if info is not None else 'NOT INSTALLED'}")
    print(f"Hugging Face cache: {report['hf_cache']}")
    print(f"Weights config:     {report['weights_config']}")
    for problem in report["weights_config_problems"]:
        print(f"  PROBLEM: {problem}")
    print("Model weights:")
    for row in report["weights"]:
        if row["found"]:
            print(f"  {row['name']:12s} found ({row['source']}): {row['path']}")
        else:
            print(f"  {row['name']:12s} MISSING: {row['how_to_get']}")
    print("Without weights wsikit uses the labelled weight-free 'heuristic' encoder and scorer.")
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
                              description="Report slide backends (OpenSlide, tiffslide), faiss "
                              "(CPU/GPU), torch and CUDA devices, and for each model whether "
                              "weights are found (and where) or how to get them.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_doctor_cmd)
    p = subparsers.add_parser("models", help="list registered encoders and their configs",
                              description="List encoders (name, role, output dim, input size, "
                              "resolution, licence) usable with --encoder.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_models_cmd)
