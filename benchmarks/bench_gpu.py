"""wsikit on a GPU: parity, model speed against the FLOP ceiling, the patch pipeline, TITAN at
50k patches, exact search and the batch engine on CUDA, in one prepared run.

Written for a lent H200 (one ``run`` of the device tool, under 10 minutes), and runnable on a
CPU at a tiny size (``--tiny``; ``tests/features/test_bench_gpu_script.py`` runs it) so the
script is tested where CI runs. ``--tiny`` runs every section in about a minute on two CPU
cores: small inputs, and a ViT-S (:data:`TINY_PATCH_MODEL`, random weights) standing in for
CONCH v1.5 wherever the section measures speed rather than parity (a ViT-L's random
initialisation alone takes a minute on a CPU); parity checks TITAN's golden, whose weights are
small. Every section is timed and guarded on its own: one that fails records
its error and the others go on; results are written to ``--out`` after every section
(``bench_gpu.json``) and as a table at the end (``bench_gpu.md``).

Sections
--------
``env``       device, driver, torch/CUDA/cuDNN, and the measured bf16 matrix-product rate
              (8192³, the ceiling actually reachable) beside the datasheet's dense peak.
``parity``    CONCH v1.5, Virchow2 and TITAN with the golden weights (the documented rule of
              ``tests/models/golden_rule.py``, published file layout, strict load): float32
              on the device against the reference outputs in ``tests/data/golden``, and the
              fp16/bf16 autocast error against the reference's own reduced-precision error;
              every other registered encoder (random weights): the device's float32 and
              default precision against the CPU's float32 on the same input.
``speed``     CONCH v1.5 at 448 px and Virchow2 at 224 px, batches 128-512, bf16 and fp16,
              eager (timm's SDPA attention: flash kernels under autocast) and
              ``torch.compile``; FLOPs per patch counted by ``torch.utils.flop_counter``
              (matrix products and attention), patches/s × FLOPs/patch over the dense bf16
              peak.
``pipeline``  ``extract_features`` end to end on a generated 40× pyramid (a tiled copy of a
              generated 40× slide, ≥ 20k patches of 512 px at 0.5 µm/px): CPU reader workers,
              and JPEG tiles decoded on the GPU (``decode="device"``, nvJPEG), each against
              the model-only rate at the same batch and precision; the two readers' pixels
              compared.
``titan``     TITAN on 50k patches (CONCH v1.5 features, 768-d, random weights): CUDA time and
              peak memory against the CPU run.
``search``    exact inner-product search of 1M × 2560 vectors: a plain fp16 matrix product +
              top-k on the GPU, and the figure index's ``torch`` search kind
              (:class:`wsikit.evidence._exact_torch.TorchExactIndex`: fp16 scores chunked to
              the free memory, candidates re-scored in float32) against faiss-cpu's
              ``IndexFlatIP``; recall of the top 10 and the top-10 scores' largest difference.
``batch``     ``wsikit batch --devices cuda`` (one worker per device: the multi-GPU code path
              with the one device; then two workers on the one device) and ``--devices cpu``
              on a small generated cohort with the golden CONCH v1.5 weights; features
              compared.

Before a device run: ``benchmarks/fetch_gpu_wheels.sh`` fetches the wheels the device must be
given (:data:`CARRY`, Python 3.12 manylinux x86_64, into ``.whl/``, checked against the 64 MiB
carry limit), and ``python benchmarks/bench_gpu.py --check`` says, section by section, whether
every module it needs is installed or carried (exit 1 when one is neither, or the carried
wheels exceed the limit). Run on the device machine: ``python benchmarks/bench_gpu.py --out
$OUT --source PATH`` (``--source``: a generated 40× slide to tile; made with ``--make-source
PATH`` here, where imagecodecs is installed). On a CPU: ``python benchmarks/bench_gpu.py
--tiny``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "models"))  # golden_rule: the weight rule and goldens

import torch  # noqa: E402

#: H200 SXM dense bf16/fp16 tensor-core peak (datasheet), TFLOP/s
PEAK_TFLOPS = 989.0
#: the reference's own reduced-precision error against float32 (tests/data/golden/README.md)
REFERENCE_ERROR = {"conch_v1_5": {"fp16": 5.8e-4, "bf16": 5.2e-3},
                   "virchow2": {"fp16": 1.1e-3},  # (the golden README gives no bf16 figure)
                   "titan": {"fp16": 7e-4, "bf16": 5e-3}}
FP32_TOL = 1e-4
#: ``--tiny``: the ViT-S (random weights) that stands in for CONCH v1.5 where a section
#: measures speed or runs the pipeline, not parity
TINY_PATCH_MODEL = "kaiko_vits16"


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def rel_err(got: Any, expected: Any) -> float:
    got = np.asarray(got, np.float64)
    expected = np.asarray(expected, np.float64)
    return float(np.abs(got - expected).max() / np.abs(expected).max())


class Results:
    """Sections' results, saved after each section (a later crash loses nothing)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.data: dict[str, Any] = {}
        out.mkdir(parents=True, exist_ok=True)

    def run(self, name: str, fn: Callable[..., Any], *args: Any,
            until: float | None = None, **kwargs: Any) -> dict[str, Any]:
        """``fn(rec, *args, **kwargs)`` filling the section's record ``rec``; skipped past
        ``until`` (monotonic); an exception is recorded and the run goes on."""
        rec: dict[str, Any] = {}
        self.data[name] = rec
        if until is not None and time.monotonic() > until:
            rec["skipped"] = "out of time"
            print(f"== {name}: skipped (out of time)", flush=True)
            self.save()
            return rec
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        try:
            fn(rec, *args, **kwargs)
        except Exception as exc:  # a failed section is recorded; the run goes on
            rec["error"] = f"{type(exc).__name__}: {exc}"
            rec["traceback"] = traceback.format_exc()[-3000:]
            print(rec["traceback"], flush=True)
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 1)
            _free()
            self.save()
        return rec

    def save(self) -> None:
        (self.out / "bench_gpu.json").write_text(json.dumps(self.data, indent=1, default=str))


