"""The step registry registers the built-in steps itself, first and in order, without torch."""

from __future__ import annotations

import subprocess
import sys

from wsikit.run import builtin_steps, select_stage, steps

BUILTIN = ("segment", "patch", "grid_thumbnail", "features", "attention", "select")


def test_builtin_steps_registered_in_order() -> None:
    assert tuple(steps.list_steps()[:len(BUILTIN)]) == BUILTIN
    for name in BUILTIN:
        module = select_stage if name == "select" else builtin_steps
        assert steps.get_step(name).func is getattr(module, f"{name}_step")


def test_registry_alone_registers_builtins_without_torch() -> None:
    """A worker that imports only the registry has every built-in step, and no torch."""
    code = ("import sys, wsikit.run.steps as s; "
            "print(','.join(s.list_steps()), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0].split(",")[:len(BUILTIN)] == list(BUILTIN)
    assert out[1] == "False"
