"""``wsikit doctor`` (installed components, GPUs, model weights), ``wsikit models`` and
``wsikit slide-embedding``: argument parsing and printing around :func:`wsikit.models.doctor`,
the encoder registry and :func:`wsikit.models.slide_pool.embed_slide`.

``doctor`` stays fast: :mod:`wsikit.models.environment` imports neither torch, timm nor faiss,
and neither does this module.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .pipeline_options import add_weights_flag, weights_arg

__all__ = ["register"]


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


def slide_embedding_target(features: str, slide_encoder: str, out: str | None,
                           n_inputs: int) -> Path:
    """Where ``wsikit slide-embedding`` writes the embedding of ``features``: ``--out`` itself
    when it names one ``.h5`` file for one input, ``OUT/slide_features_<slide encoder>/
    <slide>.h5`` under an ``--out`` folder, else beside the feature folder."""
    from ..errors import FeatureError
    from ..models.slide_pool import slide_embedding_path

    if out is None:
        return slide_embedding_path(features, slide_encoder)
    target = Path(out)
    if target.suffix.lower() in (".h5", ".hdf5"):
        if n_inputs != 1:
            raise FeatureError(f"--out {out} names one file but {n_inputs} feature files were "
                               "given; give a folder as --out")
        return target
    return target / f"slide_features_{slide_encoder}" / f"{Path(features).stem}.h5"


def _slide_embedding_cmd(args: argparse.Namespace) -> int:
    from ..errors import FeatureError, WsikitError
    from ..features.extract import Embeddings
    from ..models.slide_pool import embed_slide, slide_encoder_name

    titan_weights = weights_arg(args, "titan").get("titan")  # a bare PATH is TITAN's
    if args.method == "titan":  # before any file is read
        from ..models.preflight import check_weights_found

        check_weights_found({"titan": "--method titan"}, {"titan": titan_weights}
                            if titan_weights else None)
    rows, failed = [], []
    for features in args.features:
        try:
            if not Path(features).is_file():
                raise FeatureError(f"{features} does not exist; give the feature files that "
                                   "'wsikit features' or 'wsikit batch' wrote "
                                   "(OUT/features_<encoder>/<slide>.h5)")
            emb = Embeddings.from_h5(features)
            target = slide_embedding_target(features, slide_encoder_name(args.method,
                                                                         emb.encoder),
                                            args.out, len(args.features))
            if target.exists() and not args.overwrite:
                raise FeatureError(f"{target} exists; pass --overwrite to replace it")
            result = embed_slide(emb, method=args.method, weighting=args.weighting,
                                 source=str(features), titan_weights=titan_weights,
                                 device=args.device)
            result.to_h5(target, overwrite=args.overwrite)
        except WsikitError as exc:
            if len(args.features) == 1:
                raise
            failed.append(f"{features}: {exc}")
            print(f"wsikit slide-embedding: {features}: error: {exc}", file=sys.stderr)
            continue
        rows.append({"features": str(features), "out": str(target), "label": result.label,
                     "method": result.method, "slide_encoder": result.slide_encoder,
                     "dim": int(result.embedding.shape[0]), "n_patches": result.n_patches})
        if not args.json:
            print(f"{target}: {result.label}")
    if args.json:
        print(json.dumps({"written": rows, "failed": failed}, indent=2))
    return 1 if failed else 0


def register(subparsers: Any) -> None:
    """Add ``doctor``, ``models`` and ``slide-embedding`` to the ``wsikit`` command line."""
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
    p = subparsers.add_parser(
        "slide-embedding", help="one vector per slide from its patch features: mean pool "
        "(any encoder) or TITAN",
        description="Embed each slide from its patch feature file. --method mean (default) "
        "works with every encoder, the weight-free heuristic and the open zoo models included: "
        "the mean of the tissue patches' features (optionally weighted by each patch's usable "
        "tissue), labelled 'mean-pool of <encoder> patch features' in the file; --method "
        "meanmax adds the per-dimension maximum (2 x dim). --method titan runs TITAN's slide "
        "encoder (CONCH v1.5 features, gated weights). Writes slide_features_<METHOD-ENCODER "
        "or titan>/<slide>.h5 (dataset 'features', float32; its attributes say how it was "
        "made) beside the feature folder, or under --out.")
    p.add_argument("features", nargs="+", metavar="FEATURES.h5",
                   help="patch feature files (wsikit or TRIDENT), one per slide")
    p.add_argument("--out", default=None, metavar="DIR|FILE.h5",
                   help="output folder (slide_features_<...>/<slide>.h5 under it), or one .h5 "
                   "file for one input (default: beside the feature folder)")
    p.add_argument("--method", choices=("mean", "meanmax", "titan"), default="mean",
                   help="mean: mean pool of the patch features, any encoder (default); "
                   "meanmax: that mean concatenated with the per-dimension maximum (2 x dim); "
                   "titan: TITAN over CONCH v1.5 features")
    p.add_argument("--weighting", choices=("uniform", "tissue"), default="uniform",
                   help="mean pool: equal patch weights (default) or each patch's usable-tissue "
                   "fraction (recorded by 'wsikit features')")
    add_weights_flag(p)
    p.add_argument("--device", default="auto", help="TITAN: auto (default: the GPU when "
                   "CUDA is available, else the CPU), cpu, cuda or cuda:N")
    p.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_slide_embedding_cmd)
