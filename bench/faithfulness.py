"""Faithfulness benchmark: per-operator agreement of strategist's propagation with MindSpore 2.9.0's own.

Sections 1-2 and the live sections compare the Cell compiled as built (--eval); 2b the training compile
(set_train(True), as a training run compiles it: every command's default).

Sections:
  1. the examples x meshes (and the sharding-techniques classes, the anchors files), and MindSpore's own unit-test
     nets of sharding propagation (tests/models/ms_ut, netgen.MS_UT);
  2. N random nets from tests/netgen.py (fixed seeds 0..N-1, default 500; --seed0 moves every random section);
  2b. the training compile: the examples, the UT nets and --training-n random nets (netgen.training_cases);
  3. MindFormers training models (2 layers) when MindFormers and strategist.verify can build them;
  4. disagreement classes (operator type and how the strategies differ) with counts and one example;
  5. the zoo's advice: ``advise`` on each zoo model, then MindSpore propagating the anchors it prints; the same on
     --advice-n random nets (default 60, advised from scratch: many get no anchor, propagation from the dataset alone);
  6. semi_auto_parallel (compare's reference (c), strategist.engine.semi_auto): the batch strategies MindSpore's
     semi_auto gives the operators no shard() configures, and the Casts that pass layouts on, on the examples
     x meshes and --semi-auto-n random nets, each against a live MindSpore semi_auto compile;
  7. redistributions (``verify --redistributions``): which edges move data in strategist's priced plan and in
     MindSpore's step_parallel_end graph, on the examples x meshes and --moves-n random nets (live MindSpore);
  8. with --large: MindSpore's own search (verify) next to strategist's propagate on the 80-layer
     LLaMA-2-70B shape, 64 devices (dp=8, tp=8) -- MindSpore takes ~100 s and ~16 GB there.

MindSpore's answers come from tests/fixtures/ms/ (``make fixtures``); a case without a cached answer is
run live only with --live (one MindSpore child each, 2-4 s), otherwise it is counted as "no answer".

    .venv/bin/python bench/faithfulness.py [--n 500] [--live] [--large] [--no-examples] [--json out.json]
    .venv/bin/python bench/faithfulness.py --markdown docs/measurements/faithfulness.md   # the docs' page
"""
import argparse
import collections
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# bench/mindformers.py would shadow the mindformers package: keep this folder off sys.path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, ROOT)
os.environ.setdefault("GLOG_v", "4")

import netgen  # noqa: E402

# (config, extra build options): full width, 2 layers, batch 8; deepseek3's second layer made MoE
MINDFORMERS = [("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", []),
               ("mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", []),
               ("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", ["first_k_dense_replace=1"]),
               ("mindformers:telechat3/pretrain_telechat3_36b.yaml", []),
               # the legacy ChatGLM2 (use_legacy=True), grouped-query attention; seq 512 keeps MindSpore's child quick
               ("mindformers:glm4/finetune_glm4_9b.yaml", ["seq=512"])]


#: (label, stats) of every run_cases section, in order: the rows of --markdown's table
SECTIONS: list = []


