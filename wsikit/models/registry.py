"""Encoder registry: one frozen :class:`EncoderConfig` per model and a timm-like factory.

Every encoder is a :class:`torch.nn.Module` subclass of :class:`Encoder` that takes uint8 RGB
images and does its own resize, centre crop and normalisation on the device, as its config
says, so callers never need model-specific transforms::

    enc = create_encoder("heuristic")            # weight-free, always available
    enc = create_encoder("conch_v1_5")           # real weights (HF cache / local) or WeightsError
    enc = create_encoder("auto", role="patch")   # CONCH v1.5 if its weights are found, else
                                                 # heuristic
    feats = enc.encode(images)                   # (B, H, W, 3) uint8 -> (B, dim) float32

A randomly initialised network is never presented as the real model: building ``conch_v1_5``,
``virchow2`` or ``titan`` without weights raises :class:`~wsikit.errors.WeightsError` unless the
caller asks for ``weights="random"`` (tests and benchmarks), and then :attr:`Encoder.label`
says so.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .._hints import option
from ..errors import ModelError, WeightsError
from .configs import AUTO_PREFERENCE, BUILTIN_CONFIGS, ZOO_CONFIGS, EncoderConfig
from .resample import pil_resize, resize_crop_geometry

__all__ = [
    "BUILTIN_BUILDERS",
    "Encoder",
    "register_encoder",
    "unregister_encoder",
    "create_encoder",
    "list_encoders",
    "get_config",
    "RANDOM_LABEL",
    "autocast_for",
    "resolve_precision",
]

log = logging.getLogger(__name__)

#: What the label of an encoder built with ``weights="random"`` says after its name.
RANDOM_LABEL = "RANDOM WEIGHTS — not a real model"

_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_PRECISION_NAMES = {v: k for k, v in _PRECISIONS.items()}


def resolve_precision(precision: str | torch.dtype | None, device: str | torch.device,
                      default: str = "fp16") -> str:
    """The precision name (``"fp32"``, ``"fp16"``, ``"bf16"``) a model runs at.

    ``None`` means ``default`` on CUDA (float16, as the reference code and TRIDENT run these
    models) and float32 elsewhere. A torch dtype is accepted for its name.
    """
    if isinstance(precision, torch.dtype):
        if precision not in _PRECISION_NAMES:
            raise ModelError(f"precision={precision!r} is not one of {sorted(_PRECISIONS)}")
        return _PRECISION_NAMES[precision]
    if precision is None:
        return default if torch.device(device).type == "cuda" else "fp32"
    if precision not in _PRECISIONS:
        raise ModelError(f"precision={precision!r} is not one of {sorted(_PRECISIONS)}")
    return precision


def autocast_for(device: str | torch.device, precision: str) -> contextlib.AbstractContextManager:
    """``torch.autocast`` in ``precision`` on ``device``; for ``"fp32"``, float32 arithmetic.

    The precision policy: weights always stay float32; reduced precision is autocast only.
    ``"fp32"`` on CUDA also turns TF32 off for the run's matrix products and convolutions
    (cuDNN allows TF32 convolutions by default, about 1e-3 relative off float32), so a float32
    run on a GPU gives float32 results; on a CPU it is a no-op context.
    """
    dev = torch.device(device)
    if precision == "fp32":
        return _no_tf32() if dev.type == "cuda" else contextlib.nullcontext()
    return torch.autocast(device_type=dev.type, dtype=_PRECISIONS[precision])


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    matmul, conv = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = conv


class Encoder(torch.nn.Module):
    """Base class: uint8 RGB images in, ``(B, dim)`` embeddings out.

    Subclasses implement :meth:`forward` on normalised float input of shape
    ``(B, 3, input_px, input_px)``; :meth:`forward_uint8` and :meth:`encode` add the
    transforms derived from :attr:`config`.
    """

    # registered buffers, declared for type checkers (nn.Module.__getattr__ is untyped)
    _mean: torch.Tensor
    _std: torch.Tensor

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.label = config.name
        self.weights_source: str | None = None
        #: SHA-256 of the weight file loaded (None: random or weight-free)
        self.weights_sha256: str | None = None
        #: autocast precision of :meth:`encode` / :meth:`forward_uint8` (weights stay float32)
        self.precision = "fp32"
        self.register_buffer("_mean", torch.empty(1, 3, 1, 1), persistent=False)
        self.register_buffer("_std", torch.empty(1, 3, 1, 1), persistent=False)
        self.reset_buffers()

    def reset_buffers(self) -> set[str]:
        """(Re)fill the non-persistent buffers (the normalisation constants); returns their
        names. Subclasses with buffers of their own extend it (see ``create_encoder``)."""
        with torch.no_grad():
            self._mean.copy_(torch.tensor(self.config.mean).view(1, 3, 1, 1))
            self._std.copy_(torch.tensor(self.config.std).view(1, 3, 1, 1))
        return {"_mean", "_std"}

    @property
    def device(self) -> torch.device:
        """Device of the encoder's buffers."""
        return self._mean.device

    @property
    def preprocessing(self) -> str:
        """The input transform in one line (recorded with the features it makes)."""
        c = self.config
        resize = c.resize_px or c.input_px
        return (f"resize shorter side to {resize} ({c.interpolation}, PIL), centre crop "
                f"{c.input_px}, /255, mean {list(c.mean)}, std {list(c.std)}")

    @property
    def dim(self) -> int:
        """Output dimension."""
        return self.config.dim

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:
        """Resize (shorter side to ``input_px``), centre crop and normalise a uint8 batch.

        torchvision's ``Resize(resize_px or input_px)`` + ``CenterCrop(input_px)`` + ``ToTensor`` +
        ``Normalize`` on PIL images, exactly: the geometry of
        :func:`~wsikit.models.resample.resize_crop_geometry` and PIL's uint8 resampling
        (:func:`~wsikit.models.resample.pil_resize`, integer-exact, on any device).

        Parameters
        ----------
        x : torch.Tensor
            ``(B, 3, H, W)`` uint8 RGB on the encoder's device.

        Returns
        -------
        torch.Tensor
            ``(B, 3, input_px, input_px)`` float32, normalised by ``mean``/``std``.
        """
        if x.ndim != 4 or x.shape[1] != 3:
            raise ModelError(f"{self.config.name}: expected a (B, 3, H, W) uint8 tensor, got "
                             f"shape {tuple(x.shape)}; permute (B, H, W, 3) images with "
                             ".permute(0, 3, 1, 2) or use encode()")
        if x.dtype != torch.uint8:
            raise ModelError(f"{self.config.name}: expected uint8 images, got {x.dtype}; "
                             "pass raw 0-255 RGB, normalisation happens inside")
        px = self.config.input_px
        h, w = (int(v) for v in x.shape[-2:])
        new_h, new_w, _, _ = resize_crop_geometry(h, w, self.config.resize_px or px)
        top, left = int(round((new_h - px) / 2.0)), int(round((new_w - px) / 2.0))
        if (new_h, new_w) != (h, w):
            mode = self.config.interpolation
            if mode == "area":
                x = F.interpolate(x.float(), size=(new_h, new_w), mode="area")
            else:
                x = pil_resize(x, (new_h, new_w), mode)
        x = x[:, :, top:top + px, left:left + px].float()
        return (x / 255.0 - self._mean) / self._std

    def forward_uint8(self, x: torch.Tensor) -> torch.Tensor:
        """Embed a uint8 batch already on the device: ``(B, 3, H, W)`` -> ``(B, dim)``.

        Preprocessing runs in float32; the network under autocast in :attr:`precision`.
        """
        x = self.preprocess(x)
        with autocast_for(x.device, self.precision):
            return self(x)

    @torch.inference_mode()
    def encode(self, images: np.ndarray | torch.Tensor, *, batch_size: int = 64) -> np.ndarray:
        """Embed images: ``(B, H, W, 3)`` uint8 (array or tensor) -> ``(B, dim)`` float32."""
        if isinstance(images, np.ndarray):
            if images.ndim == 3:
                images = images[None]
            if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
                raise ModelError(f"{self.config.name}.encode: expected (B, H, W, 3) uint8 RGB, "
                                 f"got {images.dtype} {images.shape}; convert with "
                                 "np.asarray(img, dtype=np.uint8)[..., :3]")
            images = np.ascontiguousarray(images)
            if not images.flags.writeable:  # torch.from_numpy warns on read-only memory
                images = images.copy()
            images = torch.from_numpy(images)
        if images.ndim == 4 and images.shape[-1] == 3 and images.shape[1] != 3:
            images = images.permute(0, 3, 1, 2)
        out = []
        for start in range(0, images.shape[0], batch_size):
            chunk = images[start:start + batch_size].to(self.device, non_blocking=True)
            out.append(self.forward_uint8(chunk).float().cpu())
        if not out:
            return np.zeros((0, self.config.dim), dtype=np.float32)
        return torch.cat(out).numpy().astype(np.float32, copy=False)

    def extra_repr(self) -> str:
        return f"name={self.config.name!r}, dim={self.config.dim}, label={self.label!r}"


