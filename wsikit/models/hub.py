"""Weight resolution and loading, with errors that say what to do.

Resolution order for encoder ``NAME`` (first hit wins; the source is recorded):

1. an explicit ``weights=PATH`` (CLI ``--weights NAME=PATH``);
2. the environment variable ``WSIKIT_WEIGHTS_<NAME>`` (e.g. ``WSIKIT_WEIGHTS_CONCH_V1_5``);
3. a TOML config file, ``$WSIKIT_CONFIG`` or ``~/.config/wsikit/weights.toml``, with lines
   ``NAME = "PATH"`` (top level or under a ``[weights]`` table);
4. the Hugging Face cache, then the hub, through :func:`huggingface_hub.hf_hub_download`
   (honouring ``HF_HOME`` / ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN``, read at call
   time). ``trust_remote_code`` is never used: wsikit builds the architectures itself.

Files load with :mod:`safetensors` (``*.safetensors``) or ``torch.load(weights_only=True)``.
Finding weights (:func:`resolve_weights`, :func:`find_weights`, :func:`weights_status`) does
not import torch (configs come from :mod:`wsikit.models.configs`); loading them does.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._environment import variable
from .._hints import on_command_line
from ..errors import ModelError, WeightsError
from .configs import AUTO_PREFERENCE, EncoderConfig, get_config, list_configs

if TYPE_CHECKING:  # torch loads only to read or load weights: the lookup stays torch-free
    import torch

__all__ = [
    "ResolvedWeights",
    "resolve_weights",
    "find_weights",
    "config_problems",
    "load_state_dict",
    "load_into",
    "explicit_weights",
    "weights_status",
    "weights_sha256",
    "config_path",
    "hf_cache_dir",
]

#: Extra (repo, file) places a model's weights are published, tried after the config's own.
EXTRA_SOURCES: dict[str, tuple[tuple[str, str], ...]] = {
    "conch_v1_5": (("MahmoodLab/TITAN", "conch_v1_5_pytorch_model.bin"),),
}


@dataclass(frozen=True)
class ResolvedWeights:
    """Where an encoder's weights were found: ``path`` and ``source`` (``explicit``,
    ``env:VAR``, ``config:FILE``, ``hf-cache`` or ``hf-hub``)."""

    path: Path
    source: str


def env_var(name: str) -> str:
    """The environment variable that points at ``name``'s weights."""
    return "WSIKIT_WEIGHTS_" + name.upper().replace("-", "_").replace(".", "_")


