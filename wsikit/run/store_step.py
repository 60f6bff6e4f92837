"""The batch step ``store``: each slide's features also into a zarr cohort feature store.

``wsikit batch … --store zarr`` writes ``JOBDIR/features_<encoder>.zarr/<slide>/`` (see
:mod:`wsikit.features.store`) after the ``features`` step; ``--store zarr:URL`` writes to
another folder or any fsspec URL (``zarr:s3://bucket/cohort.zarr``). The h5 feature files are
still written (later steps read them); the store is for cohort-level consumers (training,
object storage). Every slide's group is written atomically, so all workers, shards and nodes
can fill one store; each group records its input's fingerprint, and a group of another input
(another job sharing the store, with a slide id in common) is never replaced: that slide fails
with one line naming both.
"""

from __future__ import annotations

from typing import Any

from .._hints import option
from ..errors import BatchError
from .steps import SlideContext, register_step

__all__ = ["parse_store", "store_step"]


def parse_store(store: str | None) -> str | None:
    """``None``/``"h5"`` → ``None`` (h5 only); ``"zarr"``/``"zarr:URL"`` → itself, checked."""
    if store in (None, "", "h5"):
        return None
    if store == "zarr" or (store.startswith("zarr:") and len(store) > len("zarr:")):
        return store
    raise BatchError(f"{option('store', store)}: use 'h5' (default), 'zarr' (JOBDIR/"
                     "features_<encoder>.zarr) or 'zarr:URL' (a folder or fsspec URL)")


def _store_url(ctx: SlideContext, encoder: str) -> str:
    store = str(ctx.config.store)
    if store == "zarr":
        return str(ctx.layout.feature_store(encoder))
    return store[len("zarr:"):]


@register_step("store", requires=("features",),
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision", "store"),
               description="features also into a zarr store (--store zarr)")
def store_step(ctx: SlideContext) -> dict[str, Any]:
    """Copy the slide's features into the zarr feature store, atomically per slide."""
    from ..features.store import open_store

    emb = ctx.embeddings()
    url = _store_url(ctx, emb.encoder)
    store = ctx.cache.get(("zarr-store", url))
    if store is None:
        store = ctx.cache[("zarr-store", url)] = open_store(url)
    # Keyed by the input: another job's result for this slide id is never replaced.
    store.write(ctx.slide_id, emb, fingerprint=ctx.fingerprint)
    if store.local is not None:  # the group's metadata exists only once the group is complete
        ctx.add_output("group", store.local / ctx.slide_id / "zarr.json")
    return {"store": url, "group": ctx.slide_id, "n_patches": len(emb)}