Builder = Callable[[EncoderConfig], Encoder]


@dataclass
class _Entry:
    config: EncoderConfig
    builder: Builder
    loader: Callable[..., None] | None = field(default=None)


_REGISTRY: dict[str, _Entry] = {}

#: Open patch encoders, best first (H-optimus-0 first, as the issue of the zoo asks).
#: name -> ``"module:attribute"`` (in :mod:`wsikit.models`) of each built-in encoder's builder.
#: The built-ins register lazily, as timm's models do: the entry holds the config and the
#: builder's address, and the module (and the weights it needs) is imported on first build, so
#: the registry imports no model module and no model module imports it back in a circle.
BUILTIN_BUILDERS: dict[str, str] = {
    "heuristic": "heuristic:HeuristicEncoder",
    "conch_v1_5": "conch:ConchV15",
    "virchow2": "virchow:Virchow2",
    "titan": "titan:Titan",
    "quiltnet_b32": "clip_vl:build_quiltnet",  # vision-language tower, extra [vlm]
    "quiltnet_b16": "clip_vl:build_quiltnet",
    **{c.name: "zoo:build_zoo" for c in ZOO_CONFIGS},  # the timm-based model zoo
}


@dataclass(frozen=True)
class _LazyBuilder:
    """A built-in builder by its address: imports ``wsikit.models.<module>`` when first called."""

    address: str

    def __call__(self, config: EncoderConfig) -> Encoder:
        module, _, attribute = self.address.partition(":")
        builder = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        model: Encoder = builder(config)
        return model


