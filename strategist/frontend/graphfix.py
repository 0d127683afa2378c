"""Two gaps of MindSpore 2.9's graph mode that Hugging Face-style model code (mindone.transformers) runs into, and
the exact rewrites strategist compiles such code with.

- ``tensor.expand((b, -1))``: graph mode's ``Tensor.expand`` takes its size as a Tensor only
  (``TensorToTuple()(size)``); a tuple fails with ``The method 'GetShapeVector()' doesn't implement``. Compiled as
  ``broadcast_to(tensor, size)``, which is what ``expand`` does with any size (PyNative mode's ``expand``).
- ``(a is None) ^ (b is not None)``: graph mode's ``^`` on two Python bools calls the integer ``bit_xor``
  (``For BitXor, only integer types are supported``). Compiled as ``a != b``, the same truth table.

:func:`extract_with_fixes` compiles without them first; only a compile failing with one of those errors is compiled
again with its fix, and the graph says so in a note (a parallel run of the same code on a device fails the same way,
so the user's code needs the change too). verify's child compiles with :func:`graph_mode_fixes` on. MindSpore is
imported inside the functions: importing this module does not load it.
"""
from __future__ import annotations

import contextlib
import os
import re

#: fix name -> (the compile error it answers, what it does)
FIXES = {
    "expand": ("GetShapeVector()' doesn't implement",
               "Tensor.expand with a tuple size, which MindSpore 2.9's graph mode refuses, compiled as "
               "broadcast_to (the same result); on a device the compile fails the same way: use "
               "broadcast_to or expand(*size) there"),
    "bool_xor": ("For BitXor, only integer types are supported",
                 "bool ^ bool, which MindSpore 2.9's graph mode refuses, compiled as bool != bool (the same truth "
                 "table); on a device the compile fails the same way: write != there"),
}

_XOR_REGISTERED = False


def fix_for(err: BaseException, done=()) -> str | None:
    """The fix that answers ``err`` (a compile error), if any not in ``done``."""
    text = str(err)
    return next((name for name, (sign, _) in FIXES.items() if sign in text and name not in done), None)


def _register_bool_xor() -> None:
    """``bool ^ bool`` as ``!=``: added to MindSpore's ``^`` once, for the process (MindSpore refuses that input
    otherwise, so nothing MindSpore compiles changes)."""
    global _XOR_REGISTERED
    if _XOR_REGISTERED:
        return
    from mindspore.ops.composite.multitype_ops.bitwise_xor_impl import bitwise_xor

    @bitwise_xor.register("Bool", "Bool")
    def _bool_xor(x, y):
        return x != y
    _XOR_REGISTERED = True


@contextlib.contextmanager
def graph_mode_fixes(which=tuple(FIXES)):
    """While compiling: the fixes named in ``which`` (see the module's docstring)."""
    import mindspore.graph._parse.standard_method as sm
    from mindspore.ops import functional as F
    original = sm.expand

    def expand(input, size):
        if isinstance(size, (tuple, list)):
            return F.broadcast_to(input, size)
        return original(input, size)
    if "bool_xor" in which:
        _register_bool_xor()
    if "expand" in which:
        sm.expand = expand
    try:
        yield
    finally:
        sm.expand = original


_IN_FILE = re.compile(r"In file (\S+?):(\d+)")


def failing_line(err: BaseException) -> str:
    """The innermost ``file:line`` of MindSpore's compile trace outside MindSpore itself (the model's code)."""
    import mindspore
    ms_dir = os.path.dirname(os.path.abspath(mindspore.__file__)) + os.sep
    found = ""
    for path, line in _IN_FILE.findall(str(err)):
        if not os.path.abspath(path).startswith(ms_dir):
            found = f"{_site_relative(path)}:{line}"
    return found


def note(name: str, where: str) -> str:
    return f"graph-mode fix{' at ' + where if where else ''}: {FIXES[name][1]}"


def _site_relative(path: str) -> str:
    marker = os.sep + "site-packages" + os.sep
    return path.split(marker, 1)[1] if marker in path else os.path.relpath(path) if not os.path.relpath(
        path).startswith("..") else path
