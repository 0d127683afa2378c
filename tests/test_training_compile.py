"""The two compiles MindSpore has for a plain Cell (``--train``, the default, and ``--eval``): compiled as built, it adds a VirtualOutput and
creates its operators walking back from the output (``DeepScopedGraphSearch``); compiled after
``set_train(True)``, as a training run compiles it, it creates them from the inputs forward (``TopoSort``). The
search takes seeds and waiting operators in that order, so the plans differ -- each against MindSpore's own
recorded answer for that compile (tests/fixtures/ms, ``netgen.training_cases``)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netgen  # noqa: E402

from conftest import ROOT, serial_step  # noqa: E402

ENCODER = [c for c in netgen.example_cases() if c.id == "encoder[dp=2,tp=4]"][0]


def _answer(case):
    answer = netgen.load_fixture(case)
    if answer is None:
        pytest.fail(f"no recorded MindSpore answer for {case.id}: record it with `make fixtures`", pytrace=False)
    return answer


def test_creation_order_follows_the_compile(graph_of):
    """As built (``--eval``): the output's producer is created first (after the VirtualOutput); for training (the
    default): the first operator from the input is."""
    from strategist.engine.search.orders import creation_order
    g = graph_of("examples/mlp.py:MegatronMLP", "hidden=64", "ffn=128", "tokens=64", training=False)
    first, last = [op.name for op in g][0], [x.ref for x in g.outputs if x.kind == "op"][0]
    built = creation_order(g)
    assert built[last] == 1 and built[first] > built[last]
    assert creation_order(g.derived(list(g))) == built     # a derived graph keeps the compile it stands for
    t = g.derived(list(g))
    t.training = True
    trained = creation_order(t)
    assert trained[first] == 1 and trained[last] > trained[first]
    assert not g.training                        # the cached graph is untouched
    default = graph_of("examples/mlp.py:MegatronMLP", "hidden=64", "ffn=128", "tokens=64")
    assert default.training and creation_order(default) == trained      # the loader's default: the training compile


def test_the_training_compile_propagates_otherwise_and_each_matches_mindspore():
    """The encoder example at dp=2,tp=4: 42 of its 75 compared operators get other strategies in the training compile;
    each plan equals MindSpore's for its compile, operator for operator."""
    built, trained = ENCODER, ENCODER.as_training()
    a_built, a_trained = _answer(built), _answer(trained)
    p_built, p_trained = netgen.strategist_plan(built), netgen.strategist_plan(trained)
    assert not p_built.graph.training and p_trained.graph.training
    differ = [n for n in p_built.choices if p_built.choices[n].strategy != p_trained.choices[n].strategy]
    assert len(differ) == 42, differ
    theirs = []
    for plan, answer in ((p_built, a_built), (p_trained, a_trained)):
        c = netgen.compare_answer(plan, answer)
        assert c.all_agree and c.total == 75, netgen.summarize(c)
        theirs.append({r.op: r.theirs for r in c.rows})
    # MindSpore's two answers differ on the same operators: the order is MindSpore's, not strategist's
    assert sorted(k for k in theirs[0] if theirs[0][k] != theirs[1][k]) == sorted(differ)


