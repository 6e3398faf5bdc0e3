import types

import pytest

from wasmloop import Reconciler
from wasmloop.build import BuildError, reconciler_of


def module_with(**members):
    module = types.ModuleType("plugin")
    for name, value in members.items():
        if isinstance(value, type):
            value.__module__ = "plugin"
        setattr(module, name, value)
    return module


def test_the_one_reconciler_a_module_defines_is_built():
    class Mine(Reconciler):
        pass

    assert isinstance(reconciler_of(module_with(Mine=Mine, Reconciler=Reconciler)), Mine)


@pytest.mark.parametrize("count", [0, 2])
def test_a_module_without_exactly_one_reconciler_is_refused_naming_what_it_found(count):
    classes = {f"R{i}": type(f"R{i}", (Reconciler,), {}) for i in range(count)}
    with pytest.raises(BuildError, match="define exactly one wasmloop.Reconciler subclass"):
        reconciler_of(module_with(**classes))
