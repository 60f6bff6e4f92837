"""The step registry and the built-in steps are two modules; the old import paths still work."""

from __future__ import annotations

import subprocess
import sys

import wsikit.batch
from wsikit.batch import builtin_steps, steps

BUILTIN = ("segment", "patch", "features", "attention", "select")


def test_old_names_import_from_steps() -> None:
    from wsikit.batch.steps import (  # noqa: F401
        _STEPS,
        PATCH_READ,
        BatchConfig,
        SkipSlide,
        SlideContext,
        StepSpec,
        _encoder,
        _geojson_edited,
        _input_digests,
        _missing_module,
        _tail,
        _tissue,
        attention_step,
        features_step,
        get_step,
        list_steps,
        load_plugins,
        patch_step,
        register_step,
        resolve_steps,
        run_slide,
        segment_step,
        select_step,
    )

    for name in builtin_steps.__all__ + ["_tissue", "_encoder", "_geojson_edited"]:
        assert getattr(steps, name) is getattr(builtin_steps, name)
    assert steps.__all__ == ["BatchConfig", "SlideContext", "StepSpec", "SkipSlide",
                             "register_step", "get_step", "list_steps", "load_plugins",
                             "resolve_steps", "run_slide"]
    assert set(steps.__all__) - {"load_plugins"} <= set(wsikit.batch.__all__)


def test_builtin_steps_registered_in_order() -> None:
    assert tuple(steps.list_steps()[:len(BUILTIN)]) == BUILTIN
    for name in BUILTIN:
        assert steps.get_step(name).func is getattr(builtin_steps, f"{name}_step")


def test_registry_alone_registers_builtins_without_torch() -> None:
    """A worker that imports only the registry has every built-in step, and no torch."""
    code = ("import sys, wsikit.batch.steps as s; "
            "print(','.join(s.list_steps()), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0].split(",")[:len(BUILTIN)] == list(BUILTIN)
    assert out[1] == "False"
