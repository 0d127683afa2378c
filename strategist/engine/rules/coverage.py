"""What the registry leaves out of MindSpore 2.9's parallel OperatorInfo list
(``rules/mindspore_operator_infos.yaml``), and where a rule is narrower than MindSpore's OperatorInfo, each with its
reason. An operator without any rule runs batch-parallel, as MindSpore runs an operator it has no OperatorInfo for
(:func:`strategist.engine.rules.common.batch_parallel_rule`; ``docs/notes/coverage.md``)."""
from __future__ import annotations


#: primitives whose rule here is narrower than MindSpore's OperatorInfo, and why
INEXACT = {
    "Tile": "a dim with multiple > 1 may be split by a divisor of the multiple (output split, input whole): "
            "not a factor of the input, kept unsplit",
    "Dense": "BatchParallel in MindSpore (no DenseInfo): exact only where the engine honours "
             "FactorRule.batch_parallel (one candidate: input 0's dim 0 over all devices)",
    "BatchNorm": "statistics over split N/H/W are combined by MindSpore's own AllReduce; not costed here",
}


_INFER = "inference-only operator (KV cache / incremental decoding), not in a training graph"


_MOE = "Ascend MoE routing kernel with data-dependent output shapes; MindFormers' training graphs use " \
       "GroupedMatmul/TopkExt/SortExt instead"


#: OperatorInfo primitives deliberately without a rule, and why
LEFT_OUT = {
    **{t: _INFER for t in ("PromptFlashAttention IncreFlashAttention FusedInferAttentionScore PagedAttention "
                           "PagedAttentionMask ReshapeAndCache KVCacheScatterUpdate").split()},
    **{t: _MOE for t in ("MoeInitRouting MoeFinalizeRouting MoeGatingTopKSoftmax MoeComputeExpertTokens "
                         "TopKRouter TopPRouter FFN FFNExt").split()},
    "Custom": "its layout comes from the user's attributes (dev matrix, tensor maps), not from the primitive",
    "DSDMatmul": "legacy block-sparse attention (Ascend custom op)", "MatmulDDS": "legacy block-sparse attention",
    "Index": "tensor indexing with a tuple of index tensors: output shape depends on the index pattern",
    "DynamicQuantExt": "quantisation: per-token scale output; inference", "QuantLinearSparse": "inference quant",
    "FakeQuantPerChannel": "quantisation-aware training with per-channel axis attribute (not modelled)",
    "MinMaxUpdatePerChannel": "as FakeQuantPerChannel",
    "WKV": "RWKV kernel (not modelled)",
}
