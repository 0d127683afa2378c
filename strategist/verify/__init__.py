"""``strategist verify``: MindSpore 2.9.0's own sharding propagation, next to strategist's.

>>> from strategist.verify import verify_model
>>> c = verify_model("examples/sharding_techniques.py:DocsFFN", "dp=2,tp=4")   # doctest: +SKIP
>>> c.all_agree, c.agreed, c.total                                             # doctest: +SKIP
(True, 6, 6)

Modules: :mod:`~strategist.verify.stubs` (what a CPU-only machine needs, built into the cache),
:mod:`~strategist.verify.child` (the MindSpore process), :mod:`~strategist.verify.ir` (its IR dump),
:mod:`~strategist.verify.runner` (the parent side), :mod:`~strategist.verify.compare` (the matching).
``verify --memory``: :mod:`~strategist.verify.cann_stubs` (stub CANN libraries), :mod:`~strategist.verify.dryrun`
(the parent side), :mod:`~strategist.verify.dryrun_child` (MindSpore's DryRun of one training step),
:mod:`~strategist.verify.memory_report` (beside strategist's estimate).
"""
from .compare import Comparison, Row, compare
from .msplan import MsOp, MsPlan
from .dryrun import MemoryAnswer, mindspore_memory
from .memory_report import MemoryCheck
from .runner import mindspore_plan, verify_model

__all__ = ["Comparison", "MemoryAnswer", "MemoryCheck", "MsOp", "MsPlan", "Row", "compare", "mindspore_memory",
           "mindspore_plan", "verify_model"]