def run_cases(cases, live, tmp, classes, label):
    stats = collections.Counter()
    per_type = collections.defaultdict(lambda: [0, 0])
    failures = []
    for i, case in enumerate(cases):
        answer = netgen.load_fixture(case)
        if answer is None:
            if not live:
                stats["no_answer"] += 1
                continue
            case.materialise(os.path.join(tmp, f"c{i}"))
            answer = netgen.ms_answer(case)
            netgen.save_fixture(case, answer)
        case.materialise(os.path.join(tmp, f"c{i}"))
        stats["cases"] += 1
        if not answer["ok"] and answer.get("error_source") == "strategist":
            stats["strategist_cannot_state_case"] += 1
            classes[("strategist cannot state the case for MindSpore (its graph lacks an anchored operator)",)].append(
                (case.id, answer["error"][:160]))
            failures.append(case.id)
            continue
        if not answer["ok"]:
            try:
                netgen.strategist_plan(case)
                stats["ms_rejects_we_accept"] += 1
                classes[("MindSpore rejects the configuration, strategist accepts", )].append(
                    (case.id, answer["error"][:140]))
            except Exception:
                stats["both_reject"] += 1
            continue
        try:
            plan = netgen.strategist_plan(case)
        except Exception as err:
            stats["we_fail"] += 1
            classes[("strategist refuses/crashes on a net MindSpore accepts",)].append(
                (case.id, f"{type(err).__name__}: {str(err)[:140]}"))
            failures.append(case.id)
            continue
        cmp = netgen.compare_answer(plan, answer)
        stats["compared"] += 1
        stats["all_agree"] += cmp.all_agree
        stats["ops"] += cmp.total
        stats["ops_agree"] += cmp.agreed
        stats["only_ours"] += len(cmp.only_ours)
        stats["only_ms"] += len(cmp.only_theirs)
        for r in cmp.rows:
            per_type[r.type][0] += r.agree
            per_type[r.type][1] += 1
        roots, cascaded = netgen.root_disagreements(plan, cmp)
        stats["cascaded"] += cascaded
        for cls, ex in roots:
            classes[(cls,)].append((case.id, ex))
        if not cmp.all_agree:
            failures.append(case.id)
    print(f"\n== {label}: {stats['cases']} cases with MindSpore's answer"
          + (f" ({stats['no_answer']} without: run `make fixtures` or --live)" if stats["no_answer"] else ""))
    if stats["compared"]:
        print(f"   operators agreeing: {stats['ops_agree']}/{stats['ops']} = {100 * stats['ops_agree'] / max(1, stats['ops']):.1f} %")
        print(f"   cases agreeing on every operator: {stats['all_agree']}/{stats['compared']} = "
              f"{100 * stats['all_agree'] / stats['compared']:.1f} %")
    if stats["cascaded"]:
        print(f"   disagreements caused by a disagreeing producer (not classed below): {stats['cascaded']}")
    for k in ("only_ours", "only_ms", "both_reject", "ms_rejects_we_accept", "we_fail",
              "strategist_cannot_state_case"):
        if stats[k]:
            print(f"   {k.replace('_', ' ')}: {stats[k]}")
    if per_type:
        print("   per operator type (agree/total):")
        items = sorted(per_type.items(), key=lambda kv: (kv[1][0] / kv[1][1], -kv[1][1]))
        line = []
        for t, (a, n) in items:
            line.append(f"{t} {a}/{n}")
        for j in range(0, len(line), 6):
            print("     " + ",  ".join(line[j:j + 6]))
    SECTIONS.append((label, stats))
    return stats, per_type, failures


def markdown_page(argv: list[str], classes) -> str:
    """The figures of this run as the docs' faithfulness page (``--markdown FILE``)."""
    from importlib.metadata import version
    import strategist
    cmd = " ".join(["python bench/faithfulness.py", *argv])
    out = [f"<!-- written by bench/faithfulness.py; do not edit: re-run `{cmd}` -->", "",
           "# Faithfulness figures", "",
           f"Per-operator agreement of strategist {strategist.__version__}'s propagation with MindSpore "
           f"{version('mindspore')}'s own sharding propagation on the same model, mesh, anchors and dataset strategy. "
           "MindSpore's answers are the cached ones in `tests/fixtures/ms/` (`make fixtures`; `--live` asks MindSpore "
           "for the missing ones). What the sets are and how a case is compared: "
           "[Faithfulness](../design/faithfulness.md).", "",
           f"Written by `{cmd}`.", "",
           "| set | cases with MindSpore's answer | operators agreeing | cases agreeing on every operator | "
           "both reject | other |", "|---|---|---|---|---|---|"]
    for label, st in SECTIONS:
        if not st["cases"] and not st["no_answer"]:
            continue                        # an empty set (--n 0, --training-n 0)
        ops = f"{st['ops_agree']} / {st['ops']} ({100 * st['ops_agree'] / max(1, st['ops']):.1f} %)" \
            if st["compared"] else "-"
        cases = f"{st['all_agree']} / {st['compared']}" if st["compared"] else "-"
        other = "; ".join(f"{k.replace('_', ' ')} {st[k]}" for k in
                          ("no_answer", "only_ours", "only_ms", "ms_rejects_we_accept", "we_fail",
                           "strategist_cannot_state_case") if st[k]) or "-"
        out.append(f"| {label.replace('|', '/')} | {st['cases']} | {ops} | {cases} | {st['both_reject'] or '-'} | "
                   f"{other} |")
    if classes:
        out += ["", "## Disagreement classes", "", "Root disagreements only (an operator whose producer disagrees "
                "is not counted again).", "", "| operators | cases | class | example |", "|---|---|---|---|"]
        for (cls,), items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            ex = f"{items[0][0]}: {items[0][1]}".replace("|", "/").replace("\n", " ")
            out.append(f"| {len(items)} | {len({c for c, _ in items})} | {cls.replace('|', '/')} | {ex[:200]} |")
    return "\n".join(out) + "\n"