def config_path() -> Path:
    """The weights config file (``$WSIKIT_CONFIG`` or ``~/.config/wsikit/weights.toml``)."""
    env = variable("WSIKIT_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path("~/.config/wsikit/weights.toml").expanduser()


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder, from the environment at call time."""
    cache = variable("HF_HUB_CACHE")
    if cache:
        return Path(cache).expanduser()
    home = variable("HF_HOME") or os.path.join(variable("XDG_CACHE_HOME") or "~/.cache",
                                               "huggingface")
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for no network (the cache only)."""
    return (variable("HF_HUB_OFFLINE") or "").upper() in ("1", "ON", "YES", "TRUE")


def _read_config(path: Path) -> dict[str, str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WeightsError(f"cannot read weights config {path}: {exc}; fix the file (lines "
                           "like conch_v1_5 = \"/path/to/file\") or unset WSIKIT_CONFIG") from exc
    table = data.get("weights", data)
    return {str(k): v if isinstance(v, str) else repr(v) for k, v in table.items()
            if not isinstance(v, dict)}


def weights_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be a weights file (missing, a folder, a device such as /dev/zero,
    a FIFO, empty), or None; nothing is opened (a device or FIFO would be read forever)."""
    import stat

    p = Path(path).expanduser()
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a weights file"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a socket")
        return f"is {kind}, not a regular file"
    if st.st_size == 0:
        return "is empty (0 bytes)"
    return None


def _existing(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path).expanduser()
    problem = weights_file_problem(p)
    if problem is not None:
        raise WeightsError(f"weights file {p} (from {what}) {problem}; fix the path")
    return p


def _how_to_get(config: EncoderConfig, *, gated: bool | None = None) -> str:
    """How to get ``config``'s weights: access (``gated``: as the hub answered, else the
    table's), the one file to download (and the model config read beside it), where to put
    it, and the licence it comes under."""
    gated = config.gated if gated is None else gated
    files = config.hub_files
    one = files[0] if len(files) == 1 else "one of " + " or ".join(files)
    beside = (f" (and {config.hf_config} into the same folder: the architecture is read from "
              "it)" if config.hf_config else "")
    page = f"https://huggingface.co/{config.hub_repo}"
    access = (f"request access at {page} (the repository is gated), then run 'hf auth login' "
              "(or set HF_TOKEN) and rerun online" if gated else
              f"rerun online to download them from {page}")
    given = (f"--weights {config.name}=PATH" if on_command_line() else
             f"weights=PATH (select: weights={{{config.name!r}: PATH}})")
    terms = f"licence: {config.license}" + (
        ", not for commercial use" if config.commercial_use is False else "")
    return (f"{access}; or download {one}{beside} yourself and pass {given}, set "
            f"{env_var(config.name)}=PATH, or add {config.name} = \"PATH\" to {config_path()} "
            f"({terms})")


def resolve_weights(name: str, weights: str | os.PathLike[str] | None = None, *,
                    local_only: bool = False, use_config: bool = True) -> ResolvedWeights:
    """Find the weight file of encoder ``name`` (see the module docstring for the order).

    Parameters
    ----------
    name : str
        Registered encoder name.
    weights : path, optional
        Explicit file; wins over everything else.
    local_only : bool
        Do not contact the hub (cache and local files only).
    use_config : bool
        Consult the weights config file (False skips it, e.g. when it is broken).

    Raises
    ------
    WeightsError
        With instructions: gated/no access, offline and not cached, missing file.
    """
    config = get_config(name)
    if config.heuristic:
        raise WeightsError(f"encoder {name!r} is weight-free and has no weights to resolve")
    if weights is not None:
        return ResolvedWeights(_existing(weights, "the explicit weights argument"), "explicit")
    var = env_var(name)
    given = variable(var)
    if given:
        return ResolvedWeights(_existing(given, var), f"env:{var}")
    cfg = config_path()
    if use_config and cfg.is_file():
        entries = _read_config(cfg)
        if name in entries:
            return ResolvedWeights(_existing(entries[name], f"config file {cfg}"),
                                   f"config:{cfg}")
    return _resolve_hf(config, local_only=local_only)


def _in_hf_cache(cache: Path, candidates: list[tuple[str, str]]) -> bool:
    """Whether any candidate file is in the Hugging Face cache layout on disk (a cheap check
    before importing huggingface_hub, which costs a few tenths of a second)."""
    return any(any((cache / f"models--{repo.replace('/', '--')}" / "snapshots").glob(
        f"*/{filename}")) for repo, filename in candidates)


def _resolve_hf(config: EncoderConfig, *, local_only: bool) -> ResolvedWeights:
    assert config.hub_repo is not None  # non-heuristic configs always name a repo
    cache = hf_cache_dir()
    no_network = local_only or offline()
    candidates = [(config.hub_repo, f) for f in config.hub_files]
    candidates += list(EXTRA_SOURCES.get(config.name, ()))
    if no_network and not _in_hf_cache(cache, candidates):
        raise _not_found(config, cache, candidates, unreachable=False, local_only=local_only)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    token = variable("HF_TOKEN")
    # cache first (no network), then the hub (only if it answers: hf_hub_download retries a
    # dead network for about a minute per file before giving up)
    unreachable = False
    for local in (True, False) if not no_network else (True,):
        if not local and not _hub_reachable():
            unreachable = True
            break
        for repo, filename in candidates:
            try:
                path = hf_hub_download(repo, filename, cache_dir=str(cache),
                                       local_files_only=local, token=token)
            except GatedRepoError as exc:
                raise WeightsError(  # the hub's answer decides, not the table
                    f"{config.name}: {repo} is gated and this account has no access; "
                    f"{_how_to_get(config, gated=True)}") from exc
            except (EntryNotFoundError, LocalEntryNotFoundError, OfflineModeIsEnabled):
                continue
            except RepositoryNotFoundError as exc:
                raise WeightsError(
                    f"{config.name}: repository {repo} not found or not accessible with the "
                    f"current token; {_how_to_get(config)}") from exc
            except (OSError, ValueError) as exc:  # network failures surface as OSError
                if local:
                    continue
                raise WeightsError(f"{config.name}: downloading {repo}/{filename} failed "
                                   f"({exc}); {_how_to_get(config)}") from exc
            return ResolvedWeights(Path(path), "hf-cache" if local else "hf-hub")
    raise _not_found(config, cache, candidates, unreachable=unreachable, local_only=local_only)


def _not_found(config: EncoderConfig, cache: Path, candidates: list[tuple[str, str]], *,
               unreachable: bool, local_only: bool) -> WeightsError:
    where = ", ".join(f"{cache}/models--{r.replace('/', '--')}/snapshots/<rev>/{f}"
                      for r, f in candidates)
    mode = "offline (HF_HUB_OFFLINE=1)" if offline() else (
        "looking locally only" if local_only else
        "the Hugging Face hub is unreachable (no network)" if unreachable else
        "the hub could not provide them")
    return WeightsError(
        f"{config.name}: weights not found, {mode}; expected "
        f"{'one of ' if len(config.hub_files) > 1 else ''}{' or '.join(config.hub_files)} "
        f"from {config.hub_repo} in the Hugging Face cache ({where}); {_how_to_get(config)}")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face endpoint accepts a TCP connection within ``timeout`` s."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(variable("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def _check_config(path: Path) -> list[tuple[str | None, str]]:
    """``(encoder name, problem)`` for each fault of the weights config ``path``; the name is
    None when the whole file is unreadable."""
    if not path.exists():
        return []
    import difflib

    from .configs import list_configs

    try:
        entries = _read_config(path)
    except WeightsError as exc:
        return [(None, str(exc))]
    known = [c.name for c in list_configs()]
    out: list[tuple[str | None, str]] = []
    for name, value in entries.items():
        if name not in known:  # a typo would otherwise be ignored without a word
            near = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            out.append(("*", f"{path}: {name!r} is not an encoder wsikit knows; {hint}"
                             f"use one of {known}"))
        elif (problem := weights_file_problem(value)) is not None:
            out.append((name, f"{path}: {name} = {value!r} names a file that {problem}; "
                              "fix the path"))
    return out


def config_problems(path: str | os.PathLike[str] | None = None) -> list[str]:
    """What is wrong with the weights config file (default :func:`config_path`): malformed,
    or naming files that do not exist. Empty when it is fine or absent."""
    return [msg for _, msg in _check_config(config_path() if path is None else Path(path))]


_WARNED: set[str] = set()  # config problems already reported by find_weights


def find_weights(name: str) -> ResolvedWeights | None:
    """Locally available weights of ``name`` (no network), or None.

    The lookup behind every ``"auto"`` choice. A weights config that is malformed, or names a
    missing file for ``name``, is skipped with a :class:`UserWarning` (once per problem and
    process) naming the file and the fault, instead of silently falling back; an entry under
    a name wsikit does not know (a typo such as ``conch_v15``) is warned about too.
    """
    found = _check_config(config_path())
    problems = [msg for who, msg in found if who in (None, name)]
    for msg in problems:
        if msg not in _WARNED:
            _WARNED.add(msg)
            warnings.warn(f"{msg} (wsikit ignores the config while looking for {name} weights "
                          "automatically, so it uses weights found elsewhere or a weight-free "
                          "heuristic)", UserWarning, stacklevel=2)
    for msg in (msg for who, msg in found if who == "*"):  # unknown names: likely typos
        if msg not in _WARNED:
            _WARNED.add(msg)
            warnings.warn(f"{msg} (that entry is not used)", UserWarning, stacklevel=2)
    try:
        return resolve_weights(name, local_only=True, use_config=not problems)
    except WeightsError:
        return None


def load_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a ``*.safetensors`` file or a torch pickle with ``weights_only=True``."""
    import torch

    p = Path(path)
    if (problem := weights_file_problem(p)) is not None:
        raise WeightsError(f"weights file {p} {problem}; fix the path")
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import load_file

            sd: Any = load_file(str(p), device="cpu")
        else:
            try:  # memory-mapped: no second copy of a multi-GB file in memory
                sd = torch.load(str(p), map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # legacy (non-zip) pickles cannot be memory-mapped
                sd = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise WeightsError(f"cannot read weights file {p}: {type(exc).__name__}: {exc}; "
                           "it must be a safetensors file or a torch state dict "
                           "(loadable with weights_only=True)") from exc
    for wrapper in ("state_dict", "model"):
        if isinstance(sd, Mapping) and set(sd) == {wrapper}:
            sd = sd[wrapper]
    if not isinstance(sd, Mapping) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise WeightsError(f"weights file {p} does not hold a flat state dict of tensors")
    return dict(sd)


def _strip_prefix(sd: dict[str, torch.Tensor], prefix: str,
                  expected: Iterable[str]) -> dict[str, torch.Tensor]:
    if prefix and any(k.startswith(prefix) for k in sd):
        return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    expected = set(expected)
    if not expected & set(sd):
        for wrapper in ("module.", "visual.", "model."):
            stripped = {k[len(wrapper):]: v for k, v in sd.items() if k.startswith(wrapper)}
            if expected & set(stripped):
                return stripped
    return sd


def load_into(model: torch.nn.Module, path: str | os.PathLike[str],
              config: EncoderConfig) -> None:
    """Load ``path`` into ``model`` with ``strict=True`` after checking keys and shapes.

    The model may define ``adapt_state_dict(sd) -> sd`` (e.g. positional-embedding
    interpolation). Raises :class:`WeightsError` naming missing/unexpected keys or the first
    shape mismatch (key, expected shape, got shape).
    """
    own = model.state_dict()
    sd = _strip_prefix(load_state_dict(path), config.state_prefix, own)
    adapt = getattr(model, "adapt_state_dict", None)
    if callable(adapt):
        sd = adapt(sd)
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    if missing or unexpected:
        raise WeightsError(
            f"{config.name}: weights file {path} does not match the architecture: "
            f"{len(missing)} missing keys {missing[:5]}, {len(unexpected)} unexpected keys "
            f"{unexpected[:5]}; check that the file is {' or '.join(config.hub_files)} "
            f"from {config.hub_repo}")
    for key, value in own.items():
        if tuple(sd[key].shape) != tuple(value.shape):
            raise WeightsError(
                f"{config.name}: shape mismatch for key {key!r} in {path}: expected "
                f"{tuple(value.shape)}, got {tuple(sd[key].shape)}; the file is not "
                f"{config.hub_repo} weights")
    model.load_state_dict(sd, strict=True)


#: What a ``weights`` argument may be (:func:`explicit_weights`).
WeightsArg = (Mapping[str, "str | os.PathLike[str]"] | Iterable[str] | Iterable[tuple[str, str]]
              | str | os.PathLike[str] | None)


def explicit_weights(weights: WeightsArg, *, encoder: str | None = None,
                     check: bool = True) -> dict[str, str]:
    """The weight files the user gave, as ``{model: file}``, every one checked before any work.

    Every command and function that loads a model takes ``weights`` through this one function,
    so a path is always checked, whether or not the run then loads that model.

    Parameters
    ----------
    weights
        ``{model: file}``, ``(model, file)`` pairs, one file (``encoder``'s), or the command
        line's ``--weights`` values (``NAME=PATH``, or a bare ``PATH``: ``encoder``'s). A file
        given for ``"auto"`` is that of auto's first choice, CONCH v1.5 (so a CONCH weight file
        passed with the default ``--encoder auto`` is used, not ignored).
    encoder : str, optional
        The model a file without a name belongs to.
    check : bool
        Refuse an unknown or weight-free model, and a file that cannot be weights (missing, a
        folder, a device, a FIFO, empty); ``False`` only converts (options read back from a
        record, in a process that may lack the plugins that register some models).

    Raises
    ------
    ModelError
        A malformed ``NAME=PATH``, an unknown or weight-free model, a file without a model,
        two files for one model.
    WeightsError
        A file that cannot be a weights file (names it, its model and the fix).
    """
    if weights is None:
        return {}
    pairs: list[tuple[str | None, str]]
    if isinstance(weights, (str, os.PathLike)):
        pairs = [(None, os.fspath(weights))]
    elif isinstance(weights, Mapping):
        pairs = [(str(k), os.fspath(v)) for k, v in weights.items()]
    else:
        pairs = [(str(item[0]), os.fspath(item[1])) if isinstance(item, (tuple, list))
                 else _split_item(str(item), check=check) for item in weights]
    out: dict[str, str] = {}
    for name, path in pairs:
        bare = name is None
        if name is None:
            if encoder is None:
                raise ModelError(f"{_flag()} {path}: a weight file without a model name; give "
                                 f"NAME=PATH, e.g. conch_v1_5={path}")
            name = encoder
        if name == "auto":
            name = _auto_weights_model()
        if check:
            _check_entry(name, path, bare=bare)
        if out.get(name, path) != path:
            raise ModelError(f"{_flag()}: two weight files for {name} ({out[name]} and "
                             f"{path}); give one")
        out[name] = path
    return out


def _flag() -> str:
    return "--weights" if on_command_line() else "weights"


def _auto_weights_model() -> str:
    """The model a weight file given for ``"auto"`` belongs to (auto's first patch choice)."""
    return AUTO_PREFERENCE["patch"][0]


def _registered_names() -> list[str]:
    return [config.name for config in list_configs()]


def _split_item(item: str, *, check: bool) -> tuple[str | None, str]:
    """A command-line ``--weights`` value: ``(model or None, file)``."""
    name, sep, path = item.partition("=")
    name, path = name.strip(), path.strip()
    known = _registered_names()
    if sep and (name in known or name == "auto" or not check):
        if not name or not path:
            raise ModelError(f"--weights {item!r}: expected NAME=PATH, e.g. "
                             "--weights conch_v1_5=/data/pytorch_model_vision.bin")
        return name, path
    if not sep or os.path.lexists(item):  # a bare path (one with '=' in it, when it exists)
        return None, item
    raise ModelError(f"--weights {item!r}: unknown model {name!r} (expected NAME=PATH); choose "
                     f"one of {', '.join(known)}")


def _check_entry(name: str, path: str, *, bare: bool = False) -> None:
    try:
        config = get_config(name)
    except ModelError:
        raise ModelError(f"{_flag()} {name}={path}: unknown model {name!r}; choose one of "
                         f"{', '.join(_registered_names())}") from None
    if config.heuristic:
        given = (f"{_flag()} {path}: a weight file without a model name is the encoder's, "
                 if bare else f"{_flag()} {name}={path}: ")
        raise ModelError(f"{given}{name}, which is weight-free and takes no weight file; "
                         "drop it, or give NAME=PATH for the model it belongs to")
    if path == "random":  # an untrained copy (tests and benchmarks)
        return
    problem = weights_file_problem(path)
    if problem is not None:
        raise WeightsError(f"weights file {path} (given for {name}) {problem}; fix the path")


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def weights_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a weight file, recorded with every output made with it.

    A file of the Hugging Face cache is a link to ``blobs/<sha256>`` (large files), whose name
    is the hash: read, not recomputed. Other files are hashed once per process (cached by
    path, size and modification time).
    """
    import hashlib
    import re

    p = Path(path)
    real = p.resolve()
    if real.parent.name == "blobs" and re.fullmatch(r"[0-9a-f]{64}", real.name):
        return real.name
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        digest = hashlib.sha256()
        with open(real, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        _SHA_CACHE[key] = digest.hexdigest()
    return _SHA_CACHE[key]


def fetch_command(config: EncoderConfig) -> str:
    """The shell command that downloads ``config``'s weights (and the model config published
    beside them) into the Hugging Face cache, where wsikit finds them offline afterwards."""
    files = [config.hub_files[0]] if config.hub_files else []
    if config.hf_config:
        files.append(config.hf_config)
    return f"hf download {config.hub_repo} {' '.join(files)}".strip()


def weights_status() -> list[dict[str, Any]]:
    """For every weighted encoder: found (path, source) or missing (with how to get it)."""
    rows = []
    for config in list_configs():
        name = config.name
        if config.heuristic:
            continue
        try:
            found: ResolvedWeights | None = resolve_weights(name, local_only=True)
            error = None
        except WeightsError as exc:
            found, error = None, str(exc)
        rows.append({
            "name": name, "repo": config.hub_repo, "files": list(config.hub_files),
            "license": config.license, "gated": config.gated,
            "commercial_use": config.commercial_use, "fetch": fetch_command(config),
            "found": found is not None,
            "path": str(found.path) if found else None,
            "source": found.source if found else None,
            "how_to_get": None if found else _how_to_get(config),
            "error": error,
        })
    return rows
