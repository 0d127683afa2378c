"""The four heuristics, one module each: which operators deserve an explicit strategy, and which.

1. :mod:`.weights` -- operators holding weights: Megatron's column/row pairs, attention projections, embeddings and
   language-model heads by their vocabulary, data parallelism where activations outweigh the weight.
2. :mod:`.dimensions` -- dimension- and axis-changing operators propagation reaches only through a redistribution
   (or not at all), anchored to follow their input or hand their consumer its layout.
3. :mod:`.boundaries` -- parallelism boundaries: where the preference flips from data to model parallelism, a
   huge vocabulary, a long sequence.
4. :mod:`.fused` -- fused operators: FlashAttentionScore, RmsNorm and the other norms, MoE routers, dispatchers
   and experts, and the operators MindSpore generates no strategy for.

:func:`strategist.advice.propose.propose` runs 1, 3 and 4 over the graph; rule 2 reads a propagation of their
proposal (:func:`strategist.advice.advisor.advise`)."""