def mindformers_section(classes):
    """The experts' ``sharding_propagation()`` anchors propagated by strategist and by MindSpore itself
    (``strategist verify``, a MindSpore child per model: ~20-40 s each), dp=2,tp=4, full_batch."""
    print("\n== MindFormers training models (2 layers, the experts' sharding_propagation() anchors, dp=2,tp=4)")
    import importlib.util
    if importlib.util.find_spec("mindformers") is None:       # importing it here would log into ./output/
        print("   skipped: MindFormers is not installed")
        return None
    from strategist.verify import verify_model
    out = {}
    for ref, extra in MINDFORMERS:
        t0 = time.perf_counter()
        try:
            cmp = verify_model(ref, "dp=2,tp=4", kwargs=["layers=2", "batch=8", *extra], dataset_strategy="full_batch")
        except Exception as err:
            from strategist.errors import VerifyError
            what = "MindSpore rejects it" if isinstance(err, VerifyError) and "rejected" in str(err) else "skipped"
            print(f"   {ref}: {what} ({type(err).__name__}: {str(err).splitlines()[0][:300]})")
            out[ref] = what
            continue
        a, n = cmp.agreed, cmp.total
        print(f"   {ref}: {a}/{n} operators agree ({100 * a / max(n, 1):.1f} %; {time.perf_counter() - t0:.0f} s); "
              f"{len(cmp.only_ours)} only strategist, {len(cmp.only_theirs)} only MindSpore, "
              f"{len(cmp.parallel_only)} only in MindSpore's parallel build (the loss's x + 0)")
        for cls, ex in netgen.disagreements(cmp):
            classes[(cls,)].append((ref, ex))
        out[ref] = (a, n)
    return out


# the zoo at realistic sizes: strategist advise's plan, then verify on the anchors it prints
ZOO_ADVICE = [("gpt_nn.py:GPT", ["hidden=4096", "heads=32", "seq=1024", "batch=8", "vocab=32768"]),
              ("encoder.py:EncoderClassifier", []),
              ("vit.py:ViT", ["hidden=1024", "heads=16", "image=224", "patch=16", "batch=16"]),
              ("resnet50.py:ResNet50", ["batch=256", "classes=10000"])]


def _advise_and_verify(model, mesh, **kw):
    """(advice, verify's comparison): ``advise`` on ``model``, then MindSpore propagating the anchors it prints (the
    anchors file written, handed to verify, removed). ``kw``: the model's inputs/kwargs, dataset strategy, compile."""
    import tempfile
    from strategist.api import advise_model
    from strategist.report.render import advice_dict
    from strategist.verify import verify_model
    adv = advise_model(model, mesh, **kw)
    fd, path = tempfile.mkstemp(suffix=".yaml", prefix="advice-")
    with os.fdopen(fd, "w") as f:
        f.write(advice_dict(adv)["anchors_yaml"])
    try:
        return adv, verify_model(model, mesh, strategies=path, **kw)
    finally:
        os.remove(path)


def advice_section(mesh="dp=2,tp=4", training=True):
    """Issue 10: ``verify`` agrees with every plan ``advise`` prints -- each zoo model advised on ``mesh``,
    the printed anchors written to a file and handed to MindSpore (a child each, ~20-40 s). ``training``: both
    for the training compile (the default), else both for the compile as built (``--eval``)."""
    print(f"\n== the zoo's advice ({mesh}{'' if training else ', --eval'}), verified: MindSpore propagates the "
          f"anchors advise prints")
    out = {}
    for ref, kw in ZOO_ADVICE:
        model = os.path.join(ROOT, "examples", ref)
        t0 = time.perf_counter()
        try:
            adv, cmp = _advise_and_verify(model, mesh, kwargs=kw, training=training)
        except Exception as err:
            print(f"   {ref}: failed ({type(err).__name__}: {str(err).splitlines()[0][:200]})")
            continue
        print(f"   {ref}: {len(adv.chosen)} anchors; {cmp.agreed}/{cmp.total} operators agree "
              f"({time.perf_counter() - t0:.0f} s)")
        out[ref] = (cmp.agreed, cmp.total)
    return out