for _name, _address in BUILTIN_BUILDERS.items():
    _REGISTRY[_name] = _Entry(BUILTIN_CONFIGS[_name], _LazyBuilder(_address))

#: Names registered by wsikit itself (``unregister_encoder`` refuses them).
_BUILTIN_NAMES = frozenset(BUILTIN_BUILDERS)


def register_encoder(config: EncoderConfig, builder: Builder, *, overwrite: bool = False
                     ) -> None:
    """Add an encoder to the registry (``builder(config)`` returns an :class:`Encoder`).

    Registering a name that is taken raises :class:`~wsikit.errors.ModelError` unless it is
    the same config and builder again (a module imported twice) or ``overwrite=True``.
    """
    old = _REGISTRY.get(config.name)
    if old is not None and not overwrite and (old.config != config or old.builder is not builder):
        raise ModelError(f"an encoder named {config.name!r} is already registered; choose "
                         "another name, unregister_encoder() it first, or pass "
                         "overwrite=True to replace it")
    _REGISTRY[config.name] = _Entry(config, builder)


def unregister_encoder(name: str) -> EncoderConfig:
    """Remove an encoder added with :func:`register_encoder`; returns its config.

    wsikit's own encoders cannot be removed (``"auto"`` and the CLI rely on them).
    """
    if name in _BUILTIN_NAMES:
        raise ModelError(f"{name!r} is one of wsikit's own encoders and cannot be "
                         f"unregistered (register_encoder(..., overwrite=True) replaces it)")
    try:
        return _REGISTRY.pop(name).config
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; registered: {list_encoders()}") from None


def list_encoders(role: str | None = None) -> list[str]:
    """Registered encoder names, optionally only those of ``role`` (``any`` matches all roles
    except ``slide``)."""
    if role is None:
        return sorted(_REGISTRY)
    return sorted(n for n, e in _REGISTRY.items()
                  if e.config.role == role or (e.config.role == "any" and role != "slide"))


def get_config(name: str) -> EncoderConfig:
    """The :class:`EncoderConfig` of a registered encoder."""
    try:
        return _REGISTRY[name].config
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; choose one of {list_encoders()} "
                         "(or 'auto')") from None


def _resolve_device(device: str | torch.device) -> torch.device:
    if device == "auto":  # the GPU when there is one
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ModelError(f"{option('device', device)} is not a device torch knows; use cpu, "
                         "cuda, cuda:N or mps") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device={device!r} requested but CUDA is not available; "
                         f"use {option('device', 'cpu')}")
    return dev