#: modules each section needs beyond torch (imagecodecs: tifffile writes the tiled JPEG
#: pyramids of ``pipeline`` and ``batch``; its absence cost the first H200 run both sections)
NEEDS = {"env": ("timm",), "parity": ("timm", "safetensors"),
         "speed": ("timm",), "pipeline": ("imagecodecs", "simplejpeg", "torchvision", "h5py"),
         "titan": ("safetensors",), "search": ("faiss",),
         "batch": ("imagecodecs", "simplejpeg", "openslide", "h5py"), "zoo": ("timm",)}


#: the wheels a device run is given (pip requirement -> the module it provides): what the
#: first H200 run found missing on the device image (``benchmarks/results/gpu_h200.md``: it
#: carried simplejpeg, openslide, jsonschema, faiss-cpu and timm, and lacked imagecodecs, which
#: cost it the pipeline and batch sections). Python 3.12 manylinux x86_64 wheels, fetched by
#: ``benchmarks/fetch_gpu_wheels.sh`` into ``.whl/``: 52.6 MB (50.2 MiB) in all, imagecodecs
#: 27.7 MB and faiss-cpu 18.8 MB the largest (faiss-gpu's CUDA 12 libraries would not fit).
CARRY = {"timm==1.0.31": "timm", "imagecodecs==2026.11.11": "imagecodecs",
         "simplejpeg==1.9.0": "simplejpeg", "openslide-python==1.4.7": "openslide",
         "openslide-bin==4.0.1.2": "openslide_bin", "jsonschema==4.26.0": "jsonschema",
         "faiss-cpu==1.15.1": "faiss"}
#: bytes the device tool carries with the working tree (64 MiB), less room for the tree
CARRY_LIMIT = 56 * 2**20
WHEELS = ROOT / ".whl"


def preflight(sections: list[str]) -> dict[str, list[str]]:
    """Sections whose modules are missing, with the module names (checked before any work)."""
    import importlib.util

    missing = {sec: [m for m in NEEDS.get(sec, ()) if importlib.util.find_spec(m) is None]
               for sec in sections}
    return {sec: mods for sec, mods in missing.items() if mods}