def advice_random_section(cases, label):
    """``verify`` agrees with the plan ``advise`` prints, on random nets: each net advised from scratch (its own
    anchors file left out), the printed anchors handed to MindSpore's training compile (live, ~3 s a net). An
    advice of no anchors checks propagation from the dataset alone."""
    print(f"\n== the advice on {label}, verified: MindSpore propagates the anchors advise prints (training compile)")
    import tempfile
    from strategist.errors import StrategistError
    agreed = total = nets = nets_ok = refused = no_anchor = 0
    t0 = time.perf_counter()
    for case in cases:
        case = case.materialise(tempfile.mkdtemp(prefix="advice-random-"))
        try:
            adv, cmp = _advise_and_verify(case.model, case.mesh, inputs=case.inputs or None,
                                          dataset_strategy=case.dataset_strategy)
        except StrategistError as err:
            refused += 1
            print(f"   {case.id}: {type(err).__name__}: {str(err).splitlines()[0][:160]}")
            continue
        nets += 1
        no_anchor += not adv.chosen
        agreed += cmp.agreed
        total += cmp.total
        nets_ok += cmp.agreed == cmp.total
        if cmp.agreed != cmp.total:
            print(f"   {case.id} ({len(adv.chosen)} anchors): {cmp.agreed}/{cmp.total} operators agree")
    print(f"   operators agreeing: {agreed}/{total}; nets agreeing on every operator: {nets_ok}/{nets} ({no_anchor} "
          f"advised no anchor); refused {refused} ({time.perf_counter() - t0:.0f} s)")
    return {"agreed": agreed, "total": total, "nets": nets, "nets_ok": nets_ok, "no_anchor": no_anchor,
            "refused": refused}


def mindformers_advice_section(mesh="dp=2,tp=4"):
    """The advice on each MindFormers model, verified: advise, write the anchors a shard() can carry (an anchor
    on a functional call cannot be configured by name in MindSpore: left out, and counted), verify them (the
    child clears MindFormers' own strategies and configures the file's operators). 2 layers, full_batch."""
    print(f"\n== MindFormers models' advice ({mesh}, 2 layers), verified: MindSpore propagates the advised anchors")
    import importlib.util
    import tempfile
    if importlib.util.find_spec("mindformers") is None:
        print("   skipped: MindFormers is not installed")
        return None
    from strategist.advice.advisor import advise
    from strategist.vocab.mesh import Mesh
    from strategist.files.hardware import load_hardware
    from strategist.frontend.mindformers import load_mindformers, split_model_options
    from strategist.report.render import advice_dict, configurable_anchors_yaml
    from strategist.verify import verify_model
    out = {}
    for ref, extra in MINDFORMERS:
        t0 = time.perf_counter()
        kwargs = ["layers=2", "batch=8", *extra]
        try:
            opts = split_model_options(kwargs)
            g, _ = load_mindformers(ref, **opts)
            adv = advise(g, Mesh.parse(mesh), hardware=load_hardware("atlas-800t-a2"), dataset_strategy="full_batch")
            d = advice_dict(adv)
            unheld = [a["op"] for a in d["anchors"] if not a["held"]]
            text = configurable_anchors_yaml(adv)
            label = ""
            for attempt in ("as advised", "out layouts left out"):
                if attempt != "as advised":
                    # MindSpore refuses a sequence-parallel row linear's reduce-scatter out layout on the
                    # global-rows graph it compiles ((tp, dp): S's axis outside B's); the rest of the advice is
                    # still checked, both sides configured without the out layouts
                    text = configurable_anchors_yaml(adv, out_layouts=False)
                    label = "; the row linears' out layouts left out: MindSpore refuses (tp, dp) rows there"
                fd, path = tempfile.mkstemp(suffix=".yaml", prefix="mf-advice-")
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                try:
                    cmp = verify_model(ref, mesh, kwargs=kwargs, strategies=path, dataset_strategy="full_batch")
                    break
                except Exception as err:
                    if attempt != "as advised" or "\n  out_layout:" not in text \
                            or "MatMulInfo" not in str(err):
                        raise
                finally:
                    os.remove(path)
        except Exception as err:
            print(f"   {ref}: failed ({type(err).__name__}: {str(err).splitlines()[0][:200]})")
            out[ref] = "failed"
            continue
        print(f"   {ref}: {len(adv.chosen)} anchors ({len(unheld)} on functional calls left out{label}); "
              f"{cmp.agreed}/{cmp.total} operators agree ({time.perf_counter() - t0:.0f} s)")
        out[ref] = (cmp.agreed, cmp.total)
    return out


