"""Front ends: model code (a Cell, a factory, a MindFormers YAML) -> OpGraph. Only these import MindSpore or MindFormers.

- :mod:`.loader`: ``path/to/model.py:NAME`` and ``--input``/``--kwargs`` -> a Cell -> :func:`~.loader.load_graph`.
- :mod:`.graph`: :func:`~.graph.extract`, a Cell compiled by MindSpore -> an :class:`~strategist.vocab.graph.OpGraph`;
  by concern :mod:`.compile` (the stand-alone compile), :mod:`.irtext` (IR text dumps), :mod:`.proto` (the ANF
  proto, decoded by :mod:`.protowire`) and :mod:`.owners` (which Cell ran each operator, operator names).
- :mod:`.cellshard`: the model's own ``Cell.shard()`` calls, recorded while it is built.
- :mod:`.celltrace`: an independent reference for the operators' Cells (tests, bench).
- :mod:`.mindformers`: MindFormers YAML configs -> the tp=1 training graph and the experts' strategies.
"""
