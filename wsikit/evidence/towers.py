"""Second vectors per figure from a vision-language tower (e.g. ``quiltnet_b32``, ``plip``).

A tower embeds figures *and text* into one space, so a question can be compared with the
figures themselves, not only with their captions. Every image-text model of the registry can
be one (:func:`tower_encoders`: QuiltNet-B/32 and -B/16, PLIP, OpenAI CLIP ViT-B/32); the
tower's manifest records the model, its weight file's SHA-256 and its preprocessing, and a
query with another model or another weight file is refused. Its vectors live beside the main
index::

    DIR/towers/<encoder>/manifest.json       encoder, count, fingerprint of the node ids, file
    DIR/towers/<encoder>/vectors-00000N.faiss  exact inner-product index, row i = node row i

Rows are the main index's rows (append-only), so a tower that covers the first ``count`` rows
stays correct after ``wsikit index add``; :func:`update_tower` embeds the rows it lacks (``wsikit
index tower DIR`` again, or automatically by ``index add``). Each version is written under a new
name and committed by replacing the tower's manifest, so an interrupted update leaves the
previous tower valid. Towers are fused with the other channels **by rank only** (their
cosine similarities are never mixed with another encoder's).
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import atomic_path, write_json_atomic
from ..errors import EncoderMismatchError, EvidenceError
from ..outputs.cache_record import sha256_file
from . import _faiss as fu
from ._index_writer import embed_images, encoder_info
from .index import FigureIndex
from .nodes import FigureNode, load_image

__all__ = [
    "Tower",
    "check_tower_encoder",
    "create_tower_encoders",
    "list_towers",
    "open_tower",
    "tower_encoders",
    "update_tower",
]


TOWER_FORMAT = "wsikit.tower/v1"
_VECTORS = re.compile(r"^vectors-\d+\.faiss$")
#: Weight layouts of the registry's image-text models (both towers in one space): open_clip
#: (QuiltNet-B/32, -B/16) and transformers CLIP (PLIP, OpenAI CLIP).
TOWER_LAYOUTS = ("open_clip", "hf_clip")


def tower_encoders() -> list[str]:
    """Registered encoders that can be a tower: image and text towers in one space."""
    from ..models import get_config, list_encoders

    return [n for n in list_encoders() if get_config(n).layout in TOWER_LAYOUTS]


def check_tower_encoder(name: str) -> None:
    """Refuse, before any weights load, an encoder that cannot be a tower (no text tower).

    wsikit's own encoders are judged by their weight layout; an encoder registered at run
    time is judged when built (it needs ``encode_text``), unless it is a slide encoder.

    Raises
    ------
    EvidenceError
        ``name`` is not an image-text model (names the ones that are).
    """
    from ..models import get_config
    from ..models.configs import BUILTIN_CONFIGS

    config = get_config(name)  # an unknown name: ModelError listing the encoders
    if config.role != "slide" and name not in BUILTIN_CONFIGS:
        return
    if config.layout not in TOWER_LAYOUTS:
        what = "a slide encoder" if config.role == "slide" else "an image-only encoder"
        raise EvidenceError(f"{name} is {what} (it has no text tower); a tower embeds figures "
                            f"and text into one space: use one of "
                            f"{', '.join(tower_encoders())}")


def _fingerprint(node_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(node_ids).encode("utf-8")).hexdigest()


def _folder(index: FigureIndex, name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise EvidenceError(f"tower name {name!r} must be an encoder name")
    return index.path / "towers" / name


def list_towers(index: FigureIndex) -> list[str]:
    """Names of the towers stored with ``index``."""
    root = index.path / "towers"
    return sorted(p.name for p in root.iterdir() if (p / "manifest.json").is_file()) \
        if root.is_dir() else []


@dataclass(frozen=True)
class Tower:
    """An opened tower: its manifest, FAISS index and the main index it belongs to."""

    index: FigureIndex
    name: str
    manifest: dict[str, Any]
    faiss_index: Any

    @property
    def count(self) -> int:
        """Node rows covered (the first ``count`` rows of the main index)."""
        return int(self.manifest["count"])

    def check_encoder(self, encoder: Any) -> None:
        """Refuse an encoder other than the one the tower was built with: another model, or
        the same model with another weight file (when both SHA-256 are known)."""
        built = self.manifest["encoder"]
        if encoder.config.name != built["name"] or int(encoder.config.dim) != built["dim"]:
            raise EncoderMismatchError(f"tower {self.name} of {self.index.path} was built with "
                                       f"{built['name']} (dim {built['dim']}), not "
                                       f"{encoder.config.name}; query it with "
                                       f"--tower {built['name']}, or build a tower of "
                                       f"{encoder.config.name}: wsikit index tower "
                                       f"{self.index.path} --encoder {encoder.config.name}")
        want, got = built.get("weights_sha256"), getattr(encoder, "weights_sha256", None)
        if want and got and want != got:
            raise EncoderMismatchError(f"tower {self.name} of {self.index.path} was built with "
                                       f"the {built['name']} weights of SHA-256 {want}; these "
                                       f"weights are {got}, whose vectors are not comparable. "
                                       "Use the weight file the tower was built with, or "
                                       f"rebuild it: wsikit index tower {self.index.path} "
                                       f"--encoder {built['name']} --rebuild")

    def rank(self, vectors: np.ndarray, depth: int) -> list[list[FigureNode]]:
        """Figures by descending cosine to each query vector (text or image, ``(B, dim)``)."""
        v = fu.normalise(np.atleast_2d(np.asarray(vectors, np.float32)))
        depth = max(1, min(depth, self.count))
        allowed = self.index._allowed  # a licence view of the index: only its figures
        if allowed is None:
            _, ids = self.faiss_index.search(v, depth)
        else:
            _, ids = fu.search_within(self.faiss_index, v, depth, allowed[:self.count])
        rows = sorted({int(i) for i in ids.ravel() if i >= 0})
        nodes = dict(zip(rows, self.index.nodes(rows), strict=True))
        return [[nodes[int(i)] for i in row if i >= 0] for row in ids]

    def rank_texts(self, encoder: Any, texts: Sequence[str], depth: int
                   ) -> list[list[FigureNode]]:
        """Rank figures for texts with the tower's text tower (text → image similarity)."""
        self.check_encoder(encoder)
        if not hasattr(encoder, "encode_text"):
            raise EvidenceError(f"encoder {encoder.config.name} has no text tower")
        return self.rank(encoder.encode_text(list(texts)), depth)

    def rank_images(self, encoder: Any, images: Sequence[np.ndarray], depth: int
                    ) -> list[list[FigureNode]]:
        """Rank figures for images with the tower's image tower."""
        self.check_encoder(encoder)
        return self.rank(embed_images(list(images), encoder), depth)