def large_section(layers=80):
    """MindSpore's own search next to strategist's propagate on the 80-layer 70B shape, 64 devices."""
    from strategist import load_graph
    from strategist.files.anchors import load_anchors
    from strategist.vocab.mesh import Mesh
    from strategist.propagate import clear_caches, propagate
    # Megatron anchors, less the embedding's layout: MindSpore 2.9 fails on a Layout on Gather
    # (vector::_M_range_check), so the timing run leaves the embedding to propagation
    import tempfile
    src = os.path.join(ROOT, "examples", "llama_megatron_dp8_tp8.yaml")
    lines, skip = [], False
    for line in open(src):
        if line.startswith("model.tok_embeddings.gather"):
            skip = True
            continue
        if skip and line.startswith(" "):
            continue
        skip = False
        lines.append(line)
    if "layout:" not in open(src).read():
        lines = open(src).readlines()      # the file already uses the tuple form MindSpore accepts
    fd, anchors = tempfile.mkstemp(suffix=".yaml", prefix="faithfulness-anchors-")
    with os.fdopen(fd, "w") as f:
        f.writelines(lines)
    model = os.path.join(ROOT, "examples", "llama.py:llama2_70b")
    kwargs = [f"layers={layers}", "batch=8"]
    print(f"\n== {layers}-layer LLaMA-2-70B shape, 64 devices (dp=8, tp=8), Megatron anchors, full_batch, "
          f"the training compile on both sides")
    mesh = Mesh.parse("dp=8,tp=8")
    t0 = time.perf_counter()
    g = load_graph(model, None, kwargs, training=True)
    t_extract = time.perf_counter() - t0
    a = load_anchors(anchors, g, mesh)
    clear_caches()
    t0 = time.perf_counter()
    plan = propagate(g, mesh, a, dataset_strategy="full_batch", hardware=None, price=False)
    t_prop = time.perf_counter() - t0
    print(f"   strategist: extract {t_extract:.1f} s, propagate {t_prop:.2f} s ({len(g)} operators)")
    case = netgen.Case(f"llama70b-{layers}", model, "dp=8,tp=8", [], kwargs, anchors, "full_batch", training=True)
    t0 = time.perf_counter()
    try:
        answer = netgen.ms_answer(case, timeout=1800)
    finally:
        os.remove(anchors)
    t_ms = time.perf_counter() - t0
    if not answer["ok"]:
        print(f"   MindSpore failed after {t_ms:.0f} s: {answer['error'][:200]}")
        return
    cmp = netgen.compare_answer(plan, answer)
    ms_compile = answer["msplan"]["compile_seconds"]
    print(f"   MindSpore: compile with its search {ms_compile:.1f} s (verify's whole child {t_ms:.1f} s)")
    print(f"   strategist's propagate is {ms_compile / max(t_prop, 1e-9):.0f}x faster than MindSpore's compile "
          f"({t_ms / max(t_prop, 1e-9):.0f}x than verify); {cmp.agreed}/{cmp.total} operators agree")


def _case_graph(case):
    """(graph, mesh, anchors) of ``case``."""
    from strategist.files.anchors import load_anchors
    from strategist.frontend.loader import load_graph
    from strategist.vocab.mesh import Mesh
    case.materialise()
    mesh = Mesh.parse(case.mesh)
    g = load_graph(case.model, case.inputs or None, case.kwargs or None, training=case.training)
    return g, mesh, load_anchors(case.strategies, g, mesh) if case.strategies else {}


def _ask_mindspore(case, g, **ms_options):
    """MindSpore's answer for ``case`` (its graph ``g``), asked live with ``ms_options``."""
    from strategist.verify import mindspore_plan
    return mindspore_plan(case.model, case.mesh, inputs=case.inputs or None, kwargs=case.kwargs or None,
                          strategies=case.strategies, dataset_strategy=case.dataset_strategy, graph=g, **ms_options)


def _live_case(case, **ms_options):
    """(graph, mesh, anchors, MindSpore's answer) for ``case``, MindSpore asked live with ``ms_options``; a
    StrategistError where either side refuses it."""
    g, mesh, anchors = _case_graph(case)
    return g, mesh, anchors, _ask_mindspore(case, g, **ms_options)


