"""Differential tests: strategist's propagation against MindSpore 2.9.0's own, operator by operator.

MindSpore's answers are cached in ``tests/fixtures/ms/`` (``make fixtures`` regenerates them; each is
keyed by a hash of the model source, mesh, anchors, dataset strategy and inputs, so an edited model
or generator simply misses its fixture and the case is skipped until regenerated). The cases:

* every example x three meshes (one with three axes), the "sharding techniques" page classes in both
  modes, every anchors file in ``examples/``;
* random nets from ``tests/netgen.py`` (fixed seeds; ``STRATEGIST_DIFF_N`` changes the count);
* a fixed sample run live through MindSpore (``verify_live``, needs the MindSpore child: slow).

Every case asserts agreement operator by operator, except the disagreements ``tests/known_disagreements.yaml`` lists
(case, outcome, the operators that differ, the cause): each of those is a strict expected failure that fails the suite
when the case differs otherwise, or starts agreeing (then remove it from the list). A case without a recorded answer
fails with the command that records it. ``bench/faithfulness.py`` prints the totals.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netgen  # noqa: E402

from strategist.errors import StrategistError  # noqa: E402

N_RANDOM = int(os.environ.get("STRATEGIST_DIFF_N", "60"))
N_FAST = 10            # the first N_FAST random nets run in the fast suite, the rest are marked slow

EXAMPLE_CASES = netgen.example_cases()
RANDOM_CASES = netgen.random_cases(N_RANDOM)


def _materialised(case, tmp_path):
    if case.spec is not None:
        c = netgen.Case(case.id, case.model, case.mesh, list(case.inputs), list(case.kwargs), None,
                        case.dataset_strategy, case.spec, training=case.training)
        return c.materialise(str(tmp_path))
    return case


KNOWN = netgen.known_disagreements()
DEMO_CASES = netgen.demo_cases()


def check_against_mindspore(case, answer):
    """Assert strategist's plan for ``case`` agrees with MindSpore's ``answer``, or differs exactly as
    tests/known_disagreements.yaml records (raising netgen.KnownDisagreement, the strict expected failure)."""
    return netgen.expect(case, answer, KNOWN).comparison


def _lists(v):
    return [_lists(x) for x in v] if isinstance(v, (list, tuple)) else v


def _cached(case):
    answer = netgen.load_fixture(case)
    if answer is None:
        pytest.fail(f"no recorded MindSpore answer for {case.id} ({os.path.relpath(netgen.fixture_path(case), netgen.ROOT)}):"
                    f" record it with `make fixtures` (or `.venv/bin/python tests/netgen.py fixtures --only '{case.id}'`)",
                    pytrace=False)
    return answer


def known_marks(case_id):
    """A known disagreement's strict expected failure (none for any other case)."""
    k = KNOWN.get(case_id)
    return [pytest.mark.xfail(strict=True, raises=netgen.KnownDisagreement,
                              reason=f"known disagreement (tests/known_disagreements.yaml): {k.cause}")] if k else []


def cases(population, slow=lambda c: False):
    """``population`` as pytest params: slow ones marked, the known disagreements strict expected failures."""
    return [pytest.param(c, marks=([pytest.mark.slow] if slow(c) else []) + known_marks(c.id), id=c.id)
            for c in population]


@pytest.mark.parametrize("case", cases(EXAMPLE_CASES))
def test_example_agrees_with_mindspore(case):
    check_against_mindspore(case, _cached(case))


MS_UT_CASES = netgen.ms_ut_cases()


@pytest.mark.parametrize("case", cases(MS_UT_CASES))
def test_mindspore_unit_test_net_agrees_with_mindspore(case):
    """MindSpore's own unit tests of sharding propagation (tests/models/ms_ut/, netgen.MS_UT), against MindSpore's
    recorded answers; a net MindSpore rejects, as its UT expects, strategist must refuse too."""
    check_against_mindspore(case, _cached(case))


RULE_CASES = netgen.rule_cases()


@pytest.mark.parametrize("case", RULE_CASES, ids=[c.id for c in RULE_CASES])
def test_rule_net_agrees_with_mindspore(case):
    """tests/models/rule_nets.py: Tril/Triu splits and per-input dataset strategies, each against MindSpore's
    recorded answer; they must agree (both refusing counts)."""
    answer = _cached(case)
    if not answer["ok"]:
        with pytest.raises(StrategistError):
            netgen.strategist_plan(case)
        return
    comparison = netgen.compare_answer(netgen.strategist_plan(case), answer)
    assert comparison.total and comparison.all_agree, netgen.summarize(comparison)