def open_tower(index: FigureIndex, name: str) -> Tower:
    """Open the tower ``name`` of ``index`` (checksum verified; warns when it covers fewer
    figures than the index).

    Raises
    ------
    EvidenceError
        No such tower (with the command that builds it), corrupt files, or node ids that do
        not match the index (the index was rebuilt: rebuild the tower).
    """

    folder = _folder(index, name)
    mpath = folder / "manifest.json"
    if not mpath.is_file():
        have = list_towers(index)
        raise EvidenceError(f"index {index.path} has no {name} tower"
                            + (f" (it has: {', '.join(have)})" if have else "")
                            + f"; add one with: wsikit index tower {index.path} --encoder {name}")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{mpath} is not valid JSON ({exc}); rebuild the tower") from exc
    if manifest.get("format") != TOWER_FORMAT:
        raise EvidenceError(f"{mpath}: format {manifest.get('format')!r} is not {TOWER_FORMAT!r}")
    fpath = folder / manifest["file"]
    if not fpath.is_file() or sha256_file(fpath) != manifest["checksum"]:
        raise EvidenceError(f"tower {name} of {index.path}: {fpath.name} is missing or does not "
                            f"match its checksum; rebuild it: wsikit index tower {index.path} "
                            f"--encoder {name} --rebuild")
    count: Any = manifest.get("count")
    dim: Any = (manifest.get("encoder") or {}).get("dim")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (count, dim)):
        raise EvidenceError(f"{mpath}: count {count!r} and encoder dim {dim!r} must be "
                            f"non-negative integers; rebuild it: wsikit index tower "
                            f"{index.path} --encoder {name} --rebuild")
    ids = [n.node_id for n in index.nodes(range(min(count, index.count)))]
    if count > index.count or _fingerprint(ids) != manifest["nodes_sha256"]:
        raise EvidenceError(f"tower {name} does not belong to the current figures of "
                            f"{index.path} (the index was rebuilt); rebuild it: wsikit index "
                            f"tower {index.path} --encoder {name} --rebuild")
    if count < index.count:
        warnings.warn(f"tower {name} covers {count} of {index.count} figures of {index.path}; "
                      f"update it: wsikit index tower {index.path} --encoder {name}",
                      stacklevel=2)
    return Tower(index, name, manifest, fu.read_index(fpath, dim=dim, count=count))


