"""A stand-in for MindFormers' MoE experts that MindSpore 2.9's sharding propagation can search.

MindSpore 2.9 cannot propagate through GroupedMatmul (tensor-list inputs, a "new shape" OperatorInfo):
``GroupedMatmulInfo::GenerateOpStrategies`` returns ``{}``, so a search reaching an unconfigured one fails
("Generating cost for edge: GroupedMatmulInfo...-IndexSelectInfo... failed", then "Edge cost initialization
failed"; a GroupedMatmul feeding a ReLU: SIGSEGV), and a configured one is refused ("Can't get slice shape when
initialize a new shape (0)" for ``(((8, 1),), ((1, 1, 1),), ...)``; SIGSEGV for all-ones). Checked on a
two-operator net (GroupedMatmul, ReLU; docs/notes/mindformers-verify.md). So ``strategist verify`` compiles
MoE models -- on both sides, strategist's graph and MindSpore's -- with each experts GroupedMatmul
``x[T, K] @ w[E, K, N]`` replaced by ``MatMul(x, ReduceSum(w, 0))``: the same token tensors in and out, the same
dev matrix ``[T, K, N]`` for the tokens (GroupedMatmulInfo never splits E either); the expert counts
(``group_list``) then feed nothing, so the dispatcher's count operators drop out of both graphs alike.

MindSpore parses :func:`experts_forward` itself: its globals are MindSpore's operators only.
"""
from mindspore.ops.auto_generate import MatMul, ReduceSum


def experts_forward(self, permuted_local_hidden_states, tokens_per_expert, w1, w2):
    """``FFNGroupedGEMM.experts_forward`` (MindFormers 1.9.0) with MatMul stand-ins for its GroupedMatmuls."""
    permuted_local_hidden_states = permuted_local_hidden_states.reshape((-1, self.hidden_size))
    fc1_output = MatMul()(permuted_local_hidden_states, ReduceSum(False)(w1, 0))
    intermediate_parallel = self.swiglu(fc1_output, -1).reshape((-1, w2.shape[1]))
    return MatMul()(intermediate_parallel, ReduceSum(False)(w2, 0))


def patch_experts(notes: list | None = None):
    """Replace ``FFNGroupedGEMM.experts_forward`` (class attribute); returns the undo function."""
    from mindformers.parallel_core.training_graph.transformer.moe import ffn
    cls = ffn.FFNGroupedGEMM
    saved = cls.__dict__.get("experts_forward")
    cls.experts_forward = experts_forward
    if notes is not None:
        notes.append("MoE experts: each GroupedMatmul compiled as MatMul(x, ReduceSum(w, 0)) on both sides "
                     "(MindSpore 2.9's sharding propagation cannot search GroupedMatmul: no strategies of its own, "
                     "a configured one refused)")

    def undo():
        if saved is not None:
            cls.experts_forward = saved
    return undo