def create_encoder(name: str, *, weights: str | None = None, device: str | torch.device = "cpu",
                   precision: str | None = None, dtype: torch.dtype | str | None = None,
                   role: str | None = None) -> Encoder:
    """Build an encoder with its weights, in eval mode, on ``device``.

    Parameters
    ----------
    name : str
        A registered name (see :func:`list_encoders`) or ``"auto"``.
    weights : str or path, optional
        Explicit weight file; ``"random"`` builds an untrained copy (tests and benchmarks only,
        labelled ``RANDOM WEIGHTS``). With ``name="auto"`` it is the file of auto's first
        choice for ``role`` (CONCH v1.5 for patches). Otherwise weights are resolved by
        :func:`wsikit.models.hub.resolve_weights` (env var, config file, Hugging Face cache/hub).
    device : str or torch.device
        Where the model runs (``"auto"``: the GPU when CUDA is available, else the CPU).
    precision : {"fp32", "fp16", "bf16"}, optional
        Autocast precision the model runs at (``model.precision``); default the config's
        (float16) on CUDA, float32 elsewhere. Weights always stay float32: reduced precision
        is autocast, never a cast of the weights (the reference code's policy).
    dtype : torch.dtype or str, optional
        Older spelling of ``precision`` (it no longer casts the weights).
    role : {"patch", "crop", "any", "slide"}, optional
        Only for ``name="auto"`` (default ``"patch"``): which real model to look for.

    Raises
    ------
    WeightsError
        Weights are gated, missing, offline and not cached, or do not match the architecture.
    ModelError
        Unknown name or device.
    """
    if name == "auto":
        if weights is None:
            return _create_auto(role or "patch", device=device, precision=precision,
                                dtype=dtype)
        # a weight file given for "auto" is its first choice's (never silently unused)
        name = AUTO_PREFERENCE[role or "patch"][0]
    config = get_config(name)
    dev = _resolve_device(device)
    prec = resolve_precision(precision if precision is not None else dtype, dev,
                             default=config.precision)
    builder = _REGISTRY[name].builder
    if config.heuristic:
        if weights not in (None, "random"):
            raise ModelError(f"encoder {name!r} is weight-free; do not pass weights={weights!r}")
        model = builder(config)
        model.label = f"{name} (weight-free heuristic, no learned weights)"
        model.weights_source = "none (heuristic)"
    elif weights == "random":
        model = builder(config)
        model.label = f"{name} — {RANDOM_LABEL}"
        model.weights_source = "random"
        log.warning("%s built with random weights: outputs are meaningless (tests only)", name)
    else:
        from .hub import load_into, resolve_weights, weights_sha256

        resolved = resolve_weights(name, weights)
        model = _build_for_loading(builder, config)
        prepare = getattr(model, "prepare_for_weights", None)  # e.g. a config beside them
        if callable(prepare):
            prepare(resolved.path)
        load_into(model, resolved.path, config)
        model.weights_sha256 = weights_sha256(resolved.path)
        model.label = (f"{name} ({config.hub_repo}, weights: {resolved.source}, "
                       f"sha256 {model.weights_sha256})")
        model.weights_source = f"{resolved.source}: {resolved.path}"
    model = model.to(device=dev)
    model.precision = "fp32" if config.heuristic else prec
    return model.eval()


def _build_for_loading(builder: Builder, config: EncoderConfig) -> Encoder:
    """Build a model whose every parameter a strict load will overwrite, skipping the random
    initialisation (seconds for ViT-H): parameters are allocated uninitialised.

    Only for models that define ``reset_buffers() -> set of names`` refilling all their
    non-persistent buffers (which no checkpoint holds); otherwise a normal build.
    """
    with torch.device("meta"):
        model = builder(config)
    reset = getattr(model, "reset_buffers", None)
    transient = {f"{mod}.{b}" if mod else b for mod, m in model.named_modules()
                 for b in m._non_persistent_buffers_set}
    if callable(reset):
        model = model.to_empty(device="cpu")
        if set(reset()) == transient:
            return model
    return builder(config)


def _create_auto(role: str, *, device: str | torch.device, precision: str | None,
                 dtype: torch.dtype | str | None) -> Encoder:
    from .hub import find_weights

    if role not in AUTO_PREFERENCE:
        raise ModelError(f"role={role!r} is not one of {sorted(AUTO_PREFERENCE)}")
    for candidate in AUTO_PREFERENCE[role]:
        found = find_weights(candidate)
        if found is not None:
            log.info("auto encoder for role %r: %s (weights from %s)", role, candidate,
                     found.source)
            return create_encoder(candidate, weights=str(found.path), device=device,
                                  precision=precision, dtype=dtype)
    if role == "slide":
        raise WeightsError("no slide encoder weights found (TITAN: MahmoodLab/TITAN); for a "
                           "weight-free patch importance use "
                           "wsikit.compute_attention(slide, grid, source='heuristic')")
    tried = AUTO_PREFERENCE[role]
    log.info("auto encoder for role %r: no weights found for %s, using the weight-free "
             "'heuristic' encoder ('wsikit doctor' says how to get them)", role,
             "/".join(tried))
    enc = create_encoder("heuristic", device=device)
    others = f" nor for {len(tried) - 1} other {role} encoders" if len(tried) > 1 else ""
    enc.label += f" [auto: no {tried[0]} weights found{others}]"
    return enc
