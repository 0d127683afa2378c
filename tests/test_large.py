"""Large-model checks (marker ``slow``): CI runs them once on a mid-size model, 8 layers of the
LLaMA-2-70B shape; ``STRATEGIST_LARGE_LAYERS=80 make test`` runs the full 80."""
import os

import pytest

from strategist.advice.advisor import advise
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware

LAYERS = int(os.environ.get("STRATEGIST_LARGE_LAYERS", "8"))

#: These tests model Megatron-style tensor parallelism, whose input is whole on every tensor-parallel
#: rank: MindSpore's full_batch (its default data_parallel splits the batch over all devices).
FB = "full_batch"


@pytest.mark.slow
@pytest.mark.ci_sample
def test_llama2_70b_shape_advice(graph_of):
    g = graph_of("examples/llama.py:llama2_70b", f"layers={LAYERS}", "batch=8")
    assert len(g) == 22 * LAYERS + 17
    mesh = Mesh.parse("dp=8,tp=8")
    a = advise(g, mesh, hardware=load_hardware("atlas-800t-a2"), dataset_strategy=FB)
    # the same pattern in every layer (the training compile): q, k, v anchored column-parallel and w2
    # row-parallel, the rest propagated (test_advisor.py::test_megatron_llama says why); outside the layers, the
    # embedding table (the fastest of its layouts), the head, and where the labels' batch split starts (their
    # one-hot over every device)
    chosen = {c.op for c in a.chosen}
    layered = {f"model.layers.{i}.{w}.matmul" for i in range(LAYERS)
               for w in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w2")}
    emb = "model.tok_embeddings.gather"
    assert layered <= chosen and emb in chosen
    assert chosen - layered <= {emb, "lm_head.matmul", "loss.one_hot"}
    p = a.plan
    act = 8 * 4096 // 8 * 8192
    per_layer = 4 * 2 * 7 / 8 * act * 2          # Megatron: 4 AllReduces of [B*S/dp, H] fp16 over tp=8
    for i in range(LAYERS):
        layer = f"model.layers.{i}"
        # (the table's hidden split is gathered into layer 0: test_advisor.py::test_megatron_llama prices it)
        moved = sum(e.bytes for e in p.edges if p.graph.op(e.dst).layer == layer and e.src != emb) + \
            sum(c.fwd_bytes + c.bwd_bytes for n, c in p.op_costs.items() if p.graph.op(n).layer == layer)
        assert moved == pytest.approx(per_layer)
    assert p.totals()["step_seconds"] < a.baseline.totals()["step_seconds"]
    # where two seeds' searches meet: the head before the loss, and the anchored table's hidden split before layer 0
    # (the gather there is what the table's layout buys: its AllGather against vocabulary-by-tp's AllReduce)
    assert not p.inconsistencies or all(a_ == "lm_head.matmul" or "loss" in b or (a_ == emb and b.startswith(
        "model.layers.0.")) for a_, b, _ in p.inconsistencies)
