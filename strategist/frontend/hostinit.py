"""Init-time kernels MindSpore's CPU backend lacks, run on the host while a model is built.

A model's ``__init__`` may compute tensors with operators that have device kernels only: rotary tables
(``mint.arange``: ``Arange``), initial weights (``weight.normal_()``: ``InplaceNormal``, ``bias.zero_()``:
``InplaceZero``). On a CPU such a call fails (``RuntimeError: The kernel Arange unregistered``) -- at once in graph
mode, at exit in PyNative mode -- although the model builds and compiles on a device, where strategist's graph
comes from. :func:`host_kernels` runs them on the host while the model is built:

- the tensor factories and the few maths operators of init-time tables (``Arange``, ``LinSpaceExt``,
  ``FillScalar``, ``CumsumExt``, ``Outer``) are computed with numpy, values, shape and dtype exact (the defaults of
  ``mint``: int64 for integer arguments, float32 otherwise); random ones (``NormalFloatFloat``, ``RandpermExt``)
  draw from a fixed seed, so that a build is deterministic;
- the in-place initialisers and fills (``InplaceNormal``, ``InplaceUniform``, ``InplaceZero``, ``InplaceFillScalar``,
  ``InplaceMaskedFillScalar``, ...)
  leave the tensor as it is: its shape and dtype are what the graph needs, and the model's weights are never
  allocated (``no_init_parameters``), so there are no values to draw.

Every other call runs as before; one still failing for want of a kernel becomes :func:`kernel_error`'s one line,
naming the kernel and the model's line that called it. MindSpore is imported inside the functions: importing this
module does not load it.
"""
from __future__ import annotations

import contextlib
import os
import re

from ..errors import ModelLoadError

#: the in-place initialisers whose tensor is returned as it is (its shape and dtype are the result's)
IN_PLACE = ("InplaceNormal", "InplaceUniform", "InplaceZero", "InplaceFillScalar", "InplaceFillTensor",
            "InplaceRandom", "InplaceExponential", "InplaceBernoulliScalar", "InplaceBernoulliTensor",
            "InplaceMaskedFillScalar", "InplaceMaskedFillTensor", "InplaceClampScalar", "InplaceClampTensor")
#: computed on the host with numpy (:data:`_HOST`)
ON_HOST = ("Arange", "LinSpaceExt", "FillScalar", "CumsumExt", "Outer", "NormalFloatFloat", "RandpermExt")
#: the Tensor methods of the in-place initialisers (C++ methods that call their kernels directly): while building,
#: they return the tensor as it is
TENSOR_METHODS = ("normal_", "uniform_", "zero_", "fill_", "random_", "exponential_", "bernoulli_")

_UNREGISTERED = re.compile(r"The kernel (\w+) unregistered")


def _np_dtype(dtype, default):
    import numpy as np
    import mindspore as ms
    if dtype is None:
        return default
    if dtype == ms.bfloat16:
        return np.float32
    return ms.dtype_to_nptype(dtype)


def _scalar(v):
    import mindspore as ms
    return v.asnumpy().item() if isinstance(v, ms.Tensor) else v


def _default_dtype(*vals):
    import numpy as np
    if all(isinstance(v, bool) for v in vals):
        return np.bool_
    return np.int64 if all(isinstance(v, (int, np.integer)) for v in vals) else np.float32


def _tensor(arr, dtype=None):
    """``arr`` as a MindSpore tensor of ``dtype`` (numpy's dtype of ``arr`` when None)."""
    import mindspore as ms
    out = ms.Tensor(arr.astype(_np_dtype(dtype, arr.dtype)))
    return out.astype(ms.bfloat16) if dtype == ms.bfloat16 else out


def _arange(self, start, end, step=1, dtype=None):
    import numpy as np
    vals = [_scalar(v) for v in (start, end, step)]
    return _tensor(np.arange(*vals).astype(_default_dtype(*vals)), dtype)


def _linspace(self, start, end, steps, dtype=None):
    import numpy as np
    return _tensor(np.linspace(_scalar(start), _scalar(end), int(_scalar(steps))).astype(np.float32), dtype)