@pytest.mark.parametrize("case", cases(RANDOM_CASES, slow=lambda c: c.spec.seed >= N_FAST))
def test_random_net_agrees_with_mindspore(case, tmp_path):
    answer = _cached(case)
    check_against_mindspore(_materialised(case, tmp_path), answer)


TRAINING_CASES = netgen.training_cases()


@pytest.mark.parametrize("case", cases(TRAINING_CASES, slow=lambda c: c.spec is not None and c.spec.seed >= N_FAST))
def test_training_forward_agrees_with_mindspore(case, tmp_path):
    """The training compile (``--train``: MindSpore's child calls ``set_train(True)``, as a training run does)
    against MindSpore's recorded answer for it: TopoSort creation order, no VirtualOutput, Dropout on both sides."""
    check_against_mindspore(_materialised(case, tmp_path), _cached(case))


#: random nets past the fast sample that pinned a fix (each agrees with MindSpore since then)
# 190, 259: broadcast candidates of unequal ranks; 136: bmm(x, x.T) whose follow-the-producers candidate
# MatMul::CheckInputLayout refuses (i and j on a middle axis), so MindSpore does not fail as on net 265
# netgen.PINNED_SEEDS: past the default sample or on netgen.EXTRA_MESHES (answers recorded by the seed sweep)
PINNED = [c for s in (190, 259, 136) for c in netgen.random_cases(1, s)] + netgen.pinned_cases()


@pytest.mark.parametrize("case", PINNED, ids=[c.id for c in PINNED])
def test_pinned_random_net_agrees_with_mindspore(case, tmp_path):
    answer = _cached(case)
    comparison = netgen.compare_answer(netgen.strategist_plan(_materialised(case, tmp_path)), answer)
    assert comparison.all_agree, netgen.summarize(comparison)


#: training compiles past the fast sample that pinned a fix
# 10: a Reshape read by a MatMul and a ReduceMean: its swc list walks the consumers in node_users order
# (DeepScopedGraphSearch), not TopoSort's creation order -- MindSpore's swc index 4473 is the MatMul-first list's
# LstsqV2 (UT test_lstsqv2): its one generated strategy splits both inputs' batch over every device
PINNED_TRAINING = [c.as_training() for c in netgen.random_cases(1, 10)] + \
    [c.as_training() for c in MS_UT_CASES if c.id == "ms_ut.single_ops.LstsqV2Auto[dp=2]"]


@pytest.mark.parametrize("case", PINNED_TRAINING, ids=[c.id for c in PINNED_TRAINING])
def test_pinned_training_net_agrees_with_mindspore(case, tmp_path):
    answer = _cached(case)
    comparison = netgen.compare_answer(netgen.strategist_plan(_materialised(case, tmp_path)), answer)
    assert comparison.all_agree, netgen.summarize(comparison)


@pytest.mark.parametrize("seed", [pytest.param(k, id=f"advice.random[{k}]", marks=known_marks(f"train.advice.random[{k}]"))
                                  for k in range(netgen.N_ADVICE)])
def test_advice_on_random_net_agrees_with_mindspore(seed, tmp_path):
    """The plan ``advise`` prints for a random net (from scratch) is the plan MindSpore's training compile gives the
    anchors it prints (its recorded answer for exactly those anchors)."""
    case = netgen.advice_case(seed)
    check_against_mindspore(_materialised(case, tmp_path), _cached(case))


def test_known_disagreements_name_cases_that_exist():
    """Every entry of tests/known_disagreements.yaml names a case of this suite (a renamed or removed case leaves no
    stale entry behind), with one of the four outcomes and its cause."""
    ids = {c.id for c in EXAMPLE_CASES + MS_UT_CASES + RANDOM_CASES + TRAINING_CASES + DEMO_CASES} | \
        {f"train.advice.random[{k}]" for k in range(netgen.N_ADVICE)}
    assert set(KNOWN) <= ids, sorted(set(KNOWN) - ids)
    assert all(k.outcome != "disagrees" or k.operators for k in KNOWN.values())