def check_carry(sections: list[str], wheels: Path = WHEELS) -> dict[str, Any]:
    """Whether a device run can start: per section the modules neither installed nor in a
    carried wheel (``unmet``), the carried wheels found in ``wheels`` and their total size
    against :data:`CARRY_LIMIT`. ``ok`` is true when nothing is unmet and the wheels fit."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    # a wheel's distribution name, normalised as pip writes it (openslide_python-1.4-...)
    dists = {w.name.split("-")[0].lower().replace("_", "-") for w in found}
    carried = {mod for req, mod in CARRY.items()
               if req.split("==")[0].lower().replace("_", "-") in dists}
    unmet = {sec: [m for m in mods if m not in carried]
             for sec, mods in preflight(sections).items()}
    unmet = {sec: mods for sec, mods in unmet.items() if mods}
    size = sum(w.stat().st_size for w in found)
    return {"unmet": unmet, "wheels": [w.name for w in found], "carry_bytes": size,
            "carry_limit": CARRY_LIMIT, "ok": not unmet and size <= CARRY_LIMIT}


# -- env -------------------------------------------------------------------------------------

def env_info(rec: dict[str, Any], dev: torch.device, tiny: bool) -> None:
    import timm

    rec.update(torch=torch.__version__, cuda=torch.version.cuda, timm=timm.__version__,
               cpus=os.cpu_count(), python=platform.python_version(),
               cudnn=torch.backends.cudnn.version() if dev.type == "cuda" else None)
    if dev.type == "cuda":
        rec["device"] = torch.cuda.get_device_name(dev)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            rec["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            ).stdout.strip()
        n = 8192
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        _sync()
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        for _ in range(10):
            a @ b
        ev1.record()
        _sync()
        rec["matmul_bf16_tflops"] = 10 * 2 * n**3 / (ev0.elapsed_time(ev1) / 1e3) / 1e12
    else:
        rec["device"] = platform.processor() or platform.machine()
    rec["tiny"] = tiny


# -- parity ----------------------------------------------------------------------------------

def _golden_encoder(name: str, folder: Path, dev: torch.device) -> Any:
    from golden_rule import rule_weights, save_published

    from wsikit.models import create_encoder

    path = folder / name
    if not path.exists():
        save_published(name, rule_weights(name), path)
    files = [p for p in path.iterdir() if p.is_file()]
    return create_encoder(name, weights=str(files[0]), device=str(dev))


def parity(rec: dict[str, Any], dev: torch.device, work: Path, tiny: bool) -> None:
    from golden_rule import golden

    precisions = ("fp32", "fp16", "bf16")
    # tiny: TITAN only (a ViT-L/ViT-H's random initialisation and 448-px forward take
    # minutes on a CPU; tests/models checks their goldens there)
    for name in () if tiny else ("conch_v1_5", "virchow2"):
        g = golden(name)
        enc = _golden_encoder(name, work / "golden", dev)
        row: dict[str, Any] = {}
        images = g["images"][:1] if tiny else g["images"]
        for prec in precisions:
            enc.precision = prec
            got = enc.encode(images)
            err = rel_err(got, g["embedding"][:len(images)])
            ref_err = REFERENCE_ERROR[name].get(prec)
            bound = FP32_TOL if prec == "fp32" else None if ref_err is None else 2 * ref_err
            row[prec] = {"rel_err": err, "bound": bound,
                         "ok": None if bound is None else err < bound}
        rec[name] = row
        precisions = ("fp32", "fp16", "bf16")
        del enc
        _free()
    g = golden("titan_p512")
    gw = golden("titan_wide")
    titan = _golden_encoder("titan", work / "golden", dev)
    row = {}
    for prec in precisions:
        out = titan.encode_slide(gw["features"] if prec != "fp32" else g["features"],
                                 gw["coords"] if prec != "fp32" else g["coords"],
                                 int((gw if prec != "fp32" else g)["patch_size_lv0"]),
                                 precision=prec)
        ref = gw if prec != "fp32" else g
        e1 = rel_err(out.slide_embedding, ref["slide_embedding"])
        e2 = rel_err(out.attention, ref["attention"])
        bound = FP32_TOL if prec == "fp32" else 2 * REFERENCE_ERROR["titan"][prec]
        row[prec] = {"rel_err": e1, "attention_rel_err": e2, "bound": bound,
                     "ok": e1 < bound and e2 < (bound if prec == "fp32" else 2 * bound)}
    rec["titan"] = row
    del titan
    _free()


# -- zoo -------------------------------------------------------------------------------------

CORE = ("conch_v1_5", "virchow2", "titan", "heuristic")


def zoo(rec: dict[str, Any], dev: torch.device, work: Path, tiny: bool,
        deadline: float, only: list[str] | None = None) -> None:
    """Every other registered image encoder. Where the zoo's goldens exist
    (``tests/models/test_zoo.py``'s ``check_zoo_golden``: rule weights in the published
    layout, the reference loader's features on a real H&E tile), float32 and the default
    precision on the device against the golden; else the device's float32 against the CPU's on
    the same random weights. Then, at the real geometry with random weights initialised on the
    device, the default precision against float32 and patches/s at the default precision."""
    import copy

    from wsikit.models import create_encoder, list_encoders
    from wsikit.models.configs import get_config

    try:
        from test_zoo import check_zoo_golden  # tests/models, on sys.path above
    except ImportError:
        check_zoo_golden = None
    rng = np.random.default_rng(0)
    for name in list_encoders():
        cfg = get_config(name)
        if name in CORE or cfg.role == "slide" or cfg.heuristic or only and name not in only:
            continue
        if time.monotonic() > deadline:
            rec[name] = "skipped: out of time"
            continue
        row: dict[str, Any] = {}
        rec[name] = row
        try:
            default = cfg.precision if cfg.precision != "fp32" else "bf16"
            row["default_precision"] = default
            if check_zoo_golden is not None:
                for prec in ("fp32", default):
                    errs = check_zoo_golden(name, work / "zoo" / name, device=str(dev),
                                            precision=prec)
                    row[f"golden_{prec}"] = errs["features"]
                    row["preprocess_vs_reference"] = errs["preprocess"]
            torch.manual_seed(0)
            with torch.device(dev):  # initialised on the device: seconds, not minutes
                enc = create_encoder(name, weights="random", device=str(dev))
            px = 32 if tiny else enc.config.input_px
            x = rng.integers(0, 256, (2, px, px, 3), dtype=np.uint8)
            enc.precision = "fp32"
            fp32 = enc.encode(x)
            if check_zoo_golden is None and dev.type == "cuda":
                cpu = copy.deepcopy(enc).cpu()
                row["cuda_fp32_vs_cpu"] = rel_err(fp32, cpu.encode(x))
                del cpu
            enc.precision = default
            row["default_vs_fp32"] = rel_err(enc.encode(x), fp32)
            batch = 4 if tiny else 128
            xb = torch.randn(batch, 3, px, px, device=dev)
            row["patches_per_s"] = time_forward(functools.partial(_forward, enc, dev, default),
                                                xb, 0.2 if tiny else 1.0, dev)
            row["input_px"], row["dim"] = px, enc.config.dim
            print(f"  {name}: {row}", flush=True)
            del enc, xb
        except Exception as exc:  # one entry's failure is recorded, the rest go on
            row["error"] = f"{type(exc).__name__}: {exc}"
        _free()


# -- speed -----------------------------------------------------------------------------------

def flops_per_patch(enc: Any, px: int, dev: torch.device) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    from wsikit.models.registry import autocast_for

    x = torch.randn(1, 3, px, px, device=dev)
    with torch.no_grad(), autocast_for(dev, "bf16" if dev.type == "cuda" else "fp32"), \
            FlopCounterMode(display=False) as fc:
        enc(x)
    return float(fc.get_total_flops())


def _forward(model: Any, dev: torch.device, precision: str, x: torch.Tensor) -> Any:
    from wsikit.models.registry import autocast_for

    with torch.inference_mode(), autocast_for(dev, precision):
        return model(x)


def time_forward(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, seconds: float,
                 dev: torch.device) -> float:
    """Patches/s of ``fn`` on the device-resident batch ``x`` (events, after warm-up)."""
    fn(x)
    fn(x)
    _sync()
    n, t0 = 0, time.perf_counter()
    while True:
        fn(x)
        n += x.shape[0]
        if n % (4 * x.shape[0]) == 0:
            _sync()
            if time.perf_counter() - t0 > seconds:
                break
    _sync()
    return n / (time.perf_counter() - t0)


def speed(rec: dict[str, Any], dev: torch.device, tiny: bool, *, compile_: bool,
          deadline: float) -> None:
    """Eager runs (``compile_=False``) or the ``torch.compile`` runs (``compile_=True``)."""
    from wsikit.models import create_encoder

    models = [(TINY_PATCH_MODEL, 64)] if tiny else [("conch_v1_5", 448), ("virchow2", 224)]
    batches = (4,) if tiny else (128, 256, 512)
    precisions = ("fp32",) if tiny else ("bf16", "fp16")
    seconds = 0.3 if tiny else 2.0
    for name, px in models:
        if compile_:
            continue
        torch.manual_seed(0)
        enc = create_encoder(name, weights="random", device=str(dev))
        fl = flops_per_patch(enc, px, dev)
        row: dict[str, Any] = {"gflop_per_patch": fl / 1e9, "input_px": px, "runs": []}
        rec[name] = row
        for batch in batches:
            x = torch.randn(batch, 3, px, px, device=dev)
            for prec in precisions:
                if time.monotonic() > deadline:
                    break

                rate = time_forward(functools.partial(_forward, enc, dev, prec), x, seconds,
                                    dev)
                row["runs"].append({"batch": batch, "precision": prec, "compiled": False,
                                    "patches_per_s": rate,
                                    "share_of_peak": rate * fl / 1e12 / PEAK_TFLOPS})
                print(f"  {name} b{batch} {prec} eager: {rate:.1f} patches/s "
                      f"({100 * rate * fl / 1e12 / PEAK_TFLOPS:.1f} % of peak)", flush=True)
            del x
            _free()
        rec["eager_done"] = True
        del enc
        _free()
    if not compile_:
        return
    for name, px in models[:1]:  # the ceiling target is CONCH v1.5's
        if time.monotonic() > deadline:
            rec[f"{name}_compile"] = "skipped: out of time"
            continue
        torch.manual_seed(0)
        enc = create_encoder(name, weights="random", device=str(dev))
        batch = 4 if tiny else 256
        fl = flops_per_patch(enc, px, dev)
        rec[name] = {"gflop_per_patch": fl / 1e9, "input_px": px, "runs": []}
        compiled = torch.compile(enc)
        x = torch.randn(batch, 3, px, px, device=dev)
        for prec in precisions:
            if time.monotonic() > deadline:
                break

            cfwd = functools.partial(_forward, compiled, dev, prec)
            t0 = time.perf_counter()
            cfwd(x)
            _sync()
            ctime = time.perf_counter() - t0
            rate = time_forward(cfwd, x, seconds, dev)
            rec[name]["runs"].append({"batch": batch, "precision": prec, "compiled": True,
                                      "compile_s": ctime, "patches_per_s": rate,
                                      "share_of_peak": rate * fl / 1e12 / PEAK_TFLOPS})
            print(f"  {name} b{batch} {prec} compiled ({ctime:.0f} s): {rate:.1f} patches/s "
                  f"({100 * rate * fl / 1e12 / PEAK_TFLOPS:.1f} % of peak)", flush=True)
        del enc, compiled, x
        _free()


# -- pipeline --------------------------------------------------------------------------------

def make_source(path: Path, size: int = 4096) -> Path:
    """A generated 40× slide (0.25 µm/px, levels 1/4/16, 256-px JPEG tiles) to tile."""
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    spec = SyntheticSpec(size, size, mpp=0.25, tissue=[(size / 2, size / 2, size * 0.46,
                                                         size * 0.46)],
                         dense=[(size // 4, size // 4, size // 4, size // 4)])
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_synthetic_slide(path, spec, downsamples=(1, 4, 16), tile=256, quality=80)


def tile_slide(source: Path, out: Path, reps: int) -> Path:
    """``source`` repeated ``reps × reps`` times: every level built from the source level's
    stored tiles (no re-encoding), so a 20k-patch pyramid takes seconds to write."""
    import tifffile

    from wsikit.slide.tiles import TileReader

    with TileReader(source, cache_mb=0) as tr, tifffile.TiffFile(source) as tif:
        pages = [tif.pages[i] for i in range(len(tr.levels))]
        w0, h0 = tr.levels[0].width * reps, tr.levels[0].height * reps
        out.parent.mkdir(parents=True, exist_ok=True)
        with tifffile.TiffWriter(out, bigtiff=True) as tw:
            for i, lv in enumerate(tr.levels):
                if lv.width % lv.tile_width or lv.height % lv.tile_height:
                    if i == 0:
                        raise ValueError(f"{source}: level 0 is not a whole number of tiles")
                    break  # the smaller levels cannot be repeated without re-encoding
                cols, rows = lv.tiles_across, lv.tiles_down

                def tiles(i: int = i, cols: int = cols, rows: int = rows) -> Iterator[bytes]:
                    for r in range(rows * reps):
                        for c in range(cols * reps):
                            yield tr.raw_tile(i, c % cols, r % rows)

                desc = pages[i].description.replace(
                    f"{tr.levels[0].width}x{tr.levels[0].height}", f"{w0}x{h0}")
                desc = desc.replace(f"-> {lv.width}x{lv.height}",
                                    f"-> {lv.width * reps}x{lv.height * reps}")
                tw.write(tiles(), shape=(lv.height * reps, lv.width * reps, 3), dtype=np.uint8,
                         tile=(lv.tile_height, lv.tile_width), compression="jpeg",
                         photometric=pages[i].photometric, subsampling=(2, 2),
                         description=desc, metadata=None, subfiletype=0 if i == 0 else 1)
    return out


def tiled_grid(source: Path, big: Path, reps: int, *, target_mpp: float, patch_px: int) -> Any:
    """The source's patch grid repeated over the tiled copy (the segmentation of the copy
    would find the same tissue)."""
    from wsikit.patches.grid import make_grid
    from wsikit.slide import open_slide
    from wsikit.tissue.mask import segment_tissue

    with open_slide(source) as s:
        g = make_grid(s, segment_tissue(s), target_mpp=target_mpp, patch_px=patch_px)
        w, h = s.dimensions
    offs = np.array([(c * w, r * h) for r in range(reps) for c in range(reps)], np.int64)
    coords = (g.coords[None] + offs[:, None]).reshape(-1, 2)
    order = np.lexsort((coords[:, 0], coords[:, 1]))
    return dataclasses.replace(g, coords=coords[order], tissue=np.tile(g.tissue, reps * reps)
                               [order], slide_name=big.stem,
                               level0_size=(w * reps, h * reps))


def pipeline(rec: dict[str, Any], dev: torch.device, work: Path, source: Path, tiny: bool,
             model_rates: dict[str, Any], deadline: float) -> None:
    from wsikit.features.extract import extract_features
    from wsikit.models import create_encoder
    from wsikit.slide.device_decode import compare_with_cpu_reader

    reps = 2 if tiny else int(rec.get("reps", 0)) or 0
    target_mpp, patch_px = (0.5, 128) if tiny else (0.5, 512)
    if not reps:  # enough copies for >= 20k patches
        one = tiled_grid(source, work / "probe.svs", 1, target_mpp=target_mpp,
                         patch_px=patch_px)
        reps = math.ceil(math.sqrt(20000 / max(1, len(one))))
    t0 = time.perf_counter()
    big = tile_slide(source, work / f"tiled{reps}x{reps}.svs", reps)
    rec["slide_write_s"] = time.perf_counter() - t0
    rec["slide_gb"] = big.stat().st_size / 1e9
    grid = tiled_grid(source, big, reps, target_mpp=target_mpp, patch_px=patch_px)
    if tiny:  # a few patches test the code
        grid = dataclasses.replace(grid, coords=grid.coords[:12], tissue=grid.tissue[:12])
    rec.update(reps=reps, patches=len(grid), level0=list(grid.level0_size))
    print(f"  {big.name}: {len(grid)} patches, {rec['slide_gb']:.2f} GB, "
          f"written in {rec['slide_write_s']:.0f} s", flush=True)
    torch.manual_seed(0)
    enc = create_encoder(TINY_PATCH_MODEL if tiny else "conch_v1_5", weights="random",
                         device=str(dev))
    rec["encoder"] = enc.config.name
    px = 448
    if tiny:
        px = 64
        enc.config = dataclasses.replace(enc.config, input_px=px, patch_px=patch_px,
                                         target_mpp=target_mpp)
    rec["pixels_device_vs_reader"] = compare_with_cpu_reader(
        big, grid.boxes[:: max(1, len(grid) // 64)][:64], px, patch_px=patch_px, device=dev)
    batch = 4 if tiny else 256
    prec = "fp32" if tiny else "bf16"
    workers = 1 if tiny else max(1, (os.cpu_count() or 2) - 1)
    model_rate = next((r["patches_per_s"] for r in model_rates.get("runs", [])
                       if r["batch"] == batch and r["precision"] == prec
                       and not r["compiled"]), None)
    if model_rate is None:  # the speed section did not run: measure it here, same settings
        x = torch.randn(batch, 3, px, px, device=dev)
        model_rate = time_forward(functools.partial(_forward, enc, dev, prec), x,
                                  0.3 if tiny else 3.0, dev)
        del x
    rec["model_only_patches_per_s"] = model_rate
    rec["batch"], rec["precision"], rec["workers"] = batch, prec, workers
    runs = rec.setdefault("runs", {})
    feats: dict[str, np.ndarray] = {}
    for decode in ("reader", "device"):
        if time.monotonic() > deadline:
            runs[decode] = "skipped: out of time"
            continue
        t0 = time.perf_counter()
        emb = extract_features(big, grid, enc, device=str(dev), batch_size=batch,
                               workers=workers, precision=prec, progress=False, decode=decode,
                               threads=os.cpu_count())
        dt = time.perf_counter() - t0
        rate = len(emb) / dt
        feats[decode] = emb.features
        runs[decode] = {"patches_per_s": rate, "seconds": dt, "reader": emb.attrs["reader"],
                        "share_of_model": rate / model_rate if model_rate else None,
                        "finite": bool(np.isfinite(emb.features).all())}
        print(f"  end to end, decode={decode}: {rate:.1f} patches/s"
              + (f" = {100 * rate / model_rate:.0f} % of the model-only rate"
                 if model_rate else ""), flush=True)
    if len(feats) == 2:
        rec["features_device_vs_reader_rel_err"] = rel_err(feats["device"], feats["reader"])


# -- titan -----------------------------------------------------------------------------------

def _titan_run(n: int, device: str, threads: int, precision: str) -> dict[str, float]:
    from wsikit.models import create_encoder

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = create_encoder("titan", weights="random", device=device)
    rng = np.random.default_rng(0)
    cols = int(math.ceil(math.sqrt(n * 1.3)))
    cells = np.stack(np.meshgrid(np.arange(cols), np.arange(cols)), -1).reshape(-1, 2)
    cells = cells[rng.permutation(len(cells))[:n]]
    coords = (cells * 512).astype(np.int64)
    feats = rng.standard_normal((n, 768)).astype(np.float32)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        m.encode_slide(feats[:1000], coords[:1000], 512, precision=precision)  # warm-up
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out = m.encode_slide(feats, coords, 512, precision=precision)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    res = {"seconds": dt, "finite": float(np.isfinite(out.slide_embedding).all())}
    if device.startswith("cuda"):
        res["peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
    else:
        import resource

        res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    np.save(os.environ.get("TITAN_EMB_OUT", os.devnull), out.slide_embedding)
    return res


def titan(rec: dict[str, Any], dev: torch.device, work: Path, tiny: bool,
          cpu_timeout: float) -> None:
    n = 500 if tiny else 50000
    rec["patches"] = n
    if dev.type == "cuda":
        # a tenth of the patches first: attention is quadratic, so 100x that predicts 50k
        probe = _titan_run(n // 10, "cuda", 1, "fp16")
        rec["cuda_fp16_probe"] = {**probe, "patches": n // 10}
        if probe["seconds"] * 100 > 120:
            rec["cuda"] = f"skipped: {n // 10} patches took {probe['seconds']:.1f} s"
        for prec in () if "cuda" in rec else ("fp16", "fp32"):
            os.environ["TITAN_EMB_OUT"] = str(work / f"titan_cuda_{prec}.npy")
            rec[f"cuda_{prec}"] = _titan_run(n, "cuda", 1, prec)
            print(f"  TITAN {n} patches on CUDA {prec}: {rec[f'cuda_{prec}']}", flush=True)
            _free()
    if cpu_timeout <= 0:
        return
    # the CPU run in its own process (its peak RSS is its own; a time limit stops it)
    code = (f"import json,sys; sys.path.insert(0, {str(HERE)!r}); import bench_gpu as b; "
            f"print('RESULT', json.dumps(b._titan_run({n}, 'cpu', {os.cpu_count() or 1}, "
            "'fp32')))")
    env = {**os.environ, "TITAN_EMB_OUT": str(work / "titan_cpu.npy")}
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=cpu_timeout, env=env)
        line = [s for s in p.stdout.splitlines() if s.startswith("RESULT ")]
        rec["cpu_fp32"] = json.loads(line[0][7:]) if line else {"error": p.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        rec["cpu_fp32"] = {"seconds": f"> {cpu_timeout:.0f} (stopped)"}
    print(f"  TITAN {n} patches on CPU ({os.cpu_count()} threads): {rec['cpu_fp32']}",
          flush=True)
    if (work / "titan_cpu.npy").exists() and (work / "titan_cuda_fp32.npy").exists():
        rec["cuda_fp32_vs_cpu_rel_err"] = rel_err(np.load(work / "titan_cuda_fp32.npy"),
                                                  np.load(work / "titan_cpu.npy"))
        rec["cuda_fp16_vs_cpu_rel_err"] = rel_err(np.load(work / "titan_cuda_fp16.npy"),
                                                  np.load(work / "titan_cpu.npy"))


# -- search ----------------------------------------------------------------------------------

def _plain_topk(q: torch.Tensor, base: torch.Tensor, k: int) -> Any:
    return torch.topk(q @ base.T, k, dim=1)


def search(rec: dict[str, Any], dev: torch.device, tiny: bool) -> None:
    """A plain fp16 matrix product + top-k on the device, and the figure index's ``torch``
    search kind, against faiss-cpu's float32 ``IndexFlatIP`` on the same vectors."""
    import faiss

    from wsikit.evidence._exact_torch import TorchExactIndex, search_budget

    n, d, nq, k = (20000, 256, 16, 10) if tiny else (1_000_000, 2560, 256, 10)
    rec.update(vectors=n, dim=d, queries=nq, k=k)
    gen = torch.Generator(device=dev).manual_seed(0)
    base = torch.nn.functional.normalize(
        torch.randn(n, d, device=dev, generator=gen), dim=1).half()
    q = torch.nn.functional.normalize(torch.randn(nq, d, device=dev, generator=gen), dim=1)
    q = q.half()
    rec["faiss_gpu"] = bool(hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0)

    def timed(fn: Callable[[], Any], reps: int = 5) -> tuple[float, Any]:
        fn()
        _sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn()
        _sync()
        return (time.perf_counter() - t0) / reps, out

    plain_ids = None
    if dev.type == "cuda":
        rec["plain_fp16_s_per_batch"], (_, ids) = timed(
            functools.partial(_plain_topk, q, base, k))
        plain_ids = ids.cpu().numpy()
    base_cpu = base.float().cpu().numpy()
    q_cpu = q.float().cpu().numpy()
    del base
    _free()
    t0 = time.perf_counter()
    exact = TorchExactIndex(base_cpu, device=dev)
    rec["torch_index_build_s"] = time.perf_counter() - t0
    rec["torch_index"] = repr(exact)
    rec["torch_budget_bytes"] = search_budget(dev)
    rec["torch_s_per_batch"], (t_sims, t_ids) = timed(
        functools.partial(exact.search, q_cpu, k))
    del exact
    _free()
    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(d)
    index.add(base_cpu)
    rec["cpu_add_s"] = time.perf_counter() - t0
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    t0 = time.perf_counter()
    cpu_sims, cpu_ids = index.search(q_cpu, k)
    rec["cpu_faiss_s_per_batch"] = time.perf_counter() - t0

    def recall(ids: np.ndarray) -> float:
        return float(np.mean([len(set(a) & set(b)) / k
                              for a, b in zip(ids, cpu_ids, strict=True)]))

    rec["torch_recall_at_10"] = recall(t_ids)
    rec["torch_max_score_diff"] = float(np.abs(t_sims - cpu_sims).max())
    rec["torch_speedup"] = rec["cpu_faiss_s_per_batch"] / rec["torch_s_per_batch"]
    if plain_ids is not None:
        rec["plain_recall_at_10"] = recall(plain_ids)
        rec["plain_speedup"] = rec["cpu_faiss_s_per_batch"] / rec["plain_fp16_s_per_batch"]
    rec["ok"] = rec["torch_recall_at_10"] >= 0.99 and rec["torch_max_score_diff"] < 1e-5
    del index, base_cpu