def _fill(self, size, fill_value, dtype=None):
    import numpy as np
    v = _scalar(fill_value)
    return _tensor(np.full(tuple(int(d) for d in size), v, dtype=_default_dtype(v)), dtype)


def _cumsum(self, input, dim, dtype=None):
    import numpy as np
    arr = input.asnumpy()
    return _tensor(np.cumsum(arr, axis=int(dim)).astype(arr.dtype), dtype or input.dtype)


def _outer(self, input, vec2):
    import numpy as np
    return _tensor(np.outer(input.asnumpy(), vec2.asnumpy()).astype(input.asnumpy().dtype), input.dtype)


def _normal(self, mean, std, size, seed=None, offset=None):
    import numpy as np
    rng = np.random.default_rng(0)
    return _tensor((rng.standard_normal(tuple(int(d) for d in size)) * _scalar(std) + _scalar(mean))
                   .astype(np.float32))


def _randperm(self, n, seed=None, offset=None, dtype=None):
    import numpy as np
    return _tensor(np.random.default_rng(0).permutation(int(_scalar(n))).astype(np.int64), dtype)


_HOST = {"Arange": _arange, "LinSpaceExt": _linspace, "FillScalar": _fill, "CumsumExt": _cumsum, "Outer": _outer,
         "NormalFloatFloat": _normal, "RandpermExt": _randperm}


def _unchanged(self, input, *args, **kwargs):
    return input


def _unchanged_self(self, *args, **kwargs):
    return self


def _targets():
    from mindspore.ops.auto_generate import gen_ops_prim
    out = []
    for name in IN_PLACE + ON_HOST:
        cls = getattr(gen_ops_prim, name, None)
        if cls is not None and "__call__" in cls.__dict__:
            out.append((cls, _HOST.get(name, _unchanged)))
    return out


@contextlib.contextmanager
def host_kernels():
    """While building a model: :data:`ON_HOST` computed with numpy, :data:`IN_PLACE` leaving their tensor as it is
    (see the module's docstring). The primitives' classes are restored on exit."""
    from mindspore import Tensor
    saved = []
    try:
        for cls, fn in _targets():
            saved.append((cls, "__call__", cls.__dict__["__call__"]))
            cls.__call__ = fn
        for name in TENSOR_METHODS:
            if hasattr(Tensor, name):
                saved.append((Tensor, name, Tensor.__dict__.get(name)))
                setattr(Tensor, name, _unchanged_self)
        yield
    finally:
        for cls, name, fn in reversed(saved):
            if fn is None:
                delattr(cls, name)
            else:
                setattr(cls, name, fn)


def missing_kernel(err: BaseException) -> str | None:
    """The kernel named by MindSpore's ``The kernel X unregistered`` error, or None."""
    m = _UNREGISTERED.search(str(err))
    return m.group(1) if m else None


def model_line(err: BaseException) -> str:
    """``file:line (function)`` of the innermost frame of ``err``'s traceback outside MindSpore and strategist:
    the model's own line that called the operator."""
    import mindspore
    skip = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                 for m in (mindspore, __import__("strategist")))
    tb, where = err.__traceback__, ""
    while tb is not None:
        f = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not f.startswith(skip):
            where = f"{_short(f)}:{tb.tb_lineno} ({tb.tb_frame.f_code.co_name})"
        tb = tb.tb_next
    return where


def kernel_error(what: str, err: BaseException) -> ModelLoadError | None:
    """``building X failed`` for a kernel the CPU backend lacks, naming the kernel and the model's line; None for
    any other error."""
    kernel = missing_kernel(err)
    if kernel is None:
        return None
    where = model_line(err)
    at = f" at {where}" if where else ""
    return ModelLoadError(
        f"building {what} failed{at}: MindSpore's CPU backend has no {kernel} kernel (strategist builds on a CPU and "
        f"runs only {', '.join(ON_HOST)} and the in-place initialisers on the host); compute that tensor with "
        f"numpy in __init__")


def _short(path: str) -> str:
    try:
        r = os.path.relpath(path)
    except ValueError:
        return path
    if not r.startswith(".."):
        return r
    marker = os.sep + "site-packages" + os.sep
    return path.split(marker, 1)[1] if marker in path else path