def semi_auto_section(cases, label):
    """strategist.engine.semi_auto's plan next to MindSpore compiled in semi_auto_parallel (live: one child a case)."""
    from strategist.errors import StrategistError
    from strategist.propagate import semi_auto_plan
    from strategist.verify import compare
    stats = collections.Counter()
    worst = []
    t0 = time.time()
    for case in cases:
        try:
            g, mesh, anchors, ms = _live_case(case, parallel_mode="semi_auto_parallel")
        except StrategistError as err:
            stats["mindspore_rejects"] += 1
            worst.append((case.id, "MindSpore rejects: " + str(err).splitlines()[0][-120:]))
            continue
        c = compare(semi_auto_plan(g, mesh, anchors, dataset_strategy=case.dataset_strategy), ms)
        stats["cases"] += 1
        stats["agreed"] += c.agreed
        stats["operators"] += c.total
        stats["cases_all_agree"] += c.agreed == c.total
        for r in c.disagreements():
            worst.append((case.id, f"{r.op} ({r.type}): strategist {r.ours}, MindSpore {r.theirs}"))
    print(f"\n== semi_auto_parallel, {label}: {stats['agreed']}/{stats['operators']} operators agree, "
          f"{stats['cases_all_agree']}/{stats['cases']} cases entirely; MindSpore rejects "
          f"{stats['mindspore_rejects']} ({time.time() - t0:.0f} s)")
    for cid, what in worst[:12]:
        print(f"   {cid}: {what}")
    return dict(stats, examples=worst[:12])


def _live_plans(cases, stats, **ms_options):
    """(case, strategist's priced plan, MindSpore's answer asked live with ``ms_options``) per case; a case either
    side refuses counts in ``stats["rejected"]``."""
    from strategist.errors import StrategistError
    from strategist.propagate import propagate
    from strategist.verify.msplan import output_strategies
    for case in cases:
        try:
            g, mesh, anchors = _case_graph(case)
            plan = propagate(g, mesh, anchors, dataset_strategy=case.dataset_strategy)
            opts = dict(ms_options)
            if opts.get("training"):
                opts["training"] = output_strategies(plan)      # the step's loss sums take the outputs' layouts
            ms = _ask_mindspore(case, g, **opts)
        except StrategistError:
            stats["rejected"] += 1
            continue
        yield case, plan, ms


def moves_section(cases, label):
    """The edges that move data: strategist's priced plan beside the redistributions MindSpore inserted (live)."""
    from strategist.verify.compare import compare_moves
    stats = collections.Counter()
    worst = []
    t0 = time.time()
    for case, plan, ms in _live_plans(cases, stats, redistributions=True):
        m = compare_moves(plan, ms)
        stats["cases"] += 1
        stats["cases_agree"] += m.agree
        stats["both"] += len(m.both)
        stats["only_strategist"] += len(m.only_ours)
        stats["only_mindspore"] += len(m.only_theirs)
        worst += [(case.id, f"only strategist: {a} -> {b}  {t}") for a, b, t in m.only_ours]
        worst += [(case.id, f"only MindSpore: {a} -> {b}  {' + '.join(t)}") for a, b, t in m.only_theirs]
    print(f"\n== edges moving data, {label}: {stats['both']} in both, {stats['only_strategist']} only strategist, "
          f"{stats['only_mindspore']} only MindSpore; {stats['cases_agree']}/{stats['cases']} cases agree "
          f"entirely; rejected {stats['rejected']} ({time.time() - t0:.0f} s)")
    for cid, what in worst[:12]:
        print(f"   {cid}: {what[:160]}")
    return dict(stats, examples=worst[:12])


