"""Level-0 resolution (µm/px, "mpp") of a slide, resolved in a fixed, documented order.

Order (ARCHITECTURE.md): explicit user value › ``openslide.mpp-x/-y`` › ``aperio.MPP`` › TIFF
``XResolution``/``YResolution`` with ``ResolutionUnit`` (centimetre or inch; values outside
0.05–20 µm/px, such as 72-dpi defaults, are ignored) › objective power (``10 / power``, with a
warning) › the size of the slide's nuclei (:mod:`wsikit.slide.mpp_estimate`, with a warning that
names the estimate and its range; ``"estimated from nuclei"``) › :class:`~wsikit.errors.MppError`
telling the user to pass ``--mpp`` / ``mpp=`` (with what the nuclei suggest, never a made-up
example value). A user value for a slide that records no resolution is checked against the
nuclei: more than 2x from their estimate, a warning names both.

OpenSlide derives ``openslide.mpp-x`` of *generic* TIFFs from the TIFF resolution tags; for
those the value is attributed to (and range-checked as) ``tiff.resolution``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._hints import keyword, option
from ..errors import MppError

if TYPE_CHECKING:
    from .mpp_estimate import MppEstimate

__all__ = ["resolve_mpp", "check_mpp"]

#: Plausible level-0 resolutions in µm/px (anything else is a default or a unit mistake).
MPP_RANGE = (0.05, 20.0)

#: The source of a resolution estimated from nuclear size (:mod:`wsikit.slide.mpp_estimate`).
ESTIMATED = "estimated from nuclei"
#: Every value :func:`resolve_mpp` may report as its source.
MPP_SOURCES = ("user", "openslide.mpp", "aperio.MPP", "tiff.resolution", "objective-power",
               ESTIMATED)
#: A user value more than this factor from the nuclei's estimate is warned about.
CONTRADICTION = 2.0

_UM_PER_UNIT = {"centimeter": 1e4, "cm": 1e4, "3": 1e4, "inch": 25400.0, "2": 25400.0}


def _float(value: Any) -> float | None:
    if value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(out) or out <= 0:
        return None
    return out


def _plausible(mpp: float | None) -> bool:
    return mpp is not None and MPP_RANGE[0] <= mpp <= MPP_RANGE[1]


def check_mpp(mpp: Any, *, what: str = "mpp") -> float:
    """Validate a user-supplied mpp and return it as ``float``.

    Raises
    ------
    MppError
        If ``mpp`` is not a number within :data:`MPP_RANGE` (0.05–20 µm/px).
    """
    value = _float(mpp)
    if value is None or not _plausible(value):
        raise MppError(
            f"{what}={mpp!r} is not a plausible resolution: expected microns per pixel between "
            f"{MPP_RANGE[0]} and {MPP_RANGE[1]} (e.g. 0.25 for 40x, 0.5 for 20x scans)")
    return value


def _combine(mx: float | None, my: float | None, source: str, where: str,
             stacklevel: int = 4) -> float | None:
    """Mean of x/y mpp (warning if they differ by more than 1 %); None when unusable."""
    if mx is None and my is None:
        return None
    mx = mx if mx is not None else my
    my = my if my is not None else mx
    assert mx is not None and my is not None
    if abs(mx - my) > 0.01 * max(mx, my):
        warnings.warn(f"{where}: pixels are not square ({source} x={mx:g}, y={my:g} µm/px); "
                      f"using the mean {0.5 * (mx + my):g} µm/px", UserWarning,
                      stacklevel=stacklevel)
    return 0.5 * (mx + my)


def _tiff_resolution(props: Mapping[str, Any], name: str, stacklevel: int) -> float | None:
    unit = str(props.get("tiff.ResolutionUnit", "")).strip().lower()
    per_unit = _UM_PER_UNIT.get(unit)
    if per_unit is None:
        return None
    rx = _float(props.get("tiff.XResolution"))
    ry = _float(props.get("tiff.YResolution"))
    mx = per_unit / rx if rx else None
    my = per_unit / ry if ry else None
    if mx is None and my is None:
        return None
    mpp = _combine(mx, my, "TIFF resolution", name, stacklevel + 1)
    return mpp if _plausible(mpp) else None


def objective_power(props: Mapping[str, Any]) -> float | None:
    """Objective power from ``openslide.objective-power`` / ``aperio.AppMag`` (or None)."""
    for key in ("openslide.objective-power", "tiffslide.objective-power", "aperio.AppMag"):
        value = _float(props.get(key))
        if value is not None:
            return value
    return None


def resolve_mpp(properties: Mapping[str, Any], *, mpp: float | None = None,
                name: str = "slide", require: bool = True, stacklevel: int = 2,
                nuclei: Callable[[], MppEstimate] | None = None) -> tuple[float, str]:
    """Resolve the level-0 µm/px of a slide from its properties.

    Parameters
    ----------
    properties : mapping
        Slide properties in OpenSlide naming (``openslide.mpp-x``, ``aperio.MPP``,
        ``tiff.XResolution``, ``tiff.ResolutionUnit``, ``openslide.objective-power``, …).
    mpp : float, optional
        Explicit user value (wins over everything; must lie within 0.05–20 µm/px).
    name : str
        Slide name used in messages.
    require : bool
        If False, return ``(nan, "unknown")`` instead of raising when nothing is found.
    stacklevel : int
        ``stacklevel`` of the warnings (objective-power fallback, non-square pixels), relative
        to the caller of this function.
    nuclei : callable, optional
        Returns the slide's :class:`~wsikit.slide.mpp_estimate.MppEstimate` (or raises
        :class:`~wsikit.errors.MppError`); called only when the properties hold no resolution:
        the last resort, and the check of a user value for such a slide.

    Returns
    -------
    (mpp, source) : (float, str)
        µm/px and one of :data:`MPP_SOURCES`.

    Raises
    ------
    MppError
        If the user value is implausible, or no source gives a resolution (and ``require``).
    """
    if mpp is not None:
        given = check_mpp(mpp)
        if nuclei is not None:
            _check_against_nuclei(properties, given, name, nuclei, stacklevel + 1)
        return given, "user"
    vendor = str(properties.get("openslide.vendor", "") or "").lower()
    if vendor != "generic-tiff":
        value = _combine(_float(properties.get("openslide.mpp-x")),
                         _float(properties.get("openslide.mpp-y")), "openslide.mpp", name,
                         stacklevel + 1)
        if _plausible(value):
            assert value is not None
            return value, "openslide.mpp"
    value = _float(properties.get("aperio.MPP"))
    if _plausible(value):
        assert value is not None
        return value, "aperio.MPP"
    value = _tiff_resolution(properties, name, stacklevel + 1)
    if value is not None:
        return value, "tiff.resolution"
    power = objective_power(properties)
    if power is not None and _plausible(10.0 / power):
        bad = [r for r in _rejected(properties)
               if r.startswith("aperio.") or (r.startswith("openslide.mpp")
                                              and vendor != "generic-tiff")]
        why = (f"its resolution metadata is unusable ({'; '.join(bad)}; plausible is "
               f"{MPP_RANGE[0]}–{MPP_RANGE[1]} µm/px), so it is ignored" if bad
               else "no resolution metadata")
        warnings.warn(
            f"{name}: {why}; using {10.0 / power:g} µm/px from objective power {power:g}x "
            f"(10/power) instead. Pass {keyword('mpp')} if this is wrong.",
            UserWarning, stacklevel=stacklevel)
        return 10.0 / power, "objective-power"
    estimated, suggest = _from_nuclei(nuclei, name, stacklevel + 1)
    if estimated is not None:
        return estimated, ESTIMATED
    if not require:
        return float("nan"), "unknown"
    rejected = _rejected(properties)
    found = (f" The file's values are unusable ({'; '.join(rejected)}; plausible is "
             f"{MPP_RANGE[0]}–{MPP_RANGE[1]} µm/px)." if rejected else "")
    raise MppError(
        f"{name}: cannot determine the resolution (microns per pixel): no usable "
        f"openslide.mpp-x, aperio.MPP, TIFF resolution or objective power.{found}{suggest} "
        f"Pass the slide's level-0 µm/px explicitly with {keyword('mpp')} (the scanner or its "
        "scan report records it).")


def _from_nuclei(nuclei: Callable[[], MppEstimate] | None, name: str, stacklevel: int
                 ) -> tuple[float | None, str]:
    """``(µm/px estimated from the nuclei, "")`` with a warning saying so, or ``(None, why
    not)``: the last resort of :func:`resolve_mpp`, for a slide without resolution metadata
    (``nuclei=None``: no estimate)."""
    if nuclei is None:
        return None, ""
    try:
        est = nuclei()
    except MppError as exc:
        return None, f" Its nuclei could not be measured either: {exc}."
    if not est.resolved:
        return None, (f" Its nuclei suggest {est.describe()}: too small to measure, so no "
                      "estimate is used.")
    warnings.warn(
        f"{name}: no resolution metadata; {est.mpp:.2f} µm/px estimated from the "
        f"size of its nuclei (range {est.low:.2f}–{est.high:.2f} µm/px, "
        f"{est.n_nuclei} nuclei of {est.diameter_px:.1f} px), recorded as "
        f"'{ESTIMATED}'. Pass {keyword('mpp')} with the scanner's value if you "
        "know it.", UserWarning, stacklevel=stacklevel)
    return est.mpp, ""


def _check_against_nuclei(properties: Mapping[str, Any], value: float, name: str,
                          nuclei: Callable[[], MppEstimate], stacklevel: int) -> None:
    """Warn when a user's ``value`` for a slide without a resolution of its own is more than
    :data:`CONTRADICTION` times off the estimate from its nuclei."""
    with warnings.catch_warnings():   # the file's own resolution only decides whether to look
        warnings.simplefilter("ignore")
        own, _ = resolve_mpp(properties, name=name, require=False)
    if math.isfinite(own):
        return
    try:
        est = nuclei()
    except MppError:
        return
    if not est.resolved:
        off = value * CONTRADICTION < est.low    # only a lower bound is known
    else:
        off = not est.mpp / CONTRADICTION <= value <= est.mpp * CONTRADICTION
    if off:
        warnings.warn(
            f"{name}: {option('mpp', value)} contradicts the size of its nuclei, which "
            f"suggests {est.describe()}: {value:g} µm/px is {_factor(value, est.mpp)} that. "
            "Check the value (the scanner or its scan report records it).", UserWarning,
            stacklevel=stacklevel)


def _factor(value: float, estimate: float) -> str:
    ratio = value / estimate
    return f"{ratio:.1f}x" if ratio >= 1 else f"1/{1 / ratio:.1f} of"


def _rejected(props: Mapping[str, Any]) -> list[str]:
    """Resolution values present in ``props`` but unusable, as found (for messages): not a
    finite positive number (``-0.25``, ``nan``, text) or outside :data:`MPP_RANGE`."""
    out = []

    def unusable(key: str, raw: Any) -> str | None:
        if raw is None or not str(raw).strip():
            return None
        if _float(raw) is None:  # shown as written: "-0.25", "nan", "0.25um"
            return f"{key} = {str(raw).strip()[:40]!r} (not a positive number)"
        return None

    for key in ("openslide.mpp-x", "openslide.mpp-y", "aperio.MPP"):
        raw = props.get(key)
        value = _float(raw)
        if (bad := unusable(key, raw)) is not None:
            out.append(bad)
        elif value is not None and not _plausible(value):
            out.append(f"{key} = {value:g} µm/px")
    unit = str(props.get("tiff.ResolutionUnit", "")).strip().lower()
    raw_x = props.get("tiff.XResolution")
    rx = _float(raw_x)
    if unit in _UM_PER_UNIT and (bad := unusable("TIFF XResolution", raw_x)) is not None:
        out.append(bad)
    elif rx and unit in _UM_PER_UNIT and not _plausible(_UM_PER_UNIT[unit] / rx):
        out.append(f"TIFF XResolution {rx:g} px/{unit} = {_UM_PER_UNIT[unit] / rx:g} µm/px")
    power = objective_power(props)
    if power is not None and not _plausible(10.0 / power):
        out.append(f"objective power {power:g}x = {10.0 / power:g} µm/px")
    elif power is None:
        for key in ("openslide.objective-power", "aperio.AppMag"):
            if (bad := unusable(key, props.get(key))) is not None:
                out.append(bad)
                break
    return out