def test_train_and_eval_flags_on_the_cli(capsys):
    """The training compile is the default (``--train`` says so explicitly); ``--eval`` reaches the graph and
    changes propagate's plan on 42 of the encoder's operators (MindSpore's own answers differ on the same ones:
    above); the two flags exclude each other."""
    import json
    from strategist.cli import main
    model = os.path.join(ROOT, "examples", "encoder.py") + ":EncoderClassifier"
    kw = ["--kwargs", "vocab=128", "d_model=64", "heads=8", "ffn=128", "seq=16", "batch=8"]
    plans = []
    for extra in ([], ["--train"], ["--eval"]):
        assert main(["propagate", model, *kw, "--mesh", "dp=2,tp=4", "--format", "json", *extra]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    ops = [{o["name"]: o["strategy"] for o in p["ops"]} for p in plans]
    assert ops[0] == ops[1] and ops[0].keys() == ops[2].keys()
    assert sum(ops[0][k] != ops[2][k] for k in ops[0]) == 42
    with pytest.raises(SystemExit) as exc:
        main(["propagate", model, *kw, "--mesh", "dp=2,tp=4", "--train", "--eval"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


@pytest.mark.verify_live
def test_verify_train_reads_a_compile_that_fails_after_its_parallel_passes():
    """MindSpore's GPU plugin expands RmsNorm in a training graph after its parallel passes and then rejects the
    expansion's float16 + float32 Add: the strategies were settled before, verify reads them from the dumps and
    says so; they agree with strategist's training-compile plan."""
    from strategist.verify import verify_model
    c = verify_model(os.path.join(ROOT, "examples", "llama.py") + ":tiny", "dp=2,tp=4", training=True,
                     kwargs=["hidden=64", "ffn=128", "heads=8", "kv_heads=8", "vocab=128", "batch=8", "seq=16"])
    assert c.all_agree and c.total == 40, c.text()
    assert any("failed after its sharding propagation" in n for n in c.notes), c.notes
    assert "note: MindSpore's compile failed after its sharding propagation" in c.text()
    # the training step's graph after autodiff is not in the dumps: --communication says why and what to do
    c = verify_model(os.path.join(ROOT, "examples", "llama.py") + ":tiny", "dp=2,tp=4", communication=True,
                     kwargs=["hidden=64", "ffn=128", "heads=8", "kv_heads=8", "vocab=128", "batch=8", "seq=16"])
    assert c.communication.error and c.communication.error.endswith("--eval compiles the step as built")


@pytest.mark.verify_live
def test_a_training_step_propagates_as_the_training_compile(tmp_path):
    """Why the training compile is the default: the small GPT's anchors advised for the compile as built (v_proj,
    out_proj and proj per layer, the head) give Megatron's column q/k there, and replicated q/k in a training run.
    MindSpore's own training step (verify --communication: ``value_and_grad`` of the loss, ``set_train(True)``)
    chooses exactly the training compile's strategies (no "training step chose other strategies" note), and every
    collective agrees."""
    from strategist.api import advise_model
    from strategist.report.render import advice_dict
    from strategist.verify import verify_model
    model = os.path.join(ROOT, "examples", "gpt_nn.py") + ":GPT"
    kw = ["hidden=512", "heads=8", "seq=128", "batch=8", "vocab=4096"]
    # by the serial sum (conftest.serial): by the schedule this small GPT is advised nothing in either compile
    built = advise_model(model, "dp=2,tp=4", kwargs=kw, training=False, step=serial_step())
    path = tmp_path / "as_built.yaml"
    path.write_text(advice_dict(built)["anchors_yaml"])
    q = "h.0.attn.q_proj.matmul"
    assert built.plan.strategy(q) == ((2, 1), (4, 1)) and q not in built.anchors
    c = verify_model(model, "dp=2,tp=4", kwargs=kw, strategies=str(path), communication=True)
    assert c.all_agree and c.communication.agree and not c.notes, c.text()
    theirs = {r.op: r.theirs for r in c.rows}
    assert theirs[q] == theirs["h.0.attn.k_proj.matmul"] == ((2, 1), (1, 1))


@pytest.mark.verify_live
def test_float32_weights_are_reduced_in_float32():
    """MindFormers' param_init_type float32: each weight kept in float32 and cast to fp16 where read. MindSpore's
    gradient_fp32_sync (on by default) puts the weight's mirror before the Cast, so its gradient is all-reduced in
    float32: MindSpore's own step (verify --communication, the Cell as built) moves twice the bytes of the fp16 read,
    and strategist prices each mirror so."""
    from strategist.verify import verify_model
    kw = ["layers=2", "batch=8", "param_dtype=float32"]
    c = verify_model(os.path.join(ROOT, "examples", "llama.py") + ":tiny", "dp=8", kwargs=kw, communication=True,
                     training=False)
    assert c.all_agree and c.communication.agree, c.text()
    mirrors = c.communication.ours["mirror"]
    # tiny: hidden 256, 8 heads, 4 kv heads, ffn 688, vocab 1024; an AllReduce over 8 sends 2 x 7/8 of the tensor
    assert sorted(b for _k, _n, b in mirrors if b > 1024) == sorted(
        [1.75 * 4 * n for n in [256 * 256] * 4 + [256 * 128] * 4 + [256 * 688] * 6 + [1024 * 256] * 2])