# -- batch -----------------------------------------------------------------------------------

def batch(rec: dict[str, Any], dev: torch.device, work: Path, source: Path, tiny: bool) -> None:
    import h5py

    cohort = work / "cohort"
    cohort.mkdir(parents=True, exist_ok=True)
    for i, reps in enumerate((1, 2)):
        dst = cohort / f"slide{i}.svs"
        if not dst.exists():
            tile_slide(source, dst, reps)
    # tiny: the weight-free encoder (the batch engine and CLI under test, not a ViT-L on a CPU)
    encoder = ["--encoder", "heuristic"]
    if not tiny:
        from golden_rule import rule_weights, save_published

        wdir = work / "golden" / "conch_v1_5"
        if not wdir.exists():
            save_published("conch_v1_5", rule_weights("conch_v1_5"), wdir)
        weights = next(p for p in wdir.iterdir() if p.is_file())
        encoder = ["--encoder", "conch_v1_5", "--weights", f"conch_v1_5={weights}"]
    extra = ["--target-mpp", "4.0", "--patch-px", "128"] if tiny else []
    name = "heuristic" if tiny else "conch_v1_5"
    feats: dict[str, dict[str, np.ndarray]] = {}
    # cuda: one worker on the device; cuda_x2: two workers sharing it
    runs = {"cuda": ["cuda", "1"], "cuda_x2": ["cuda", "2"], "cpu": ["cpu", "1"]}
    for label in (["cuda", "cuda_x2", "cpu"] if dev.type == "cuda" else ["cpu"]):
        devices, workers = runs[label]
        out = work / f"job_{label}"
        cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(out),
               "--devices", devices, "--workers", workers, *encoder,
               "--steps", "segment,patch,features", "--no-progress", *extra]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
        rec[label] = {"rc": p.returncode, "seconds": time.perf_counter() - t0,
                      "workers": int(workers), "tail": (p.stdout + p.stderr)[-1500:]}
        feats[label] = {}
        for f in sorted(out.rglob(f"features_{name}/*.h5")):
            with h5py.File(f, "r") as h:
                feats[label][f.stem] = h["features"][()]
                rec[label].setdefault("precision", str(h["features"].attrs.get("precision")))
        rec[label]["slides"] = len(feats[label])
        rec[label]["patches"] = int(sum(len(v) for v in feats[label].values()))
        print(f"  batch --devices {devices} --workers {workers}: rc {p.returncode}, "
              f"{rec[label]['patches']} patches in {rec[label]['seconds']:.0f} s", flush=True)
    rec["bound"] = 2 * REFERENCE_ERROR["conch_v1_5"]["fp16"]
    for label in ("cuda", "cuda_x2"):
        if feats.get(label) and feats[label].keys() == feats["cpu"].keys():
            errs = {k: rel_err(feats[label][k], feats["cpu"][k]) for k in feats["cpu"]}
            rec[f"{label}_vs_cpu_rel_err"] = errs
            rec[f"{label}_ok"] = all(e < rec["bound"] for e in errs.values())


