"""Weight-free defaults: a colour/texture patch embedding and a haematoxylin importance score.

These run without any gated weights, are deterministic, vectorised over the batch (torch, so
they also run on the GPU), and are labelled as heuristics wherever they are used.

* :class:`HeuristicEncoder` (registered as ``"heuristic"``): 64-d L2-normalised embedding of
  stain (colour deconvolution, H/E/DAB optical densities as :func:`skimage.color.rgb2hed`),
  intensity and texture statistics, computed on a 128 px downscale of each image. Usable for
  patches, crops and figures.
* :func:`haematoxylin_density`: ``(B,)`` fraction of pixels whose haematoxylin optical density
  is nuclear-strength.
* :func:`importance_scores`: haematoxylin density × tissue fraction, percentile-normalised per
  slide to [0, 1].
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from skimage.color.colorconv import hed_from_rgb

from ..errors import ModelError
from .registry import Encoder, EncoderConfig

__all__ = [
    "HeuristicEncoder",
    "HEURISTIC_CONFIG",
    "rgb_to_hed",
    "haematoxylin_density",
    "importance_scores",
    "NUCLEAR_H_OD",
]

#: Haematoxylin stain concentration (rgb2hed units) above which a pixel counts as nuclear.
#: On CMU-1-Small-Region the 90th percentile of H is 0.06 and the 99th 0.20.
NUCLEAR_H_OD = 0.08
_WORK_PX = 128
_HIST_BINS = 8
# value ranges of the histogrammed channels (rgb2hed units / [0, 1] intensity)
_H_RANGE = (0.0, 0.25)
_E_RANGE = (0.0, 0.12)
_GRAD_RANGE = (0.0, 0.25)
_BACKGROUND_GREY = 0.85

HEURISTIC_CONFIG = EncoderConfig(
    name="heuristic",
    role="any",
    hub_repo=None,
    hub_files=(),
    input_px=_WORK_PX,
    interpolation="area",
    mean=(0.0, 0.0, 0.0),
    std=(1.0, 1.0, 1.0),
    target_mpp=0.5,
    patch_px=512,
    dim=64,
    precision="fp32",
    license="Apache-2.0",
    gated=False,
    heuristic=True,
    description="weight-free colour-deconvolution + intensity/texture statistics (64-d)",
)


def _hed_matrix(device: torch.device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(hed_from_rgb, dtype=np.float32), device=device)


def rgb_to_hed(x: torch.Tensor) -> torch.Tensor:
    """Colour deconvolution of [0, 1] RGB, as :func:`skimage.color.rgb2hed`.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, 3, H, W)`` float RGB in [0, 1].

    Returns
    -------
    torch.Tensor
        ``(B, 3, H, W)`` float32 stain concentrations (haematoxylin, eosin, DAB), >= 0.
    """
    log_adjust = float(np.log(1e-6))
    od = torch.log(x.float().clamp_min(1e-6)) / log_adjust
    hed = torch.einsum("bchw,cd->bdhw", od, _hed_matrix(x.device))
    return hed.clamp_min_(0.0)


def _to_work(x: torch.Tensor) -> torch.Tensor:
    """uint8 ``(B, 3, H, W)`` -> float [0, 1] at most ``_WORK_PX`` on the shorter side."""
    if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[1] != 3:
        raise ModelError(f"expected (B, 3, H, W) uint8 RGB, got {x.dtype} {tuple(x.shape)}")
    x = x.float().div_(255.0)
    h, w = x.shape[-2:]
    if min(h, w) > _WORK_PX:
        scale = _WORK_PX / min(h, w)
        x = F.interpolate(x, size=(max(1, round(h * scale)), max(1, round(w * scale))),
                          mode="area")
    return x


def _as_batch(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(images, np.ndarray):
        if images.ndim == 3:
            images = images[None]
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ModelError(f"expected (B, H, W, 3) uint8 RGB images, got {images.dtype} "
                             f"{images.shape}")
        return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
    if images.ndim == 4 and images.shape[-1] == 3 and images.shape[1] != 3:
        images = images.permute(0, 3, 1, 2)
    return images


def _hist(v: torch.Tensor, lo: float, hi: float, bins: int = _HIST_BINS) -> torch.Tensor:
    """Per-image normalised histogram: ``(B, P)`` -> ``(B, bins)`` (values clamped to range)."""
    idx = ((v - lo) / (hi - lo) * bins).long().clamp_(0, bins - 1)
    counts = torch.zeros(v.shape[0], bins, device=v.device, dtype=torch.float32)
    counts.scatter_add_(1, idx, torch.ones_like(v, dtype=torch.float32))
    return counts / v.shape[1]


@torch.inference_mode()
def haematoxylin_density(images: np.ndarray | torch.Tensor) -> np.ndarray:
    """Fraction of pixels with nuclear-strength haematoxylin, per image.

    Parameters
    ----------
    images : ndarray or torch.Tensor
        ``(B, H, W, 3)`` uint8 RGB (array or tensor) or ``(B, 3, H, W)`` uint8 tensor.

    Returns
    -------
    ndarray
        ``(B,)`` float32 in [0, 1]: share of pixels (on a 128 px downscale) whose haematoxylin
        concentration (:func:`rgb_to_hed`) is at least :data:`NUCLEAR_H_OD`.
    """
    x = _to_work(_as_batch(images))
    h = rgb_to_hed(x)[:, 0]
    return (h >= NUCLEAR_H_OD).float().mean(dim=(1, 2)).cpu().numpy().astype(np.float32)


def importance_scores(h_density: np.ndarray, tissue_fraction: np.ndarray, *,
                      percentiles: tuple[float, float] = (1.0, 99.0)) -> np.ndarray:
    """Weight-free per-patch importance, normalised per slide.

    Parameters
    ----------
    h_density : ndarray
        ``(N,)`` haematoxylin density per patch (:func:`haematoxylin_density`), in [0, 1].
    tissue_fraction : ndarray
        ``(N,)`` tissue fraction per patch (``TileGrid.tissue``), in [0, 1].
    percentiles : (float, float)
        The raw score ``h_density * tissue_fraction`` is mapped linearly so that these
        percentiles of the slide become 0 and 1, then clipped to [0, 1].

    Returns
    -------
    ndarray
        ``(N,)`` float32 in [0, 1]; all zeros when every patch has the same raw score.
    """
    h = np.asarray(h_density, dtype=np.float64).reshape(-1)
    t = np.asarray(tissue_fraction, dtype=np.float64).reshape(-1)
    if h.shape != t.shape:
        raise ModelError(f"importance_scores: h_density has {h.size} values but tissue_fraction "
                         f"has {t.size}; pass one value per patch for both")
    if not (np.isfinite(h).all() and np.isfinite(t).all()):
        raise ModelError("importance_scores: h_density and tissue_fraction must be finite")
    lo_p, hi_p = percentiles
    if not 0.0 <= lo_p < hi_p <= 100.0:
        raise ModelError(f"importance_scores: percentiles={percentiles!r} must satisfy "
                         "0 <= low < high <= 100")
    raw = h * t
    if raw.size == 0:
        return raw.astype(np.float32)
    lo, hi = np.percentile(raw, [lo_p, hi_p])
    if hi <= lo:
        return np.zeros_like(raw, dtype=np.float32)
    return np.clip((raw - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)


class HeuristicEncoder(Encoder):
    """Deterministic 64-d colour/texture embedding (no learned weights).

    Blocks (each L2-normalised, then the whole vector):

    * 24: 8-bin histograms of haematoxylin, eosin and grey (square-rooted, Hellinger)
    * 12: mean and standard deviation of R, G, B, H, E, grey
    * 10: gradient magnitude (Sobel on grey) mean, std and an 8-bin histogram
    * 9: local-binary-pattern histogram (number of 8 neighbours brighter than the centre)
    * 6: mean absolute grey difference at offsets 1, 2, 4 px horizontally and vertically
    * 3: tissue fraction, nuclear (H) fraction, eosin-rich fraction
    """

    def __init__(self, config: EncoderConfig = HEURISTIC_CONFIG) -> None:
        super().__init__(config)
        sobel = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 8.0
        self.register_buffer("_sobel", torch.stack([sobel, sobel.T])[:, None],
                             persistent=False)

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:  # uint8 -> [0, 1] work size
        return _to_work(x)

    def forward_uint8(self, x: torch.Tensor) -> torch.Tensor:
        return self(self.preprocess(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, h, w)`` float RGB in [0, 1] -> ``(B, 64)`` float32, unit L2 norm."""
        x = x.float()
        b = x.shape[0]
        hed = rgb_to_hed(x)
        grey = (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2])[:, None]
        flat_h = hed[:, 0].reshape(b, -1)
        flat_e = hed[:, 1].reshape(b, -1)
        flat_g = grey.reshape(b, -1)
        hists = torch.cat([_hist(flat_h, *_H_RANGE), _hist(flat_e, *_E_RANGE),
                           _hist(flat_g, 0.0, 1.0)], dim=1).sqrt()

        chans = torch.cat([x, hed[:, :2], grey], dim=1).reshape(b, 6, -1)
        stats = torch.cat([chans.mean(-1), chans.std(-1, unbiased=False)], dim=1)

        g = F.pad(grey, (1, 1, 1, 1), mode="replicate")
        grad = F.conv2d(g, self._sobel.to(g.dtype))
        mag = grad.pow(2).sum(1).sqrt().reshape(b, -1)
        grads = torch.cat([mag.mean(-1, keepdim=True), mag.std(-1, unbiased=False, keepdim=True),
                           _hist(mag, *_GRAD_RANGE).sqrt()], dim=1)

        centre = g[:, :, 1:-1, 1:-1]
        h, w = centre.shape[-2:]
        brighter = torch.zeros_like(centre)
        for dy in (0, 1, 2):
            for dx in (0, 1, 2):
                if dy == 1 and dx == 1:
                    continue
                brighter += (g[:, :, dy:dy + h, dx:dx + w] > centre + 1e-3).float()
        lbp = _hist(brighter.reshape(b, -1), 0.0, 9.0, bins=9).sqrt()

        cooc = []
        for d in (1, 2, 4):
            dd = min(d, max(grey.shape[-1] - 1, 0))
            dv = min(d, max(grey.shape[-2] - 1, 0))
            cooc.append((grey[..., dd:] - grey[..., :grey.shape[-1] - dd]).abs()
                        .mean(dim=(1, 2, 3)))
            cooc.append((grey[..., dv:, :] - grey[..., :grey.shape[-2] - dv, :]).abs()
                        .mean(dim=(1, 2, 3)))
        cooc_t = torch.stack(cooc, dim=1)

        tissue = (flat_g < _BACKGROUND_GREY).float().mean(-1, keepdim=True)
        nuclear = (flat_h >= NUCLEAR_H_OD).float().mean(-1, keepdim=True)
        eosin = (flat_e >= 0.04).float().mean(-1, keepdim=True)
        fracs = torch.cat([tissue, nuclear, eosin], dim=1)

        blocks = [hists, stats, grads, lbp, cooc_t, fracs]
        out = torch.cat([F.normalize(blk, dim=1, eps=1e-8) for blk in blocks], dim=1)
        return F.normalize(out, dim=1, eps=1e-8)
