"""strategist: which few operators to configure for MindSpore's sharding propagation.

Data path (one way): extract -> heuristics -> propagate -> cost -> report -> diff/apply.

>>> import strategist
>>> graph = strategist.load_graph("examples/mlp.py:MegatronMLP")   # doctest: +SKIP
>>> graph.count_by_type()                                           # doctest: +SKIP
{'Add': 2, 'MatMul': 2, 'GeLU': 1}
"""
from .errors import StrategistError
from .graph import Edge, Input, Op, OpGraph, Param, ShardLayout, TensorSpec, extract
from .loader import load_graph

__all__ = ["Edge", "Input", "Op", "OpGraph", "Param", "ShardLayout", "StrategistError", "TensorSpec",
           "extract", "load_graph"]
__version__ = "0.1.0"
