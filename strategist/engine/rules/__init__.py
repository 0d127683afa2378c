"""Operator sharding rules, one module per operator family, behind an explicit registry.

* :mod:`.factor`: the types, :class:`~.factor.FactorRule` and :class:`~.factor.Sharding`;
* :mod:`.common`: the builders' helpers and the batch-parallel rule;
* the families: :mod:`.elementwise`, :mod:`.matmul`, :mod:`.reduce`, :mod:`.softmax_norm`, :mod:`.gather`,
  :mod:`.attention`, :mod:`.shape`, :mod:`.reshape`, :mod:`.conv_pool`, :mod:`.loss`, :mod:`.scatter_index`,
  :mod:`.misc`; :mod:`.coverage` lists what is left out and why;
* :mod:`.registry`: ``RULES`` and :func:`~.registry.rule_for`;
* using a rule: :mod:`.sharding` (strategy or Layout -> layouts), :mod:`.interleaved`, :mod:`.candidates`
  (MindSpore's generated strategies), :mod:`.computation` (its computation cost), :mod:`.flops`.

A family module lists what it registers in ``REGISTRATIONS`` and names the MindSpore quirks its rules reproduce as
documented module-level tables (:data:`.elementwise.ELEMENTWISE`, :data:`.scatter_index.SCATTER_MATH`, ...).
Behaviour marked "checked" or "measured" in a docstring was checked against MindSpore 2.9.0 itself.
"""