def test_a_changed_rule_fails_the_case_naming_its_operators(monkeypatch):
    """Breaking one rule turns an agreeing case into a failure naming the operators that now differ: a GeLU whose
    output is never split (MindSpore splits the docs' FFN's GeLU over dp=8)."""
    import dataclasses
    from strategist.propagate import clear_caches
    from strategist.engine.rules import registry
    case = next(c for c in EXAMPLE_CASES if c.id == "mlp[dp=8]")
    answer = _cached(case)
    assert netgen.expect(case, answer, KNOWN).kind == "agrees"
    gelu = registry.RULES["GeLU"]
    monkeypatch.setattr(registry, "RULES", {**registry.RULES, "GeLU": lambda op: dataclasses.replace(
        gelu(op), unsplittable=frozenset(gelu(op).factors))})
    clear_caches()
    try:
        with pytest.raises(AssertionError, match=r"new disagreement with MindSpore \(disagrees\).*gelu"):
            netgen.expect(case, answer, KNOWN)
    finally:
        monkeypatch.undo()
        clear_caches()


def test_a_missing_answer_fails_naming_the_command(monkeypatch):
    case = EXAMPLE_CASES[0]
    monkeypatch.setattr(netgen, "load_fixture", lambda c: None)
    with pytest.raises(pytest.fail.Exception, match=r"no recorded MindSpore answer for mlp\[dp=8\] \(tests/fixtures/ms/[0-9a-f]+\.json\): record it with `make fixtures`"):
        _cached(case)


# --- the harness itself ---------------------------------------------------------------------