def create_tower_encoders(index: FigureIndex, names: Sequence[str], *, device: str = "cpu",
                          weights: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{name: encoder}`` of the towers ``names`` of ``index``, for fused queries.

    Each tower is opened first, so a missing or stale tower fails before a model is loaded;
    ``weights`` (``{name: file}``) overrides weight discovery as everywhere else.
    """
    from ..models import create_encoder

    out: dict[str, Any] = {}
    opened = {name: open_tower(index, name) for name in dict.fromkeys(names)}
    for name, tower in opened.items():
        out[name] = create_encoder(name, weights=(weights or {}).get(name), device=device)
        tower.check_encoder(out[name])  # same model and weight file as the tower's vectors
    return out


def update_tower(index: FigureIndex, encoder: Any, *, rebuild: bool = False,
                 batch_size: int = 32) -> int:
    """Embed the figures the tower of ``encoder`` lacks (all with ``rebuild``); returns how many.

    Raises
    ------
    EvidenceError
        The existing tower belongs to other figures (pass ``rebuild=True``).
    """
    import faiss
    from filelock import FileLock

    name = encoder.config.name
    folder = _folder(index, name)
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / ".lock")):
        tower = None
        if not rebuild and (folder / "manifest.json").is_file():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "covers fewer figures": being fixed now
                tower = open_tower(index, name)
            tower.check_encoder(encoder)
        start = tower.count if tower is not None else 0
        nodes = index.nodes(range(start, index.count))
        if not nodes and tower is not None:
            return 0
        vec = embed_images([load_image(n.image) for n in nodes], encoder,
                           batch_size=batch_size) if nodes else np.zeros((0, encoder.config.dim),
                                                                         np.float32)
        cpu = faiss.clone_index(tower.faiss_index) if tower is not None else \
            faiss.IndexFlatIP(int(encoder.config.dim))
        cpu.add(np.ascontiguousarray(vec, dtype=np.float32))
        version = (int(tower.manifest["version"]) + 1) if tower is not None else 1
        fname = f"vectors-{version:06d}.faiss"
        with atomic_path(folder / fname) as tmp:
            faiss.write_index(cpu, str(tmp))
        ids = [n.node_id for n in index.nodes(range(index.count))]
        manifest = {"format": TOWER_FORMAT, "version": version,
                    "encoder": encoder_info(encoder), "metric": "cosine",
                    "count": index.count, "nodes_sha256": _fingerprint(ids), "file": fname,
                    "checksum": sha256_file(folder / fname),
                    "weights": getattr(encoder, "weights_source", None)}
        write_json_atomic(folder / "manifest.json", manifest)  # the commit point
        for entry in folder.iterdir():
            if _VECTORS.match(entry.name) and entry.name != fname:
                entry.unlink(missing_ok=True)
    return len(nodes)
