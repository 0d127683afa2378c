"""The operator types MindSpore's search treats apart (strategist's :mod:`strategist.engine.search`): Reshape,
the operators whose Layout-form strategy MindSpore 2.9 refuses or cannot initialise from, those that keep no
layout to follow, and the MatMul cost types; each set with what was measured."""
from __future__ import annotations


RESHAPES = frozenset({"Reshape"})


#: :meth:`~strategist.engine.search.reshape.ReshapeSearch.reshape_swc` when MindSpore's swc model applies but no swc has
#: the neighbour's layout on that side: ``GetSWCIndexBy{Input,Output}LayoutWith{ZeroComm,MiniComm}`` return -1 and
#: the BFS stops at the Reshape
NO_SWC = ()


#: consumers MindSpore marks visited without a strategy when they are reached from a Reshape
AFTER_RESHAPE_UNSET = frozenset({"Concat"})


#: MatMulCost::GetForwardCommCost: charged when input 0's LAST stored dim is split (transpose_a ignored)
MATMUL_COST_TYPES = frozenset({"MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt"})


#: operators observed to keep a layout to follow when set from a generated candidate (their output layout is
#: inferred from plain strategy layouts; an element-wise op's is not: a ReLU after the dataset leaves
#: AddSwcUnderPrevOpDevMatrixMulti "prev_op_dev_matrix is empty")
OWN_LAYOUT_INFER = frozenset({"Transpose", "MatMul", "BatchMatMul"})


#: operators MindSpore cannot initialise from a neighbour's layout ("SetCostUnderLayout failed"): no
#: follow-the-neighbour candidate for them, and nothing to follow after them
NO_LAYOUT_INIT = frozenset({"Tile", "StridedSlice", "ArgMaxWithValue", "ArgMinWithValue", "ReduceSum", "ReduceMean",
                            "ReduceMax", "ReduceMin", "ReduceProd", "ReduceAll", "ReduceAny", "SumExt", "MeanExt"})


#: MindSpore's GatherInfo and its subclasses (IndexSelectInfo, SparseGatherV2Info): set from a generated candidate
#: they keep no layout to follow (measured, an IndexSelect and a Gather chosen backward from a ReLU anchored (2, 2):
#: "AddSwcUnderNextOpDevMatrixSingle] Layout propagation next_op_inputs_tensor_map_before is empty", and the ReLU
#: before them takes a generated candidate, (1, 1), not their input's (1, 2))
GATHER_INFO = frozenset({"Gather", "GatherV2", "IndexSelect", "SparseGatherV2"})


#: operators whose Layout-form strategy MindSpore 2.9 refuses: Gather (vector::_M_range_check), and those it
#: cannot initialise from a layout at all (measured: ResNet-50's pool, a ReduceMean configured with a Layout:
#: "operator ReduceMeanInfo33 SetCostUnderLayout failed"); only the tuple form is offered
#: and those whose OperatorInfo keeps the base CheckInputLayout ("Current op ... does not support config layout"),
#: or fails reading one, each measured on MindSpore 2.9 with a configured Layout beside a tuple that compiles:
#: TopK/TopkExt, OneHot/OneHotExt, Select, Concat, SoftmaxCrossEntropyWithLogits, TrilExt (batch-parallel),
#: MaskedFill ("size of input_tensor_layout is 3 rather than 2"), MaxDim, SortExt, GatherD (the MoE router's gate gather),
#: ApplyRotaryPosEmb and CrossEntropyLoss ("... SetCostUnderLayout failed", UT nets ut6_triu_rope.ApplyRopeAuto8 and
#: ut6_transpose_loss.CrossEntropyAuto8 at dp=2,tp=4)
#: SliceExt ("SliceExtInfo SetCostUnderLayout failed" for every Layout tried, all devices used or not), IndexSelect
#: and Embedding (GatherInfo's "vector::_M_range_check"; UT nets ut7_infer_matmul.IndexSelect1/EmbeddingHidden8,
#: ut7_infer_shape.SliceExtNormal)
LAYOUT_REJECTED = frozenset({"Gather", "GatherV2", "TopK", "TopkExt", "OneHot", "OneHotExt", "Select", "Concat",
                             "SoftmaxCrossEntropyWithLogits", "TrilExt", "MaskedFill", "MaxDim",
                             "SortExt", "GatherD", "ApplyRotaryPosEmb", "CrossEntropyLoss", "SliceExt",
                             "IndexSelect", "Embedding"}) | NO_LAYOUT_INIT


#: of those, the ones whose configured Layout MindSpore 2.9 does take when every reduced dim of it is split: a
#: reduced dim left whole ("None") fails with "The dimension N is out of the size of the device shape!" (N the
#: device matrix's rank: its tensor-map entry -1 read as an axis). Measured on SumExt/MeanExt, dim 1 unless noted:
#: taken ("dp", "cp", "mp"), ("cp", "dp", "mp"), ("dp", "cp", "None") over (2, 2, 2), ("None", "dp", "mp") over
#: (2, 4), ("a", "b", "None") over (2, 4, 1), ("dp", "None", "mp") dims (0, 2); refused ("dp", "None", "None") over
#: (2, 2, 2) or (8,), ("dp", "None", "mp") over (2, 4), ("a", "None", "c") over (2, 4, 1), ("None", ("dp", "cp"),
#: "mp") dims (0, 1) (UT nets ut7_infer_reduce.*). MeanExt takes a Layout when SOME reduced dim is split (taken:
#: (None, ("dp", "cp"), "mp") dims (0, 1); refused, "Invalid rank string for a parameter": the same with dim 0 alone,
#: ("dp", "None", "None") dim 1, ("None", "dp", "mp") over (2, 4) dim 0, ("dp", "cp", "None") dim 2).
#: ReduceSum/ReduceMean, ArgMaxWithValue and TopkExt refuse every Layout, even those ("SetCostUnderLayout failed")
LAYOUT_REDUCED_SPLIT = frozenset({"SumExt", "MeanExt"})


def whole_reduced_dim(rule, dims, every: bool = True) -> int | None:
    """The first dim of input 0 that the operator reduces (a factor its outputs lack) and ``dims`` (input 0's
    device axes per dim, a ShardLayout's tensor_map or a Layout's dims) leave whole; with ``every`` False, only
    when no reduced dim is split."""
    out = {f for o in rule.outputs for f in o if f is not None}
    reduced = [d for d, f in enumerate(rule.inputs[0] if rule.inputs else ()) if f is not None and f not in out]
    whole = [d for d in reduced if d >= len(dims) or not dims[d]]
    if not whole or (not every and len(whole) < len(reduced)):
        return None
    return whole[0]
