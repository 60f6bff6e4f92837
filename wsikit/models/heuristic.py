"""Weight-free defaults: a colour/texture patch embedding and a haematoxylin importance score.

These run without any gated weights, are deterministic, vectorised over the batch (torch, so
they also run on the GPU), and are labelled as heuristics wherever they are used. The
embedding is cheap enough to run on every tissue patch of a slide on CPU (hundreds of
512 px patches per second).

* :class:`HeuristicEncoder` (registered as ``"heuristic"``): 64-d embedding of stain (colour
  deconvolution, H/E/DAB optical densities as :func:`skimage.color.rgb2hed`), intensity and
  multi-scale texture statistics (:func:`heuristic_features`), each centred and scaled against
  fixed reference statistics of H&E tissue, so that cosine similarity spreads over [-1, 1].
  Usable for patches, crops and figures.
* :func:`importance_scores`: the slide-adaptive nuclear-morphology importance of
  :mod:`wsikit.models.nuclear` (per-slide threshold, robust z-scores, ranks).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from skimage.color.colorconv import hed_from_rgb

from .._threads import torch_threads
from ..errors import ModelError
from .configs import HEURISTIC_CONFIG, EncoderConfig
from .nuclear import importance_scores
from .registry import Encoder

__all__ = [
    "FEATURE_NAMES",
    "HEURISTIC_VERSION",
    "NUCLEAR_H_OD",
    "REF_CENTRE",
    "REF_SCALE",
    "HeuristicEncoder",
    "fit_reference",
    "heuristic_features",
    "hist_quantiles",
    "importance_scores",
    "rgb_to_hed",
    "texture_image",
]

#: Haematoxylin stain concentration (rgb2hed units) above which a pixel counts as nuclear.
#: On CMU-1-Small-Region the 90th percentile of H is 0.06 and the 99th 0.20.
NUCLEAR_H_OD = 0.08
#: Version of the embedding's definition; part of :attr:`HeuristicEncoder.label`, which feature
#: files and figure indexes record, so vectors of an older definition are never reused.
HEURISTIC_VERSION = 3
_MIN_PX = 128   # the embedding analyses the shorter side at >= this many px (upsampled) …
_MAX_PX = 256   # … and <= this many (area-downsampled); in between, at native resolution
_LEVELS = 5     # texture pyramid levels (factor 2 each), pooled over scale
_CLIP = 4.0     # standardised features are clipped to [-_CLIP, _CLIP]
_EPS = 1e-3     # offset of the log-transformed (scale-like) statistics
_HIST_BINS = 8  # coarse H and E histograms: H over [0, 0.25), E over [0, 0.12) (rgb2hed units)
_CHUNK_PIXELS = 1 << 18  # analysis pixels per group of images (keeps the planes in cache)
_CHUNK_INPUT_PIXELS = 1 << 20  # input pixels per group (bounds the float copies)
_LOG_ADJUST = float(np.log(1e-6))
# fine histograms for quantiles; bin edges fall on the coarse edges and the thresholds
_H_BIN, _H_NBINS = 0.00125, 400          # H in [0, 0.5)
_H_NUCLEAR_BIN = round(NUCLEAR_H_OD / _H_BIN)   # 64
_H_PER_COARSE = round(0.25 / _HIST_BINS / _H_BIN)  # 25
_E_BIN, _E_NBINS = 0.0005, 600           # E in [0, 0.3)
_E_EOSIN_BIN = round(0.04 / _E_BIN)      # 80
_E_PER_COARSE = round(0.12 / _HIST_BINS / _E_BIN)  # 30
_G_NBINS = 256                           # grey in [0, 1)
_BACKGROUND_GREY = 0.85


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


def _box_down(x: torch.Tensor, k: int, unit: float) -> torch.Tensor:
    """Mean over ``k x k`` blocks of ``(B, 3, H, W)`` (H and W multiples of ``k``), divided by
    ``unit``: float32, contiguous. Sums strided slices, one axis at a time, in the input's own
    memory layout (channels-last batches from ``encode`` stay channels-last until the end),
    which is several times faster than ``F.interpolate(mode="area")`` on CPU."""
    cl = not x.is_contiguous() and x.permute(0, 2, 3, 1).is_contiguous()
    f = (x.permute(0, 2, 3, 1) if cl else x).to(torch.float32)
    for axis in ((2, 1) if cl else (3, 2)):
        idx = [slice(None)] * 4
        idx[axis] = slice(0, None, k)
        acc = f[tuple(idx)].clone()
        for i in range(1, k):
            idx[axis] = slice(i, None, k)
            acc += f[tuple(idx)]
        f = acc
    f.mul_(1.0 / (k * k * unit))
    return f.permute(0, 3, 1, 2).contiguous() if cl else f


def texture_image(x: torch.Tensor) -> torch.Tensor:
    """uint8 (or [0, 1] float) ``(B, 3, H, W)`` -> float [0, 1], shorter side in
    [_MIN_PX, _MAX_PX]: the texture image.

    Larger images are averaged down over blocks (area resampling, which is also their
    anti-aliasing), smaller ones upsampled bilinearly, images inside the range keep their
    resolution. The result is contiguous (planar channels).
    """
    h, w = x.shape[-2:]
    short = min(h, w)
    target = min(max(short, _MIN_PX), _MAX_PX)
    unit = 255.0 if x.dtype == torch.uint8 else 1.0
    k = short // target
    if target < short and short == k * target and h % k == 0 and w % k == 0:
        return _box_down(x, k, unit)
    x = x.to(torch.float32)
    if target != short:
        scale = target / short
        size = (max(1, round(h * scale)), max(1, round(w * scale)))
        if scale < 1:
            x = F.interpolate(x, size=size, mode="area")
        else:
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            x = x.clamp_(0.0, unit)
    x = x.contiguous()
    return x.mul_(1.0 / unit) if unit != 1.0 else x


def _pixel_sample(x: torch.Tensor) -> torch.Tensor:
    """Every ``s``-th native pixel in both directions, ``s = ceil(short side / _MAX_PX)``, as
    ``(B, 3, N)`` float [0, 1]: per-pixel statistics are those of the native resolution
    (a sample, not an average) at the cost of the texture image."""
    s = -(-min(x.shape[-2:]) // _MAX_PX)
    x = x[:, :, s // 2::s, s // 2::s]
    unit = 255.0 if x.dtype == torch.uint8 else 1.0
    x = x.to(torch.float32, memory_format=torch.contiguous_format)
    x = x.reshape(x.shape[0], 3, -1)
    return x.mul_(1.0 / unit) if unit != 1.0 else x


def hist_quantiles(counts: torch.Tensor, q: torch.Tensor, width: float) -> torch.Tensor:
    """Quantiles from histograms of bins ``[k * width, (k + 1) * width)``.

    ``counts`` ``(B, bins)``, ``q`` ``(k,)`` or ``(B, k)`` in (0, 1] -> ``(B, k)``; linear
    interpolation inside the bin where the cumulative count reaches ``q * total``.
    """
    cdf = counts.cumsum(1)
    target = q.expand(counts.shape[0], -1) * cdf[:, -1:]
    i = torch.searchsorted(cdf, target.contiguous()).clamp_(max=counts.shape[1] - 1)
    c = counts.gather(1, i)
    frac = ((target - (cdf.gather(1, i) - c)) / c.clamp_min(1e-12)).clamp_(0.0, 1.0)
    return (i.to(torch.float32) + frac) * width


def _coarse(counts: torch.Tensor, per: int, n: int) -> torch.Tensor:
    """Sum ``per`` fine bins into ``n`` coarse ones (the last takes the rest), normalise and
    square-root (Hellinger): ``(B, bins)`` -> ``(B, n)``."""
    head = counts[:, :per * (n - 1)].reshape(counts.shape[0], n - 1, per).sum(2)
    tail = counts[:, per * (n - 1):].sum(1, keepdim=True)
    c = torch.cat([head, tail], 1)
    return (c / c.sum(1, keepdim=True).clamp_min(1e-6)).sqrt_()


def _texture(g: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """8 per-level texture statistics of grey ``g`` and haematoxylin ``h`` ``(B, H, W)``:
    grey gradient magnitude mean and std, H gradient magnitude mean, grey differences at 1 and
    2 px, grey and H std (the nuclear fraction and H quantile come from histograms)."""
    n = g.shape[1] * g.shape[2]
    dxg = g[:, :, 2:] - g[:, :, :-2]           # central differences x 2
    dyg = g[:, 2:, :] - g[:, :-2, :]
    nx, ny = dxg[0].numel(), dyg[0].numel()
    gm_sq = 0.25 * (dxg.square().sum((1, 2)) / nx + dyg.square().sum((1, 2)) / ny)
    gm_mean = 0.5 * torch.hypot(dxg[:, 1:-1, :], dyg[:, :, 1:-1]).mean((1, 2))
    gm_std = (gm_sq - gm_mean * gm_mean).clamp_min_(0.0).sqrt_()
    lag2 = 0.5 * (dxg.abs_().sum((1, 2)) / nx + dyg.abs_().sum((1, 2)) / ny)
    dxh = h[:, 1:-1, 2:] - h[:, 1:-1, :-2]
    dyh = h[:, 2:, 1:-1] - h[:, :-2, 1:-1]
    gh_mean = 0.5 * torch.hypot(dxh, dyh).mean((1, 2))
    lag1 = 0.5 * ((g[:, :, 1:] - g[:, :, :-1]).abs_().mean((1, 2))
                  + (g[:, 1:, :] - g[:, :-1, :]).abs_().mean((1, 2)))
    std_g = _std(g.reshape(-1, n))
    std_h = _std(h.reshape(-1, n))
    return torch.stack([gm_mean, gm_std, gh_mean, lag1, lag2, std_g, std_h], dim=1)


def _std(v: torch.Tensor) -> torch.Tensor:
    """Population std of each row of ``(B, N)`` (sum and sum of squares, not Welford)."""
    m = v.mean(1)
    return ((v * v).mean(1) - m * m).clamp_min_(0.0).sqrt_()


def _scatter_hist(idx: torch.Tensor, bins: int) -> torch.Tensor:
    """Per-row counts of integer bin indices ``(B, N)`` -> ``(B, bins)`` float32 (exact)."""
    ones = torch.ones(1, device=idx.device, dtype=torch.float32).expand(idx.shape)
    return torch.zeros(idx.shape[0], bins, device=idx.device).scatter_add_(1, idx, ones)


def _bin(v: torch.Tensor, width: float, bins: int, offset: torch.Tensor | None = None
         ) -> torch.Tensor:
    """Bin index ``floor(v / width)`` of ``v >= 0``, clipped to ``bins - 1``, plus ``offset``
    (a float tensor of whole numbers, e.g. the tissue/background split) -> int64."""
    f = v.mul(1.0 / width).clamp_(0.0, bins - 0.5)
    if offset is not None:
        f.add_(offset)
    return f.long()


def _lag(g: torch.Tensor, d: int) -> torch.Tensor:
    """Mean absolute grey difference at ``d`` px, horizontal and vertical averaged."""
    dx = min(d, g.shape[-1] - 1)
    dy = min(d, g.shape[-2] - 1)
    hor = (g[..., dx:] - g[..., :g.shape[-1] - dx]).abs_().mean((-2, -1))
    ver = (g[..., dy:, :] - g[..., :g.shape[-2] - dy, :]).abs_().mean((-2, -1))
    return 0.5 * (hor + ver)


# (name, log-transformed) of each raw feature, in output order.
_STAIN = (("tissue_fraction", False), ("mean_r", False), ("mean_g", False), ("mean_b", False),
          ("mean_h", True), ("mean_e", True), ("mean_d", True), ("std_h", True),
          ("std_e", True), ("log10_nuclear_fraction", False),
          ("log10_eosin_fraction", False), ("h_share", False), ("mean_grey", False),
          ("std_grey", True), ("saturation", False), ("red_minus_blue", False))
_TEXTURE = ("grad_grey_mean", "grad_grey_std", "grad_h_mean", "lag1_grey", "lag2_grey",
            "std_grey", "std_h", "log10_nuclear_fraction", "h_p90")
_TEXTURE_LOG = (True, True, True, True, True, True, True, False, True)

#: Names of the 64 raw features of :func:`heuristic_features`, in order.
FEATURE_NAMES: tuple[str, ...] = (
    tuple(n for n, _ in _STAIN)
    + tuple(f"h_hist{i}" for i in range(_HIST_BINS))
    + tuple(f"e_hist{i}" for i in range(_HIST_BINS))
    + tuple(f"{n}_{p}" for n in _TEXTURE for p in ("scale_mean", "scale_max"))
    + ("h_p50", "h_p99", "e_p50", "e_p99", "log10_dark_fraction", "h_e_corr",
       "red_minus_green", "grey_p10", "grey_p90", "coarse_fine_grey", "coarse_fine_h",
       "tissue_h_p75", "tissue_e_p75", "lag8_grey")
)


#: rgb_to_hed's stain matrix with the optical-density scaling folded in, as Python floats.
_OD_TO_HED = (np.asarray(hed_from_rgb, dtype=np.float64) / _LOG_ADJUST).tolist()


def _stain_planes(log_rgb: torch.Tensor, col: int) -> torch.Tensor:
    """One column of :func:`rgb_to_hed` from ``log`` of RGB ``(B, 3, N)``: ``(B, N)`` stain
    concentration (0 haematoxylin, 1 eosin, 2 DAB), >= 0."""
    m = _OD_TO_HED
    out = (log_rgb[:, 0] * m[0][col]).add_(log_rgb[:, 1], alpha=m[1][col])
    return out.add_(log_rgb[:, 2], alpha=m[2][col]).clamp_min_(0.0)


def _features_chunk(xs: torch.Tensor, xt: torch.Tensor) -> torch.Tensor:
    """:func:`heuristic_features` of one cache-sized chunk: ``xs`` ``(B, 3, N)`` pixel sample
    (:func:`_pixel_sample`), ``xt`` ``(B, 3, H, W)`` texture image (:func:`texture_image`)."""
    n = xs.shape[2]
    r, gr, bl = xs.unbind(1)
    # colour deconvolution as rgb_to_hed: optical density, then the 3x3 stain matrix
    od = xs.clamp_min(1e-6).log_()
    h, e, d = (_stain_planes(od, c) for c in range(3))
    g = (r * 0.299).add_(gr, alpha=0.587).add_(bl, alpha=0.114)
    sat = torch.maximum(torch.maximum(r, gr), bl).sub_(torch.minimum(torch.minimum(r, gr), bl))
    # tissue weights (grey < 0.85); images without tissue use all pixels
    w = (g < _BACKGROUND_GREY).to(torch.float32)
    n_t = w.sum(1)
    none = n_t < 1
    if bool(none.any()):
        w[none] = 1.0
    wsum = w.sum(1)
    hw, ew = h * w, e * w
    m_r, m_g, m_b = ((xs * w[:, None]).sum(2) / wsum[:, None]).unbind(1)
    mh, me = hw.sum(1) / wsum, ew.sum(1) / wsum
    md, msat = (d * w).sum(1) / wsum, (sat * w).sum(1) / wsum
    mh2, me2 = (hw * h).sum(1) / wsum, (ew * e).sum(1) / wsum
    mhe = (hw * e).sum(1) / wsum
    sh = (mh2 - mh * mh).clamp_min_(0.0).sqrt_()
    se = (me2 - me * me).clamp_min_(0.0).sqrt_()
    # H and E histograms with tissue and background in separate halves; grey histogram
    bg = w.mul(-1.0).add_(1.0)
    h_split = _scatter_hist(_bin(h, _H_BIN, _H_NBINS, bg * _H_NBINS), 2 * _H_NBINS)
    e_split = _scatter_hist(_bin(e, _E_BIN, _E_NBINS, bg.mul_(_E_NBINS)), 2 * _E_NBINS)
    h_t, h_all = h_split[:, :_H_NBINS], h_split[:, :_H_NBINS] + h_split[:, _H_NBINS:]
    e_t, e_all = e_split[:, :_E_NBINS], e_split[:, :_E_NBINS] + e_split[:, _E_NBINS:]
    g_counts = _scatter_hist(_bin(g, 1.0 / _G_NBINS, _G_NBINS), _G_NBINS)
    nuclear = h_t[:, _H_NUCLEAR_BIN:].sum(1) / wsum
    eosin = e_t[:, _E_EOSIN_BIN:].sum(1) / wsum
    g_mean = g.mean(1)
    g_std = ((g * g).mean(1) - g_mean * g_mean).clamp_min_(0.0).sqrt_()
    stain = torch.stack([n_t / n, m_r, m_g, m_b, mh, me, md, sh, se,
                         torch.log10(nuclear + 1e-3), torch.log10(eosin + 1e-3),
                         mh / (mh + me + 1e-6), g_mean, g_std, msat, m_r - m_b], dim=1)
    logs = torch.tensor([lg for _, lg in _STAIN], device=xs.device)
    stain = torch.where(logs, torch.log(stain.clamp_min(0) + _EPS), stain)
    hists = torch.cat([_coarse(h_t, _H_PER_COARSE, _HIST_BINS),
                       _coarse(e_t, _E_PER_COARSE, _HIST_BINS)], dim=1)

    lv, texture, lag8 = _pyramid_texture(xs, xt)

    hq = hist_quantiles(h_all, xs.new_tensor([0.5, 0.99]), _H_BIN)
    eq = hist_quantiles(e_all, xs.new_tensor([0.5, 0.99]), _E_BIN)
    gq = hist_quantiles(g_counts, xs.new_tensor([0.1, 0.9]), 1.0 / _G_NBINS)
    q75 = xs.new_tensor([0.75])
    t75 = torch.cat([hist_quantiles(h_t, q75, _H_BIN), hist_quantiles(e_t, q75, _E_BIN)], 1)
    corr = (mhe - mh * me) / (sh * se + 1e-6)
    dark = g_counts[:, :_G_NBINS // 2].sum(1) / n
    more = torch.stack([
        *torch.log(hq + _EPS).unbind(1), *torch.log(eq + _EPS).unbind(1),
        torch.log10(dark + 1e-3), corr, m_r - m_g, gq[:, 0], gq[:, 1],
        lv[:, 5, -1] - lv[:, 5, 0], lv[:, 6, -1] - lv[:, 6, 0],
        *torch.log(t75 + _EPS).unbind(1), torch.log(lag8 + _EPS)], dim=1)
    return torch.cat([stain, hists, texture, more], dim=1)


def _pyramid_texture(xs: torch.Tensor, xt: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Texture of :func:`_features_chunk` on an average-pooling pyramid of the grey and H
    planes of the texture image ``xt``: ``(per-level measures (B, 9, levels), their mean and
    max, the ~8 px grey lag)``."""
    b, _, hh, ww = xt.shape
    xtf = xt.reshape(b, 3, hh * ww)
    gh = torch.stack([(xtf[:, 0] * 0.299).add_(xtf[:, 1], alpha=0.587)
                      .add_(xtf[:, 2], alpha=0.114),
                      _stain_planes(xtf.clamp_min(1e-6).log_(), 0)], dim=1)
    gh = gh.reshape(b, 2, hh, ww)
    levels, h_hists = [], []
    lag8: torch.Tensor | None = None
    for lev in range(_LEVELS):
        if lev:
            gh = F.avg_pool2d(gh, 2, ceil_mode=True)
        h_hists.append(_scatter_hist(_bin(gh[:, 1].reshape(b, -1), _H_BIN, _H_NBINS),
                                     _H_NBINS))
        if lev == 1:
            lag8 = _lag(gh[:, 0], 4)   # 4 px at half resolution: ~8 px of the analysis image
        levels.append(_texture(gh[:, 0], gh[:, 1]))
    hh_ = torch.stack(h_hists, dim=1)                       # (B, levels, bins)
    nuc_l = hh_[..., _H_NUCLEAR_BIN:].sum(2) / hh_.sum(2)
    p90_l = hist_quantiles(hh_.reshape(-1, _H_NBINS), xs.new_tensor([0.9]), _H_BIN)
    lv = torch.cat([torch.stack(levels, dim=2), torch.log10(nuc_l + 1e-3)[:, None],
                    p90_l.reshape(b, 1, _LEVELS)], dim=1)   # (B, 9, levels)
    tlog = torch.tensor(_TEXTURE_LOG, device=xs.device)[None, :, None]
    lv = torch.where(tlog, torch.log(lv.clamp_min(0) + _EPS), lv)
    texture = torch.stack([lv.mean(2), lv.amax(2)], dim=2).flatten(1)
    assert lag8 is not None  # set at level 1; _LEVELS is a constant > 1
    return lv, texture, lag8


