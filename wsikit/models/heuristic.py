"""Weight-free defaults: a colour/texture patch embedding and a haematoxylin importance score.

These run without any gated weights, are deterministic, vectorised over the batch (torch, so
they also run on the GPU), and are labelled as heuristics wherever they are used.

* :class:`HeuristicEncoder` (registered as ``"heuristic"``): 64-d embedding of stain (colour
  deconvolution, H/E/DAB optical densities as :func:`skimage.color.rgb2hed`), intensity and
  multi-scale texture statistics (:func:`heuristic_features`), each centred and scaled against
  fixed reference statistics of H&E tissue, so that cosine similarity spreads over [-1, 1].
  Usable for patches, crops and figures.
* :func:`haematoxylin_density`: ``(B,)`` fraction of pixels whose haematoxylin optical density
  is nuclear-strength.
* :func:`importance_scores`: haematoxylin density × tissue fraction, percentile-normalised per
  slide to [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from skimage.color.colorconv import hed_from_rgb

from ..errors import ModelError
from .registry import Encoder, EncoderConfig

__all__ = [
    "FEATURE_NAMES",
    "HEURISTIC_CONFIG",
    "HEURISTIC_VERSION",
    "NUCLEAR_H_OD",
    "HeuristicEncoder",
    "fit_reference",
    "haematoxylin_density",
    "heuristic_features",
    "importance_scores",
    "rgb_to_hed",
]

#: Haematoxylin stain concentration (rgb2hed units) above which a pixel counts as nuclear.
#: On CMU-1-Small-Region the 90th percentile of H is 0.06 and the 99th 0.20.
NUCLEAR_H_OD = 0.08
#: Version of the embedding's definition; part of :attr:`HeuristicEncoder.label`, which feature
#: files and figure indexes record, so vectors of an older definition are never reused.
HEURISTIC_VERSION = 2
_WORK_PX = 128  # haematoxylin_density works at this size (selection semantics)
_MIN_PX = 128   # the embedding analyses the shorter side at >= this many px (upsampled) …
_MAX_PX = 1024  # … and <= this many (area-downsampled); in between, at native resolution
_LEVELS = 5     # texture pyramid levels (factor 2 each), pooled over scale
_CLIP = 4.0     # standardised features are clipped to [-_CLIP, _CLIP]
_EPS = 1e-3     # offset of the log-transformed (scale-like) statistics
_HIST_BINS = 8
# value ranges of the histogrammed channels (rgb2hed units / [0, 1] intensity)
_H_RANGE = (0.0, 0.25)
_E_RANGE = (0.0, 0.12)
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


def _hist(v: torch.Tensor, w: torch.Tensor, lo: float, hi: float,
          bins: int = _HIST_BINS) -> torch.Tensor:
    """Per-image weighted histogram, square-rooted (Hellinger): ``(B, ...)`` -> ``(B, bins)``.

    Values outside ``[lo, hi)`` fall into the first or last bin; ``w`` weights each pixel.
    """
    b = v.shape[0]
    idx = ((v - lo) * (bins / (hi - lo))).long().clamp_(0, bins - 1).reshape(b, -1)
    ww = w.reshape(b, -1).to(torch.float32)
    counts = torch.zeros(b, bins, device=v.device, dtype=torch.float32)
    counts.scatter_add_(1, idx, ww)
    return (counts / ww.sum(1, keepdim=True).clamp_min(1e-6)).sqrt()


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


def _to_analysis(x: torch.Tensor) -> torch.Tensor:
    """uint8 ``(B, 3, H, W)`` -> float [0, 1] with the shorter side in [_MIN_PX, _MAX_PX].

    Images inside that range keep their native resolution (so a crop's texture is measured at
    the resolution it was saved at); larger ones are area-downsampled, smaller ones upsampled
    bilinearly.
    """
    if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[1] != 3:
        raise ModelError(f"expected (B, 3, H, W) uint8 RGB, got {x.dtype} {tuple(x.shape)}")
    x = x.float().div_(255.0)
    h, w = x.shape[-2:]
    short = min(h, w)
    target = min(max(short, _MIN_PX), _MAX_PX)
    if target != short:
        scale = target / short
        size = (max(1, round(h * scale)), max(1, round(w * scale)))
        if scale < 1:
            x = F.interpolate(x, size=size, mode="area")
        else:
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False).clamp_(0, 1)
    return x


def _wmean(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (v * w).sum((-2, -1)) / w.sum((-2, -1)).clamp_min(1e-6)


def _wstd(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m = _wmean(v, w)
    return (_wmean(v * v, w) - m * m).clamp_min(0.0).sqrt()


def _grey(x: torch.Tensor) -> torch.Tensor:
    return 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]


def _grad(g: torch.Tensor) -> torch.Tensor:
    """Central-difference gradient magnitude of ``(B, H, W)``."""
    p = F.pad(g[:, None], (1, 1, 1, 1), mode="replicate")[:, 0]
    gx = (p[..., 1:-1, 2:] - p[..., 1:-1, :-2]) * 0.5
    gy = (p[..., 2:, 1:-1] - p[..., :-2, 1:-1]) * 0.5
    return (gx * gx + gy * gy).sqrt()


def _lag(g: torch.Tensor, d: int) -> torch.Tensor:
    """Mean absolute grey difference at ``d`` px, horizontal and vertical averaged."""
    dx = min(d, g.shape[-1] - 1)
    dy = min(d, g.shape[-2] - 1)
    hor = (g[..., dx:] - g[..., :g.shape[-1] - dx]).abs().mean((-2, -1))
    ver = (g[..., dy:, :] - g[..., :g.shape[-2] - dy, :]).abs().mean((-2, -1))
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
       "red_minus_green", "grey_p10", "grey_p90", "coarse_fine_grey", "coarse_fine_h", "tissue_h_p75",
       "tissue_e_p75", "lag8_grey")
)


def heuristic_features(x: torch.Tensor) -> torch.Tensor:
    """The 64 raw (un-normalised) statistics behind the heuristic embedding.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, 3, H, W)`` float RGB in [0, 1], at analysis resolution (the encoder resamples
        the shorter side into [128, 1024] px first).

    Returns
    -------
    torch.Tensor
        ``(B, 64)`` float32, named by :data:`FEATURE_NAMES`:

        * 16 stain/colour statistics over tissue pixels (grey < 0.85; all pixels when there
          are none): tissue fraction, mean R, G, B, mean and std of haematoxylin (H), eosin
          (E) and DAB (D) optical density, nuclear (H >= :data:`NUCLEAR_H_OD`) and eosin-rich
          fractions, H share of H+E, grey mean/std, saturation, red minus blue;
        * 16: 8-bin histograms of H and E over tissue (square-rooted);
        * 18 texture statistics, each measured on a 5-level pyramid (factor 2) and pooled over
          scale as mean and max, so a texture seen at 0.5 or 1 µm/px gives similar values:
          gradient magnitude of grey (mean, std) and of H, grey differences at 1 and 2 px,
          grey and H std, nuclear fraction, 90th percentile of H;
        * 14 more: H and E quantiles, dark fraction, H–E correlation, red minus green, grey
          quantiles,
          coarse/fine contrast ratios, grey difference at 8 px.

        Scale-like statistics (means, stds, gradients, quantiles of optical density) are
        ``log(v + 1e-3)``.
    """
    x = x.float()
    b = x.shape[0]
    hed = rgb_to_hed(x)
    h, e, d = hed[:, 0], hed[:, 1], hed[:, 2]
    g = _grey(x)
    tissue = (g < _BACKGROUND_GREY).float()
    none = tissue.sum((-2, -1)) < 1
    w = torch.where(none[:, None, None], torch.ones_like(tissue), tissue)
    mh, me = _wmean(h, w), _wmean(e, w)
    nuclear = (h >= NUCLEAR_H_OD).float()
    eosin = (e >= 0.04).float()
    sat = x.max(1).values - x.min(1).values
    stain = [tissue.mean((-2, -1)), _wmean(x[:, 0], w), _wmean(x[:, 1], w), _wmean(x[:, 2], w),
             mh, me, _wmean(d, w), _wstd(h, w), _wstd(e, w),
             torch.log10(_wmean(nuclear, w) + 1e-3), torch.log10(_wmean(eosin, w) + 1e-3),
             mh / (mh + me + 1e-6), g.mean((-2, -1)), g.flatten(1).std(1, unbiased=False),
             _wmean(sat, w), _wmean(x[:, 0] - x[:, 2], w)]
    stain_t = torch.stack(stain, dim=1)
    logs = torch.tensor([lg for _, lg in _STAIN], device=x.device)
    stain_t = torch.where(logs, torch.log(stain_t.clamp_min(0) + _EPS), stain_t)
    hists = torch.cat([_hist(h, w, *_H_RANGE), _hist(e, w, *_E_RANGE)], dim=1)

    levels = []
    xl = x
    for lev in range(_LEVELS):
        if lev:
            xl = F.avg_pool2d(xl, 2, ceil_mode=True)
        hl = rgb_to_hed(xl)[:, 0]
        gl = _grey(xl)
        gm = _grad(gl)
        stats = torch.stack([
            gm.mean((-2, -1)), gm.flatten(1).std(1, unbiased=False), _grad(hl).mean((-2, -1)),
            _lag(gl, 1), _lag(gl, 2), gl.flatten(1).std(1, unbiased=False),
            hl.flatten(1).std(1, unbiased=False),
            torch.log10((hl >= NUCLEAR_H_OD).float().mean((-2, -1)) + 1e-3),
            torch.quantile(hl.flatten(1), 0.9, dim=1)], dim=1)
        levels.append(stats)
    lv = torch.stack(levels, dim=2)  # (B, 9, levels)
    tlog = torch.tensor(_TEXTURE_LOG, device=x.device)[None, :, None]
    lv = torch.where(tlog, torch.log(lv.clamp_min(0) + _EPS), lv)
    texture = torch.stack([lv.mean(2), lv.max(2).values], dim=2).flatten(1)

    hq = torch.quantile(h.flatten(1), torch.tensor([0.5, 0.99], device=x.device), dim=1).T
    eq = torch.quantile(e.flatten(1), torch.tensor([0.5, 0.99], device=x.device), dim=1).T
    hm_, em_ = h - mh[:, None, None], e - me[:, None, None]
    corr = _wmean(hm_ * em_, w) / (_wstd(h, w) * _wstd(e, w) + 1e-6)
    gq = torch.quantile(g.flatten(1), torch.tensor([0.1, 0.9], device=x.device), dim=1).T
    # tissue-only quantiles: push background to the bottom of the H/E range via the weights
    ht = torch.where(w > 0, h, torch.zeros_like(h))
    et = torch.where(w > 0, e, torch.zeros_like(e))
    frac_t = w.mean((-2, -1)).clamp_min(1e-6)
    q75 = (1 - 0.25 * frac_t).clamp(0, 1)
    hsort = ht.flatten(1).sort(1).values
    esort = et.flatten(1).sort(1).values
    n = hsort.shape[1]
    pos = (q75 * (n - 1)).round().long()[:, None]
    coarse = levels[-1]
    more = torch.stack([
        torch.log(hq[:, 0].clamp_min(0) + _EPS), torch.log(hq[:, 1].clamp_min(0) + _EPS),
        torch.log(eq[:, 0].clamp_min(0) + _EPS), torch.log(eq[:, 1].clamp_min(0) + _EPS),
        torch.log10((g < 0.5).float().mean((-2, -1)) + 1e-3), corr,
        _wmean(x[:, 0] - x[:, 1], w), gq[:, 0], gq[:, 1],
        torch.log(coarse[:, 5] + _EPS) - torch.log(levels[0][:, 5] + _EPS),
        torch.log(coarse[:, 6] + _EPS) - torch.log(levels[0][:, 6] + _EPS),
        torch.log(hsort.gather(1, pos)[:, 0].clamp_min(0) + _EPS),
        torch.log(esort.gather(1, pos)[:, 0].clamp_min(0) + _EPS),
        torch.log(_lag(g, 8) + _EPS)], dim=1)
    out = torch.cat([stain_t, hists, texture, more], dim=1)
    if out.shape[1] != len(FEATURE_NAMES):  # pragma: no cover - guarded by tests
        raise ModelError(f"heuristic features: {out.shape[1]} != {len(FEATURE_NAMES)}")
    return out.reshape(b, -1).float()


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


# Reference statistics (fit_reference over the set described in HeuristicEncoder; regenerated
# and checked by tests/models/test_heuristic_embedding.py).
_REF_CENTRE = np.array([
    0.928475, 0.790319, 0.533289, 0.692753, -4.76077, -3.63511, -3.64632, -3.68928,
    -5.07276, -1.57028, -2.23941, 0.279924, 0.663896, -2.44283, 0.269021, 0.0975664,
    0.876237, 0.178953, 0.129946, 0.0980469, 0.13525, 0.0514606, 0.038235, 0.0483389,
    0.179816, 0.857039, 0.215671, 0.0999483, 0.0573494, 0.0321591, 0.020753, 0.0345602,
    -3.67181, -3.32951, -3.32093, -2.98658, -5.22654, -5.00569, -3.7058, -3.29747,
    -3.47754, -3.11386, -2.78987, -2.44283, -4.26942, -3.71893, -1.93188, -1.60744,
    -4.80187, -4.27519, -5.68711, -2.94433, -3.93988, -3.08209, -1.4095, 0.568998,
    0.25703, 0.554383, 0.791272, -0.871493, -1.19963, -4.99378, -3.58864, -2.93304,
])
_REF_SCALE = np.array([
    0.13236, 0.162115, 0.124353, 0.124397, 1.39303, 0.155124, 0.358567, 1.05856,
    1.61356, 0.728891, 1.08005, 0.259307, 0.0966952, 0.835846, 0.0304004, 0.0448664,
    0.19356, 0.221366, 0.160667, 0.124334, 0.0782756, 0.079093, 0.0585421, 0.0734446,
    0.259287, 0.196601, 0.172769, 0.147276, 0.0853442, 0.047367, 0.0307062, 0.0529905,
    1.0503, 0.889759, 0.749812, 0.624824, 0.974325, 1.02483, 0.981316, 0.810877,
    1.09145, 0.915628, 1.00668, 0.835846, 0.936057, 1.01923, 0.753363, 0.686543,
    1.6632, 1.49013, 1.36245, 1.81491, 0.661076, 0.718586, 0.858579, 0.367958,
    0.0446698, 0.222249, 0.0888669, 0.488846, 0.349299, 1.60638, 0.221147, 0.936402,
])


class HeuristicEncoder(Encoder):
    """Deterministic 64-d colour/texture embedding (no learned weights).

    ``embedding = normalise(clip((heuristic_features(x) - centre) / scale, ±4))``: each raw
    statistic (:data:`FEATURE_NAMES`) is centred and scaled by fixed reference statistics of
    H&E tissue, so embeddings are signed and cosine similarity spreads over [-1, 1] (tissue of
    the same kind is close to 1, different kinds are far apart) instead of crowding near 1 as
    non-negative histograms do.

    The reference (``_REF_CENTRE``, ``_REF_SCALE``, see :func:`fit_reference`) is the
    class-balanced mean and spread over three groups of tissue images at 0.5, 1 and 2 µm/px
    (256–1024 px): real Aperio H&E tiles of ``CMU-1-Small-Region.svs`` (cellular epidermis and
    dermis) and wsikit's synthetic H&E-like loose stroma and densely packed nuclei
    (:func:`wsikit.synthetic.synthetic_tissue_image`); ``tests/models/test_heuristic.py``
    recomputes it. The images are analysed at native resolution with the shorter side kept
    in [128, 1024] px; texture is pooled over a 5-level pyramid, which makes a crop of the same
    tissue at 0.5 and 1 µm/px embed alike. The :attr:`label` carries
    :data:`HEURISTIC_VERSION`, so cached features of an older definition are not reused.
    """

    #: Images per chunk are limited to about this many pixels (bounds memory for large crops).
    max_chunk_pixels = 1 << 23

    def __init__(self, config: EncoderConfig = HEURISTIC_CONFIG) -> None:
        super().__init__(config)
        self.register_buffer("_centre", torch.as_tensor(_REF_CENTRE, dtype=torch.float32),
                             persistent=False)
        self.register_buffer("_scale", torch.as_tensor(_REF_SCALE, dtype=torch.float32),
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

    def preprocess(self, x: torch.Tensor) -> torch.Tensor:  # uint8 -> [0, 1] analysis size
        return _to_analysis(x)

    def forward_uint8(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 4 and x.shape[0] > 1:
            per = max(1, self.max_chunk_pixels // max(1, x.shape[-1] * x.shape[-2]))
            if per < x.shape[0]:
                return torch.cat([self(self.preprocess(c)) for c in x.split(per)])
        return self(self.preprocess(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, h, w)`` float RGB in [0, 1] -> ``(B, 64)`` float32, unit L2 norm."""
        z = (heuristic_features(x) - self._centre) / self._scale
        return F.normalize(z.clamp_(-_CLIP, _CLIP), dim=1, eps=1e-8)
