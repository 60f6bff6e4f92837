"""What this machine offers wsikit: installed components, visible GPUs, model weights found.

:func:`doctor` (``wsikit doctor``) stays fast (well under 3 s): component versions come from
the installed distributions' metadata and GPUs from the NVIDIA driver, and the weights lookup
reads the torch-free config table (:mod:`wsikit.models.configs`), so torch, timm and faiss are
never imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any

__all__ = ["COMPONENTS", "doctor"]


#: (row label, import name, distributions to ask for a version, what it is for)
COMPONENTS: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("openslide", "openslide", ("openslide-python",), "slide reader (SVS, NDPI, MRXS, ...)"),
    ("tiffslide", "tiffslide", ("tiffslide",), "reader for TIFFs OpenSlide rejects"),
    ("pyvips", "pyvips", ("pyvips",), "fast tiled-TIFF slide reader (extra: pyvips)"),
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
    for label, module, dists, purpose in COMPONENTS:
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
        from .hub import config_path, config_problems, hf_cache_dir, weights_status

        report.update(weights=weights_status(), hf_cache=str(hf_cache_dir()),
                      weights_config=str(config_path()),
                      weights_config_problems=config_problems())
    return report