@lru_cache(maxsize=1)
def _openmp() -> bool:
    """Whether torch's intra-op threads are OpenMP (thread counts are then per thread)."""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


def _chunk_features(c: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return _features_chunk(_pixel_sample(c), texture_image(c))


def _chunk_features_1thread(c: torch.Tensor) -> torch.Tensor:
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)  # this worker thread only (OpenMP)
    return _chunk_features(c)


def heuristic_features(x: torch.Tensor, *, chunk_pixels: int = _CHUNK_PIXELS,
                       chunk_input_pixels: int = _CHUNK_INPUT_PIXELS,
                       threads: int | None = None) -> torch.Tensor:
    """The 64 raw (un-normalised) statistics behind the heuristic embedding.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, 3, H, W)`` float RGB in [0, 1], at analysis resolution (the encoder resamples
        the shorter side into [128, 256] px first, :func:`texture_image`).
    chunk_pixels, chunk_input_pixels : int
        Images are processed in groups of at most this many analysis (texture image) and input
        pixels (at least one image per group), so the intermediate planes stay in the CPU
        cache and memory stays bounded. Results do not depend on either.
    threads : int, optional
        Workers of the chunk pool on CPU (default: torch's intra-op thread count). The
        groups are cut the same way for any count and each is computed single-threaded (with
        ``threads=1`` too), so the features are bit-identical for any count; several workers
        run several groups at once.

    Returns
    -------
    torch.Tensor
        ``(B, 64)`` float32, named by :data:`FEATURE_NAMES`:

        * 16 stain/colour statistics over tissue pixels (grey < 0.85; all pixels when there
          are none): tissue fraction, mean R, G, B, mean and std of haematoxylin (H), eosin
          (E) and DAB (D) optical density, nuclear (H >= :data:`NUCLEAR_H_OD`) and eosin-rich
          (E >= 0.04) fractions, H share of H+E, grey mean/std, saturation, red minus blue;
        * 16: 8-bin histograms of H (0–0.25) and E (0–0.12) over tissue (square-rooted);
        * 18 texture statistics, each measured on a 5-level average-pooling pyramid (factor
          2) of the grey and H planes and pooled over scale as mean and max, so a texture
          seen at 0.5 or 1 µm/px gives similar values: gradient magnitude of grey (mean,
          std) and of H, grey differences at 1 and 2 px, grey and H std, nuclear fraction,
          90th percentile of H;
        * 14 more: H and E quantiles (50, 99 %), dark fraction (grey < 0.5), H–E correlation
          over tissue, red minus green, grey quantiles (10, 90 %), coarse/fine contrast
          ratios of grey and H, 75th percentiles of H and E over tissue, grey difference at
          8 px (4 px on the first pyramid level).

        Quantiles are read off fine histograms (H bins of 0.00125, E 0.0005, grey 1/256) with
        linear interpolation inside a bin. Scale-like statistics (means, stds, gradients,
        quantiles of optical density) are ``log(v + 1e-3)``.
    """
    if x.ndim != 4 or x.shape[1] != 3 or min(x.shape[-2:]) < 3:
        raise ModelError(f"heuristic_features: expected (B, 3, H, W) RGB images of at least "
                         f"3x3 px, got shape {tuple(x.shape)}; permute (B, H, W, 3) arrays "
                         "with .permute(0, 3, 1, 2)")
    if x.dtype != torch.uint8 and not x.is_floating_point():
        raise ModelError(f"heuristic_features: expected uint8 or [0, 1] float RGB, got "
                         f"{x.dtype}")
    if x.shape[0] == 0:
        return torch.zeros((0, len(FEATURE_NAMES)), device=x.device)
    in_px = x.shape[-1] * x.shape[-2]
    per = max(1, min(chunk_pixels // max(1, min(_MAX_PX * _MAX_PX, in_px)),
                     chunk_input_pixels // max(1, in_px)))
    chunks = x.split(per)
    n_threads = torch.get_num_threads() if threads is None else int(threads)
    if n_threads < 1:
        raise ModelError(f"heuristic_features: threads={threads} must be >= 1")
    if x.device.type != "cpu":
        out = torch.cat([_chunk_features(c) for c in chunks])
    elif n_threads > 1 and len(chunks) > 1 and _openmp():
        # one chunk per worker, each single-threaded: no per-operation thread barriers (which
        # stall for a scheduler slice on a busy machine and cost more than the arithmetic), and
        # every row is reduced in the same order, so an image's features do not depend on the
        # batch it came in or the thread count
        with ThreadPoolExecutor(min(n_threads, len(chunks)),
                                thread_name_prefix="wsikit-heuristic") as pool:
            out = torch.cat(list(pool.map(_chunk_features_1thread, chunks)))
    else:
        with torch_threads(1):  # single-threaded reductions, as in the pool
            out = torch.cat([_chunk_features(c) for c in chunks])
    if out.shape[1] != len(FEATURE_NAMES):  # pragma: no cover - guarded by tests
        raise ModelError(f"heuristic features: {out.shape[1]} != {len(FEATURE_NAMES)}")
    return out


def fit_reference(groups: Sequence[np.ndarray], *, min_scale: float = 0.02
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Class-balanced centre and scale of raw features (how the module constants were made).

    Parameters
    ----------
    groups : sequence of ndarray
        One ``(n_g, 64)`` array of :func:`heuristic_features` per tissue group.
    min_scale : float
        Lower bound of the scale, so features that barely vary in the reference cannot blow up.

    Returns
    -------
    (ndarray, ndarray)
        ``centre`` = mean of the group means; ``scale`` = root mean over groups of the mean
        squared deviation from ``centre`` (so it holds both within- and between-group spread).
    """
    means = np.stack([np.asarray(gr, np.float64).mean(0) for gr in groups])
    centre = means.mean(0)
    var = np.mean([((np.asarray(gr, np.float64) - centre) ** 2).mean(0) for gr in groups], 0)
    return centre, np.maximum(np.sqrt(var), min_scale)


#: Centre of each of the 64 raw features (:func:`fit_reference` over the reference set
#: described in :class:`HeuristicEncoder`; refitted and checked by
#: tests/models/test_heuristic_embedding.py): the embedding is ``(raw - REF_CENTRE) / REF_SCALE``
#: clipped to ±4.
REF_CENTRE = np.array([
    0.928465, 0.790323, 0.533292, 0.692756, -4.76383, -3.63515, -3.6463, -3.6999,
    -5.07908, -1.57679, -2.23947, 0.27972, 0.663906, -2.45146, 0.269011, 0.0975668,
    0.876232, 0.179331, 0.13006, 0.0979163, 0.13452, 0.051436, 0.038233, 0.04837,
    0.179807, 0.857118, 0.214584, 0.0999254, 0.057351, 0.0321591, 0.0207416, 0.0345501,
    -3.82248, -3.46019, -3.62316, -3.03265, -5.15424, -4.96216, -3.84509, -3.47178,
    -3.64385, -3.26953, -3.09708, -2.56637, -4.39513, -3.87597, -2.01787, -1.74835,
    -4.52024, -4.12389, -5.49957, -2.91377, -3.935, -3.0922, -1.41322, 0.561198,
    0.257032, 0.552838, 0.790941, -1.20464, -1.10607, -4.96676, -3.58777, -3.34431,
])
#: Scale of each raw feature, the partner of :data:`REF_CENTRE`.
REF_SCALE = np.array([
    0.132384, 0.162125, 0.124361, 0.124404, 1.39664, 0.155149, 0.358549, 1.07075,
    1.6193, 0.736628, 1.07998, 0.259524, 0.0966996, 0.848056, 0.0303984, 0.04487,
    0.193563, 0.221199, 0.160602, 0.124497, 0.0790542, 0.079051, 0.0585392, 0.0734725,
    0.259272, 0.196619, 0.173769, 0.147252, 0.0853461, 0.0473656, 0.0307053, 0.0529947,
    1.18019, 1.06912, 0.978203, 0.656297, 1.09213, 1.07162, 1.10884, 1.0158,
    1.23002, 1.10296, 1.24206, 0.934857, 1.20784, 1.12937, 0.909482, 0.839732,
    1.5807, 1.49562, 1.23827, 1.76665, 0.626124, 0.67074, 0.863372, 0.367096,
    0.0446709, 0.221188, 0.0885526, 0.73815, 0.420268, 1.58453, 0.220598, 1.24905,
])


class HeuristicEncoder(Encoder):
    """Deterministic 64-d colour/texture embedding (no learned weights).

    ``embedding = normalise(clip((heuristic_features(x) - centre) / scale, ±4))``: each raw
    statistic (:data:`FEATURE_NAMES`) is centred and scaled by fixed reference statistics of
    H&E tissue, so embeddings are signed and cosine similarity spreads over [-1, 1] (tissue of
    the same kind is close to 1, different kinds are far apart) instead of crowding near 1 as
    non-negative histograms do.

    The reference (``REF_CENTRE``, ``REF_SCALE``, see :func:`fit_reference`) is the
    class-balanced mean and spread over three groups of tissue images at 0.5, 1 and 2 µm/px
    (256–1024 px): real Aperio H&E tiles of ``CMU-1-Small-Region.svs`` (cellular epidermis and
    dermis) and wsikit's synthetic H&E-like loose stroma and densely packed nuclei
    (:func:`wsikit.slide.synthetic.synthetic_tissue_image`);
    ``tests/models/test_heuristic_embedding.py`` recomputes it. Per-pixel (stain, intensity,
    quantile) statistics are taken over a strided sample of native pixels, texture over the
    image area-resampled to a shorter side in [128, 256] px and pooled over a 5-level pyramid,
    which makes a crop of the same tissue at 0.5 and 1 µm/px embed alike. The :attr:`label`
    carries :data:`HEURISTIC_VERSION`, so cached features of an older definition are not
    reused.

    Cost (version 3, 2 shared CPU cores): ~200 img/s per core for 512 px patches, ~100 for
    1024 px crops (``benchmarks/bench_heuristic_encoder.py``).
    """

    #: Images per chunk are limited to about this many input pixels: bounds memory for large
    #: batches and crops, and keeps each chunk's float copy small enough to stay in cache.
    max_chunk_pixels = 1 << 20

    # registered buffers, declared for type checkers (nn.Module.__getattr__ is untyped)
    _centre: torch.Tensor
    _scale: torch.Tensor

    def __init__(self, config: EncoderConfig = HEURISTIC_CONFIG) -> None:
        super().__init__(config)
        #: Chunk-pool workers (None: torch's intra-op thread count); see :meth:`split_threads`.
        self.threads: int | None = None
        self.register_buffer("_centre", torch.as_tensor(REF_CENTRE, dtype=torch.float32),
                             persistent=False)
        self.register_buffer("_scale", torch.as_tensor(REF_SCALE, dtype=torch.float32),
                             persistent=False)

    @property
    def label(self) -> str:
        """Provenance string; always names the heuristic's version (``heuristic-vN``)."""
        return self._label

    @label.setter
    def label(self, value: str) -> None:
        tag = f"heuristic-v{HEURISTIC_VERSION}"
        value = str(value)
        if tag not in value:
            head, sep, rest = value.partition(" [")
            value = f"{head} {tag}" + (f"{sep}{rest}" if sep else "")
        self._label = value

    @contextlib.contextmanager
    def split_threads(self, n: int) -> Iterator[int]:
        """Embed with a pool of ``n`` chunk workers inside the block, whatever torch's thread
        count (:class:`wsikit._threads.SplitsWork`: the thread policy gives this encoder every
        core while reader processes decode); the features do not depend on ``n``."""
        if int(n) < 1:
            raise ModelError(f"heuristic: split_threads({n}) needs at least 1 worker")
        before, self.threads = self.threads, int(n)
        try:
            yield int(n)
        finally:
            self.threads = before

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:
        """Check a ``(B, 3, H, W)`` uint8 batch and return it unchanged: the heuristic samples
        native pixels and resamples for texture itself (:func:`heuristic_features`)."""
        if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[1] != 3:
            raise ModelError(f"heuristic: expected a (B, 3, H, W) uint8 RGB tensor, got "
                             f"{x.dtype} {tuple(x.shape)}; use encode() for (B, H, W, 3) "
                             "arrays")
        return x

    @torch.inference_mode()
    def forward_uint8(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` uint8 RGB -> ``(B, 64)`` float32, in chunks of about
        :attr:`max_chunk_pixels` input pixels (results do not depend on the chunking)."""
        return self(self.preprocess(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` RGB, float in [0, 1] or uint8, any size -> ``(B, 64)`` float32,
        unit L2 norm."""
        z = heuristic_features(x, chunk_input_pixels=self.max_chunk_pixels,
                               threads=self.threads)
        z = (z - self._centre) / self._scale
        return F.normalize(z.clamp_(-_CLIP, _CLIP), dim=1, eps=1e-8)
