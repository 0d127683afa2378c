"""strategist: which few operators to configure for MindSpore's sharding propagation.

Data path (one way): extract -> heuristics -> propagate -> cost -> report -> diff/apply.

>>> import strategist
>>> graph = strategist.load_graph("examples/mlp.py:MegatronMLP")   # doctest: +SKIP
>>> graph.count_by_type()                                           # doctest: +SKIP
{'Add': 2, 'MatMul': 2, 'GeLU': 1}
"""
import os as _os

# What MindSpore sets on import (its *_pb2 modules need protobuf's Python runtime): set it first, so
# importing strategist before mindspore, or anything that imports protobuf, keeps MindSpore working.
_os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from .errors import StrategistError  # noqa: E402
from .vocab.graph import Edge, Input, Op, OpGraph, Param, ShardLayout, TensorSpec  # noqa: E402
from .frontend.graph import extract  # noqa: E402
from .frontend.loader import load_graph  # noqa: E402

__all__ = ["Edge", "Input", "Op", "OpGraph", "Param", "ShardLayout", "StrategistError", "TensorSpec",
           "extract", "load_graph"]
__version__ = "0.1.0"