# -- report ----------------------------------------------------------------------------------

def report(data: dict[str, Any]) -> str:
    env = data.get("env", {})
    lines = [f"# wsikit on a GPU ({env.get('device')})", "",
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
             f"timm {env.get('timm')}, {env.get('cpus')} CPUs; nvidia-smi: "
             f"{env.get('nvidia_smi')}; measured bf16 matmul (8192³): "
             f"{env.get('matmul_bf16_tflops', float('nan')):.0f} TFLOP/s; peak used for the "
             f"share: {PEAK_TFLOPS:g} TFLOP/s dense bf16 (datasheet).", ""]
    par = data.get("parity", {})
    if par:
        lines += ["## Parity (golden weights; relative error = max|Δ| / max|ref|)", "",
                  "| model | fp32 vs reference | fp16 | bf16 | bound fp32 / fp16 / bf16 |",
                  "|---|---:|---:|---:|---|"]
        for name in ("conch_v1_5", "virchow2", "titan"):
            if name in par:
                r = par[name]
                mark = {True: "✓", False: "✗", None: "(no bound)"}
                lines.append(f"| {name} | " + " | ".join(
                    f"{r[p]['rel_err']:.2e} {mark[r[p]['ok']]}" if p in r else "—"
                    for p in ("fp32", "fp16", "bf16")) + " | " + " / ".join(
                    "—" if p not in r or r[p]["bound"] is None else f"{r[p]['bound']:.1e}"
                    for p in ("fp32", "fp16", "bf16")) + " |")
        for name, r in par.get("others_vs_cpu_fp32", {}).items():
            lines.append(f"| {name} (random weights, vs CPU fp32) | "
                         + " · ".join(f"{p} {v:.2e}" if isinstance(v, float) else f"{p} {v}"
                                      for p, v in r.items()) + " | | | |")
        if "error" in par:
            lines.append(f"\nparity error: {par['error']}")
        lines.append("")
    sp = data.get("speed", {})
    if sp:
        lines += ["## Model speed (device-resident batches)", "",
                  "| model | GFLOP/patch | batch | precision | compiled | patches/s | "
                  "share of peak |", "|---|---:|---:|---|---|---:|---:|"]
        for name in (TINY_PATCH_MODEL, "conch_v1_5", "virchow2"):
            for r in sp.get(name, {}).get("runs", []) if isinstance(sp.get(name), dict) else []:
                lines.append(f"| {name} | {sp[name]['gflop_per_patch']:.1f} | {r['batch']} | "
                             f"{r['precision']} | {'yes' if r['compiled'] else 'no'} | "
                             f"{r['patches_per_s']:.0f} | {100 * r['share_of_peak']:.1f} % |")
        lines.append("")
    pl = data.get("pipeline", {})
    if pl:
        lines += ["## Pipeline (`extract_features`, CONCH v1.5)", "",
                  f"{pl.get('patches')} patches on a {pl.get('level0')} px 40× pyramid "
                  f"({pl.get('slide_gb', 0):.1f} GB), batch {pl.get('batch')}, "
                  f"{pl.get('precision')}, {pl.get('workers')} reader workers; model-only "
                  f"rate {pl.get('model_only_patches_per_s')}.", "",
                  "| decode | patches/s | share of model-only |", "|---|---:|---:|"]
        for k, r in pl.get("runs", {}).items():
            if isinstance(r, dict):
                share = r.get("share_of_model")
                lines.append(f"| {k} | {r['patches_per_s']:.0f} | "
                             f"{'' if share is None else f'{100 * share:.0f} %'} |")
        lines += ["", f"Pixels, device decode vs CPU reader: "
                  f"{pl.get('pixels_device_vs_reader')}; features rel. err "
                  f"{pl.get('features_device_vs_reader_rel_err')}.", ""]
    zoo_rec = data.get("zoo", {})
    rows = {k: v for k, v in zoo_rec.items() if isinstance(v, dict)}
    if rows:
        lines += ["## Every other registered encoder", "",
                  "Golden: the zoo's golden check on the device (rule weights, reference "
                  "loader's features on a real H&E tile; giants at fewer blocks); speed and "
                  "default-vs-fp32 at the real geometry with random weights.", "",
                  "| encoder | input | golden fp32 (or fp32 vs CPU) | default precision | "
                  "golden at default | default vs fp32 | patches/s |",
                  "|---|---:|---:|---|---:|---:|---:|"]
        for k, r in rows.items():
            if "error" in r:
                lines.append(f"| {k} | error: {r['error'][:120]} | | | | |")
                continue
            nan = float("nan")
            dp = r.get("default_precision")
            lines.append(f"| {k} | {r.get('input_px')} | "
                         f"{r.get('golden_fp32', r.get('cuda_fp32_vs_cpu', nan)):.1e} | "
                         f"{dp} | {r.get(f'golden_{dp}', nan):.1e} | "
                         f"{r.get('default_vs_fp32', nan):.1e} | "
                         f"{r.get('patches_per_s', nan):.0f} |")
        lines.append("")
    for name in ("titan", "search", "batch"):
        if name in data:
            shown = {k: v for k, v in data[name].items() if k not in ("traceback",)}
            lines += [f"## {name}", "", "```", json.dumps(shown, indent=1, default=str)[:3000],
                      "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="CPU-sized run that tests the script")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_gpu_out")))
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default out/work)")
    ap.add_argument("--source", type=Path, help="a generated 40× slide to tile")
    ap.add_argument("--make-source", type=Path, help="write the source slide here and stop")
    ap.add_argument("--sections",
                    default="env,parity,speed,pipeline,titan,search,batch,zoo")
    ap.add_argument("--budget", type=float, default=540.0,
                    help="seconds for the whole run; later sections are skipped past it")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--check", action="store_true",
                    help="only check that every section's modules are installed or carried "
                         "(.whl/, benchmarks/fetch_gpu_wheels.sh) within the carry limit, "
                         "and stop (exit 1 if not)")
    ap.add_argument("--titan-cpu", type=float, default=90.0,
                    help="seconds for TITAN's CPU run (0: skip it)")
    ap.add_argument("--zoo", default=None,
                    help="comma-separated encoders of the zoo section (default: every one)")
    args = ap.parse_args(argv)
    sections = args.sections.split(",")
    if args.check:
        state = check_carry(sections)
        for sec in sections:
            mods = state["unmet"].get(sec)
            print(f"check: {sec:<9} " + (f"needs {', '.join(mods)} (neither installed nor "
                                         "carried)" if mods else "ok"), flush=True)
        print(f"check: {len(state['wheels'])} carried wheels in {WHEELS}, "
              f"{state['carry_bytes'] / 2**20:.1f} MiB of {CARRY_LIMIT / 2**20:.0f} MiB: "
              f"{', '.join(state['wheels']) or 'none (run benchmarks/fetch_gpu_wheels.sh)'}",
              flush=True)
        return {"missing": {} if state["ok"] else {**state["unmet"], "carry": state["wheels"]}}
    missing = preflight(sections)
    for sec, mods in missing.items():
        print(f"preflight: section {sec} needs {', '.join(mods)}: skipped", flush=True)
    if args.make_source:
        make_source(args.make_source, 2048 if args.tiny else 4096)
        return {}
    t_start = time.monotonic()
    deadline = t_start + args.budget
    dev = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    work = args.work or (Path("/tmp") / "bench_gpu_work")
    work.mkdir(parents=True, exist_ok=True)
    res = Results(args.out)
    res.data["preflight_missing"] = missing
    sections = [sec for sec in sections if sec not in missing]
    source = args.source
    if source is None and ("pipeline" in sections or "batch" in sections):
        source = make_source(work / "source.svs", 2048 if args.tiny else 4096)
    if "env" in sections:
        res.run("env", env_info, dev, args.tiny)
    if "parity" in sections:
        res.run("parity", parity, dev, work, args.tiny, until=deadline)
    if "speed" in sections:  # eager now; compiled at the end
        res.run("speed", speed, dev, args.tiny, compile_=False, deadline=deadline,
                until=deadline)
    if "pipeline" in sections:
        res.run("pipeline", pipeline, dev, work, source, args.tiny,
                res.data.get("speed", {}).get(TINY_PATCH_MODEL if args.tiny else "conch_v1_5", {}),
                deadline, until=deadline)
    if "titan" in sections:
        res.run("titan", titan, dev, work, args.tiny, until=deadline,
                cpu_timeout=min(args.titan_cpu, max(10.0, deadline - time.monotonic() - 120))
                if args.titan_cpu > 0 else 0.0)
    if "search" in sections:
        res.run("search", search, dev, args.tiny, until=deadline)
    if "batch" in sections:
        res.run("batch", batch, dev, work, source, args.tiny, until=deadline)
    # tiny: no torch.compile (inductor's C++ build alone takes minutes on a CPU; it is the
    # compiler's time, not this script's code)
    if "speed" in sections and not args.no_compile and not args.tiny:
        rec = res.run("speed_compiled", speed, dev, args.tiny, compile_=True,
                      deadline=deadline, until=deadline)
        for name, r in rec.items():  # the compiled runs join the speed table
            if isinstance(r, dict) and "runs" in r and isinstance(
                    res.data.get("speed", {}).get(name), dict):
                res.data["speed"][name]["runs"] += r["runs"]
    if "zoo" in sections:
        res.run("zoo", zoo, dev, work, args.tiny, deadline, until=deadline,
                only=args.zoo.split(",") if args.zoo else [TINY_PATCH_MODEL] if args.tiny
                else None)
    res.data["total_s"] = round(time.monotonic() - t_start, 1)
    res.save()
    md = report(res.data)
    (args.out / "bench_gpu.md").write_text(md + "\n")
    print(md, flush=True)
    return res.data


if __name__ == "__main__":
    sys.exit(1 if main().get("missing") else 0)