def communication_section(cases, label):
    """Every collective of one training step: strategist's priced plan beside MindSpore's graph after autodiff
    (live; verify --communication): per phase, the collectives only one side has."""
    from strategist.verify.compare import PHASES, compare_communication
    stats = collections.Counter()
    worst = []
    t0 = time.time()
    for case, plan, ms in _live_plans(cases, stats, training=True):
        c = compare_communication(plan, ms)
        if c.strategies_differ:
            # the loss the training step adds joined MindSpore's propagation and changed a strategy: another plan
            stats["strategies_differ"] += 1
            continue
        stats["cases"] += 1
        stats["cases_agree"] += c.agree
        for p in PHASES:
            ours, theirs = c.diff(p)
            stats[f"{p}_ours"] += len(c.ours.get(p, []))
            stats[f"{p}_theirs"] += len(c.theirs.get(p, []))
            stats[f"{p}_only_ours"] += len(ours)
            stats[f"{p}_only_theirs"] += len(theirs)
            stats["bytes_ours"] += c.bytes("strategist", p)
            stats["bytes_theirs"] += c.bytes("mindspore", p)
            worst += [(case.id, f"{p} only strategist {k}(n={n}) {b:.0f} B") for k, n, b in ours]
            worst += [(case.id, f"{p} only MindSpore {k}(n={n}) {b:.0f} B") for k, n, b in theirs]
    print(f"\n== one training step's collectives, {label}: {stats['cases_agree']}/{stats['cases']} cases agree "
          f"on every collective (kind, group, bytes); left out: {stats['strategies_differ']} where the step's loss "
          f"changed MindSpore's strategies, rejected {stats['rejected']} ({time.time() - t0:.0f} s)")
    for p in PHASES:
        print(f"   {p:<9} strategist {stats[p + '_ours']:5d}  MindSpore {stats[p + '_theirs']:5d}  "
              f"only strategist {stats[p + '_only_ours']:4d}  only MindSpore {stats[p + '_only_theirs']:4d}")
    ratio = stats["bytes_ours"] / stats["bytes_theirs"] if stats["bytes_theirs"] else float("nan")
    print(f"   bytes per device, all cases: strategist / MindSpore = {ratio:.4f}")
    for cid, what in worst[:12]:
        print(f"   {cid}: {what[:160]}")
    return dict(stats, examples=worst[:12])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="random nets (seeds SEED0..SEED0+N-1)")
    ap.add_argument("--seed0", type=int, default=0,
                    help="first seed of every random-net section (default 0: the cached fixtures' seeds; others "
                         "need --live for section 2, and are asked live in the semi_auto, moves and communication "
                         "sections anyway)")
    ap.add_argument("--extra-meshes", action="store_true",
                    help="random nets on netgen.EXTRA_MESHES (32 devices, four axes, tp only ...; no cached answers)")
    ap.add_argument("--live", action="store_true", help="run MindSpore for cases without a cached answer")
    ap.add_argument("--large", action="store_true", help="also time verify vs propagate on the 80-layer 70B shape")
    ap.add_argument("--layers", type=int, default=80, help="with --large: decoder layers (80 is the 70B shape)")
    ap.add_argument("--no-examples", action="store_true",
                    help="skip the examples x meshes, in every section (with --seed0: only new random nets)")
    ap.add_argument("--no-mindformers", action="store_true")
    ap.add_argument("--no-advice", action="store_true", help="skip verifying the zoo's advice (4 MindSpore runs)")
    ap.add_argument("--advice-n", type=int, default=60,
                    help="random nets whose advice is verified live (~3 s each; 0: none)")
    ap.add_argument("--semi-auto-n", type=int, default=100,
                    help="random nets for the semi_auto_parallel section (live MindSpore, ~3 s each; 0: examples only)")
    ap.add_argument("--no-semi-auto", action="store_true", help="skip the semi_auto_parallel section")
    ap.add_argument("--moves-n", type=int, default=60,
                    help="random nets for the redistributions section (live MindSpore, ~3 s each; 0: examples only)")
    ap.add_argument("--no-moves", action="store_true", help="skip the redistributions section")
    ap.add_argument("--communication-n", type=int, default=60,
                    help="random nets in the training-step communication section (default 60)")
    ap.add_argument("--no-communication", action="store_true", help="skip the training-step communication section")
    ap.add_argument("--training-n", type=int, default=netgen.N_TRAIN_RANDOM,
                    help=f"random nets in the training-compile section (default {netgen.N_TRAIN_RANDOM}: the cached ones)")
    ap.add_argument("--no-training", action="store_true", help="skip the training-compile section")
    ap.add_argument("--json", help="write the figures and every disagreement to this file")
    ap.add_argument("--markdown", metavar="FILE.md",
                    help="write the figures as a Markdown page (the docs' docs/measurements/faithfulness.md)")
    a = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)

    meshes = netgen.EXTRA_MESHES if a.extra_meshes else None

    def seeds(n):
        return f"seeds {a.seed0}..{a.seed0 + n - 1}" + (", netgen.EXTRA_MESHES" if meshes else "")
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="faithfulness-")
    classes = collections.defaultdict(list)
    report = {}
    t0 = time.time()
    try:
        if not a.no_examples:
            s, _, fails = run_cases(netgen.example_cases(), a.live, tmp, classes, "examples x meshes")
            report["examples"] = dict(s, failing=fails)
            s, _, fails = run_cases(netgen.ms_ut_cases(), a.live, tmp, classes,
                                    "MindSpore's own unit-test nets of sharding propagation (tests/models/ms_ut)")
            report["mindspore_unit_tests"] = dict(s, failing=fails)
            s, _, fails = run_cases(netgen.lazy_cases(), a.live, tmp, classes,
                                    "@lazy_inline blocks, one reused graph per class (tests/models/reused_blocks.py, "
                                    "training compile)")
            report["lazy_inline"] = dict(s, failing=fails)
        if a.n:
            s, _, fails = run_cases(netgen.random_cases(a.n, a.seed0, meshes), a.live, tmp, classes,
                                    f"{a.n} random nets ({seeds(a.n)})")
            report["random"] = dict(s, failing=fails)
        if not a.no_training:
            report["training"] = {}
            sets = ([] if a.no_examples else [("examples", netgen.example_cases(), "examples x meshes"),
                                              ("mindspore_unit_tests", netgen.ms_ut_cases(), "the UT nets")])
            sets.append(("random", netgen.random_cases(a.training_n, a.seed0, meshes),
                         f"{a.training_n} random nets ({seeds(a.training_n)})"))
            for key, cases, label in sets:
                s, _, fails = run_cases([c.as_training() for c in cases], a.live, tmp, classes,
                                        f"the training compile (--train: set_train(True)): {label}")
                report["training"][key] = dict(s, failing=fails)
        if not a.no_mindformers:
            report["mindformers"] = mindformers_section(classes)
        if not a.no_advice:
            report["advice"] = advice_section()
            report["advice_eval"] = advice_section(training=False)
            if not a.no_mindformers:
                report["mindformers_advice"] = mindformers_advice_section()
            if a.advice_n:
                report["advice_random"] = advice_random_section(netgen.random_cases(a.advice_n, a.seed0, meshes),
                                                                f"{a.advice_n} random nets ({seeds(a.advice_n)})")
        if not a.no_semi_auto:
            report["semi_auto"] = {} if a.no_examples else {"examples": semi_auto_section(netgen.example_cases(), "examples x meshes")}
            if a.semi_auto_n:
                report["semi_auto"]["random"] = semi_auto_section(
                    netgen.random_cases(a.semi_auto_n, a.seed0, meshes), f"{a.semi_auto_n} random nets ({seeds(a.semi_auto_n)})")
        if not a.no_moves:
            report["moves"] = {} if a.no_examples else {"examples": moves_section(netgen.example_cases(), "examples x meshes")}
            if a.moves_n:
                report["moves"]["random"] = moves_section(
                    netgen.random_cases(a.moves_n, a.seed0, meshes), f"{a.moves_n} random nets ({seeds(a.moves_n)})")
        if not a.no_communication:
            report["communication"] = {} if a.no_examples else {"examples": communication_section(netgen.example_cases(), "examples x meshes")}
            if a.communication_n:
                report["communication"]["random"] = communication_section(
                    netgen.random_cases(a.communication_n, a.seed0, meshes),
                    f"{a.communication_n} random nets ({seeds(a.communication_n)})")
        print("\n== disagreement classes: root disagreements only (operators, cases, class; one example)")
        for (cls,), items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            cases = len({c for c, _ in items})
            print(f"   {len(items):4d} ops in {cases:3d} cases  {cls}\n          e.g. {items[0][0]}: {items[0][1]}")
        report["classes"] = {cls: {"count": len(v), "cases": len({c for c, _ in v}), "examples": v[:3]}
                             for (cls,), v in classes.items()}
        print(f"\n({time.time() - t0:.0f} s)")
        if a.large:
            large_section(a.layers)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=1)
        if a.markdown:
            shown = [x for i, x in enumerate(argv) if x != "--markdown" and (i == 0 or argv[i - 1] != "--markdown")]
            with open(a.markdown, "w", encoding="utf-8") as f:
                f.write(markdown_page(shown + ["--markdown", a.markdown], classes))
            print(f"wrote {a.markdown}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