def test_generator_is_deterministic_and_covers_30_kinds():
    a, b = netgen.generate(123), netgen.generate(123)
    assert a.source == b.source and a.key() == b.key() and a.anchors == b.anchors
    kinds = set()
    for s in range(300):
        kinds |= set(netgen.generate(s).kinds)
    ops = {k for k in kinds if k[0].isupper()}
    assert len(ops) >= 30, sorted(ops)
    for must in ("reshape-chain", "keep_dims=True", "keep_dims=False", "shared-parameter", "multi-output",
                 "multi-input-net", "scalar-operand", "broadcast", "slice-masks", "OneHot", "Tile", "Gather",
                 "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "LayerNorm", "RmsNorm"):
        assert must in kinds, must
    meshes = {netgen.generate(s).mesh for s in range(300)}
    assert any(m.count(",") == 2 for m in meshes)
    assert all(2 <= netgen.NetSpec(0, "", [], m, "", None).devices <= 16 for m in meshes)


def test_fixture_key_changes_with_every_ingredient():
    base = netgen.fixture_key("src", "dp=8", None, "data_parallel", ["x:float32[8,8]"])
    assert netgen.fixture_key("src2", "dp=8", None, "data_parallel", ["x:float32[8,8]"]) != base
    assert netgen.fixture_key("src", "dp=2,tp=4", None, "data_parallel", ["x:float32[8,8]"]) != base
    assert netgen.fixture_key("src", "dp=8", "mm: [[8, 1], [1, 1]]\n", "data_parallel", ["x:float32[8,8]"]) != base
    assert netgen.fixture_key("src", "dp=8", None, "full_batch", ["x:float32[8,8]"]) != base


def test_disagreement_classes():
    assert netgen.classify("RealDiv", ((1, 1, 1), ()), ((4, 4, 1), ())) == "RealDiv: strategist replicates, MindSpore splits"
    assert netgen.classify("Tile", ((2, 4, 1),), ((1, 1, 1),)) == "Tile: strategist splits, MindSpore replicates"
    assert netgen.classify("OneHot", ((8,), (), ()), ((8, 1), (), ())).startswith("OneHot: strategy shaped differently")
    assert netgen.classify("MatMul", ((1, 1), (1, 16)), ((1, 1), (1, 8))) == \
        "MatMul: different split, same device count"
    assert netgen.classify("MatMul", ((8, 1), (1, 1)), ((8, 2), (2, 1))).endswith("fewer devices in strategist's")


def test_cached_answer_round_trips_through_verify():
    """A fixture is strategist.verify's own MsPlan; comparing strategist's plan with it agrees on the docs' FFN."""
    case = next(c for c in EXAMPLE_CASES if c.id == "mlp[dp=8]")
    answer = _cached(case)
    from strategist.verify import MsPlan
    ms = MsPlan.from_dict(answer["msplan"])
    assert ms.device_num == 8 and ms.dataset == ((8, 1),)
    assert [(o.path, o.in_strategy) for o in ms.ops if o.type == "MatMul"] == \
        [("linear_fc1.matmul", ((8, 1), (1, 1))), ("linear_fc2.matmul", ((8, 1), (1, 1)))]
    comparison = netgen.compare_answer(netgen.strategist_plan(case), answer)
    assert comparison.all_agree and comparison.total == 5


@pytest.mark.slow
def test_random_nets_extract_and_propagate():
    """Hypothesis over the generator: every net extracts and strategist propagates it completely."""
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
    @given(netgen.nets())
    def prop(spec):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            model, anchors = spec.write(d)
            case = netgen.Case("h", f"{model}:Net", spec.mesh, list(spec.inputs), [], anchors, spec.dataset_strategy)
            plan = netgen.strategist_plan(case)
            assert len(plan.choices) == len(plan.graph)
            assert all(ch.outputs for ch in plan.choices.values())
    prop()


# --- live: MindSpore itself, on a fixed sample -----------------------------------------------

LIVE = [c for c in EXAMPLE_CASES if c.id in ("mlp[dp=8]", "techniques.DocsFFN.propagate[dp=2,tp=4]")] + \
    [c for c in RANDOM_CASES if c.id in ("random[5]", "random[9]")]


@pytest.mark.slow
@pytest.mark.verify_live
@pytest.mark.parametrize("case", LIVE, ids=[c.id for c in LIVE])
def test_live_mindspore_matches_cache_and_strategist(case, tmp_path):
    case = _materialised(case, tmp_path)
    live = netgen.ms_answer(case)
    assert live["ok"], live["error"]
    cached = netgen.load_fixture(case)
    if cached is not None:      # MindSpore is deterministic: the cache is its answer
        strip = lambda ans: [(o["type"], o.get("path"), _lists(o["in_strategy"])) for o in ans["msplan"]["ops"]]  # noqa: E731
        assert strip(live) == strip(cached)
        assert _lists(live["msplan"]["dataset"]) == _lists(cached["msplan"]["dataset"])
    check_against_mindspore(case, live)


@pytest.mark.parametrize("seed", [10, 190, 259, 325, 385])
def test_nets_decided_at_a_reshape_agree_with_mindspore(seed, tmp_path):
    """Random nets decided at or next to a Reshape (fixed together): MindSpore matches a Reshape's
    strategies-with-cost to its neighbours by TensorLayout::operator== (device arrangement included:
    325, 385), lists BiasAdd's strategies with repeats (its unstable std::sort then picks another
    swc: 10), and never generates a broadcast candidate that splits the smaller input's inner
    size-1 dim (190, 259)."""
    case = netgen.random_cases(seed + 1)[seed]
    answer = _cached(case)
    comparison = netgen.compare_answer(netgen.strategist_plan(_materialised(case, tmp_path)), answer)
    assert comparison.all_agree, netgen.summarize(comparison)


@pytest.mark.parametrize("cid", ["ms_ut.ut3_pangu_alpha.PanguAlphaWithLoss16[dp=16]",
                                 "ms_ut.ut4_parallel_transformer.ParallelTransformerEncoderSP[dp=8]"])
def test_the_compile_as_built_has_no_dropout_not_set_to_training(cid, tmp_path):
    """``--eval`` extracts the Cell as built: an ``nn.Dropout`` not set to training is no operator there, as in
    MindSpore's compile of it, so every operator pairs with MindSpore's (the UT PanGu-alpha's 7 and the parallel
    transformer's 6 Dropouts were strategist's only while extraction always took the training forward); the
    training compile keeps them, on both sides."""
    case = next(c for c in MS_UT_CASES if c.id == cid)
    comparison = netgen.compare_answer(netgen.strategist_plan(case), _cached(case))
    assert comparison.all_agree and not comparison.only_ours and not comparison.only_theirs
    train = next(c for c in TRAINING_CASES if c.id == "train." + cid)
    plan = netgen.strategist_plan(_materialised(train, tmp_path))
    assert sum(op.type == "Dropout" for op in plan.graph) in (6, 7)
    assert not any(op.type == "Dropout" for op in netgen.strategist_plan(case).graph)


@pytest.mark.parametrize("case", DEMO_CASES, ids=[c.id for c in DEMO_CASES])
def test_demo_counterfactual_agrees_with_mindspore(case, tmp_path):
    """The plan behind a line of ``make demo``'s advice ("needed: without these 2 anchors": the advice less the wq
    line) against MindSpore's training compile of it. Taking the Reshape's consumers in creation order, strategist
    disagreed on 4 of 40 operators (wq ((8,1),(1,2)), FlashAttention split by 2, wo, the residual add) and priced the
    line at +39.7 ms; in node_users order it agrees 40/40 and the line is +55.8 ms."""
    comparison = netgen.compare_answer(netgen.strategist_plan(case), _cached(case))
    assert comparison.total == 40 and comparison.all_agree, netgen.summarize(comparison)
