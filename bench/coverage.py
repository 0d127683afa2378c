"""Registry coverage: MindSpore OperatorInfo primitives with a rule, and operators without one per model.

    .venv/bin/python bench/coverage.py                 # registry + examples + zoo + MindFormers (2 layers)
    .venv/bin/python bench/coverage.py --registry      # the registry count only (fast)
    .venv/bin/python bench/coverage.py --no-mindformers
    .venv/bin/python bench/coverage.py --no-mindformers --only mindone:    # the mindone.transformers rows
    .venv/bin/python bench/coverage.py --no-mindformers --only mindone: --verify --no-paths   # and MindSpore's
    .venv/bin/python bench/coverage.py --scan-wheel    # re-derive the OperatorInfo names from the installed wheel

Prints, for MindSpore 2.9's OperatorInfo primitives (``rules/mindspore_operator_infos.yaml``), how many
have a factor rule and the names left out with the reason; then for each model: the operators without a
rule (target 0), the operators whose cell path differs from the true one (target 0), the extraction time
and the advise time (``advise`` on dp=2,tp=4).

The true cell path of every operator comes from an independent reference (``strategist.frontend.celltrace``):
the same compile with MindSpore's ``debug_level=DEBUG``, which parses every function call afresh so each
node takes the scope of the Cell instance whose ``construct`` called it, without any of strategist's
devices; the two graphs are aligned by operator type in order. ``--no-paths`` skips it (it costs ~5x a
compile per model).
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# bench/mindformers.py would shadow the mindformers package: keep this folder off sys.path
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, ROOT)

INFOS = os.path.join(ROOT, "rules", "mindspore_operator_infos.yaml")

#: example models: (target, kwargs, inputs)
EXAMPLES = [
    ("examples/mlp.py:MegatronMLP", [], []),
    ("examples/sharding_techniques.py:DocsFFN", [], []),
    ("examples/llama.py:tiny", [], []),
    ("examples/attention.py:AttentionBlock", [], []),
    ("examples/resnet.py:ResNetLike", [], []),
]
#: the zoo of real-layer models (issue 10), when present
ZOO = [
    ("examples/gpt_nn.py:GPT", [], []),
    ("examples/encoder.py:EncoderClassifier", [], []),
    ("examples/vit.py:ViT", [], []),
    ("examples/resnet50.py:ResNet50", [], []),
]
#: MindFormers training models at 2 layers (strategist.frontend.mindformers)
MINDFORMERS = [
    ("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", {}),
    ("mindformers:qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", {}),
    ("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", {"first_k_dense_replace": 1}),
    ("mindformers:telechat3/pretrain_telechat3_36b.yaml", {}),
]

#: mindone.transformers architectures at 2 layers and a small width (strategist.frontend.mindone): (target, keys)
MINDONE_SMALL = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
                 "vocab_size": 1024, "head_dim": 64, "moe_intermediate_size": 256, "num_experts": 4,
                 "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 64, "q_lora_rank": 64,
                 "qk_rope_head_dim": 32, "qk_nope_head_dim": 32, "v_head_dim": 64, "d_model": 256, "d_ff": 512,
                 "num_heads": 4, "d_kv": 64, "ffn_dim": 512, "word_embed_proj_dim": 256}
MINDONE = ["mindone:llama", "mindone:qwen2", "mindone:qwen3", "mindone:qwen3_moe", "mindone:mistral",
           "mindone:gemma", "mindone:phi3", "mindone:gpt_neox", "mindone:falcon", "mindone:opt", "mindone:bloom",
           "mindone:gpt2", "mindone:BertModel", "mindone:deepseek_v2", "mindone:T5EncoderModel",
           "mindone:starcoder2"]


def mindone_kwargs(target: str) -> list[str]:
    """``MINDONE_SMALL``'s keys the architecture's config has, with 2 layers, seq 64, batch 2."""
    from strategist.frontend.mindone import resolve_class
    from transformers import AutoConfig
    model_type, _ = resolve_class(target.partition(":")[2])
    cfg = AutoConfig.for_model(model_type)
    settable = [k for k in MINDONE_SMALL if hasattr(cfg, k)
                and not isinstance(getattr(type(cfg), k, None), property)]     # (falcon's head_dim is derived)
    keys = [f"{k}={MINDONE_SMALL[k]}" for k in settable]
    pad = getattr(cfg, "pad_token_id", None)
    if isinstance(pad, int) and pad >= MINDONE_SMALL["vocab_size"]:
        keys.append("pad_token_id=0")          # (phi3's 32000 is past the small vocabulary)
    return keys + ["layers=2", "seq=64", "batch=2"]


def registry_report() -> tuple[int, int, list[str]]:
    from strategist.engine.rules import coverage
    from strategist.engine.rules.registry import RULES
    import yaml
    with open(INFOS) as f:
        data = yaml.safe_load(f)
    prims = data["primitives"]
    covered = [p for p in prims if p in RULES]
    left = [p for p in prims if p not in RULES]
    print(f"MindSpore 2.9 OperatorInfo primitives covered: {len(covered)} / {len(prims)}")
    for p in left:
        print(f"  left out: {p:28s} {coverage.LEFT_OUT.get(p, 'no rule yet')}")
    inexact = [p for p in prims if p in coverage.INEXACT]
    if inexact:
        print(f"  narrower than MindSpore ({len(inexact)}): " + ", ".join(inexact))
    return len(covered), len(prims), left


class _Reference:
    """Wraps ``extract`` where the loaders call it: times it, and compiles the same Cell with the same
    inputs a second time for the reference cell paths (inside MindFormers' simulated world too)."""

    def __init__(self, paths: bool):
        self.paths = paths
        self.seconds = 0.0
        self.ref = None

    @contextlib.contextmanager
    def installed(self):
        import strategist.frontend.loader as loader
        import strategist.frontend.mindformers.load as mf
        from strategist.frontend import celltrace, graph
        real = graph.extract

        def extract(cell, *inputs, **kwargs):
            t0 = time.perf_counter()
            g = real(cell, *inputs, **kwargs)
            self.seconds = time.perf_counter() - t0
            if self.paths:
                # (extract's own options are not construct's: a model taking **kwargs would get them)
                kw = {k: v for k, v in kwargs.items() if k not in ("model", "training")}
                from strategist.frontend.graphfix import graph_mode_fixes
                with graph_mode_fixes():
                    self.ref = celltrace.reference_paths(cell, *inputs, **kw)
            return g

        saved = loader.extract, mf.extract
        loader.extract = mf.extract = extract
        try:
            yield self
        finally:
            loader.extract, mf.extract = saved


def _advise_seconds(g) -> float | str:
    from strategist.advice.advisor import advise, load_rules
    from strategist.vocab.mesh import Mesh
    t0 = time.perf_counter()
    try:
        advise(g, Mesh.parse("dp=2,tp=4"), rules=load_rules())
    except Exception as err:
        try:       # a batch that does not divide: the whole batch on every device
            advise(g, Mesh.parse("dp=2,tp=4"), rules=load_rules(), dataset_strategy="full_batch")
        except Exception:
            return f"{type(err).__name__}"
    return time.perf_counter() - t0


def model_report(target: str, kwargs, inputs, mindformers: bool = False, overrides=None, paths: bool = True) -> dict:
    from strategist.engine.rules.registry import RULES
    from strategist.frontend.celltrace import compare
    try:
        with _Reference(paths).installed() as rec:
            if mindformers:
                from strategist.frontend.mindformers import load_mindformers
                g, _info = load_mindformers(target, layers=2, overrides=overrides or None)
            elif target.startswith("mindone:"):
                from strategist import load_graph
                g = load_graph(target, inputs, kwargs)
            else:
                from strategist import load_graph
                path, _, name = target.partition(":")
                g = load_graph(os.path.join(ROOT, path) + ":" + name, inputs, kwargs)
    except Exception as err:   # a model that does not build is reported, not fatal
        print(f"  {target:58s} ERROR {type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")
        return {"target": target, "error": str(err)}
    dt = rec.seconds
    adv = _advise_seconds(g)
    missing: dict[str, int] = {}
    for op in g.ops:
        if op.type not in RULES:
            missing[op.type] = missing.get(op.type, 0) + 1
    n = sum(missing.values())
    what = ", ".join(f"{k} x{v}" for k, v in sorted(missing.items())) if missing else ""
    check = compare(g, rec.ref) if rec.ref is not None else None
    wrong = f"{len(check.wrong):3d}" if check else "  -"
    advs = f"{adv:5.1f} s" if isinstance(adv, float) else adv
    print(f"  {target:58s} {len(g.ops):5d} ops  without rule: {n:3d}  wrong cell path: {wrong}  "
          f"extract {dt:5.1f} s  advise {advs}  {what}")
    if check and (check.wrong or check.unmatched or check.root_scope):
        print(f"      cell paths: {check.summary()}")
        for name, mine, true in check.wrong[:8]:
            print(f"        {name}: {mine or '(root)'}, true {true or '(root)'}")
    return {"target": target, "ops": len(g.ops), "missing": missing, "seconds": dt, "advise_seconds": adv,
            "wrong_cell_path": len(check.wrong) if check else None}


def scan_wheel() -> None:
    """OperatorInfo names in the installed wheel's libmindspore_frontend.so that are primitives of
    mindspore.ops, compared with the YAML (names hidden by string tail-merging cannot be seen here)."""
    import importlib
    import inspect
    import mindspore
    from mindspore.ops.primitive import Primitive
    lib = os.path.join(os.path.dirname(mindspore.__file__), "lib", "libmindspore_frontend.so")
    with open(lib, "rb") as f:
        blob = f.read()
    names = {m.group(1).decode() for m in re.finditer(rb"\x00([A-Z][A-Za-z0-9]*)Info\x00", blob)}
    prims = set()
    for mod in ("mindspore.ops.operations", "mindspore.ops.auto_generate.gen_ops_prim",
                "mindspore.ops.operations._inner_ops", "mindspore.ops.operations.nn_ops",
                "mindspore.ops.operations.array_ops", "mindspore.ops.operations.math_ops",
                "mindspore.ops.operations.other_ops", "mindspore.ops.operations.manually_defined",
                "mindspore.ops.operations.random_ops", "mindspore.ops.operations._quant_ops",
                "mindspore.ops.operations.linalg_ops", "mindspore.ops.operations.image_ops"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        prims |= {c.__name__ for c in vars(m).values() if inspect.isclass(c) and issubclass(c, Primitive)}
    found = sorted(names & prims)
    import yaml
    with open(INFOS) as f:
        listed = set(yaml.safe_load(f)["primitives"])
    print(f"wheel: {len(found)} '<Prim>Info' strings naming a primitive; YAML lists {len(listed)}")
    print("  in the wheel, not in the YAML:", sorted(set(found) - listed) or "none")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--registry", action="store_true", help="the registry count only")
    p.add_argument("--no-mindformers", action="store_true")
    p.add_argument("--no-mindone", action="store_true", help="skip the mindone.transformers architectures")
    p.add_argument("--verify", action="store_true", help="mindone rows: MindSpore's own propagation beside "
                                                         "strategist's (a child process per model)")
    p.add_argument("--only", default=None, help="only models whose target contains this text")
    p.add_argument("--scan-wheel", action="store_true")
    p.add_argument("--no-paths", action="store_true", help="skip the reference cell paths (a 2nd, ~5x compile)")
    a = p.parse_args(argv)
    logging.disable(logging.WARNING)
    if a.scan_wheel:
        scan_wheel()
        return 0
    registry_report()
    if a.registry:
        return 0
    print("models (operators without a rule, target 0; operators whose cell path differs from MindSpore's "
          "DEBUG-parse reference, target 0):")
    for target, kw, ins in EXAMPLES + [z for z in ZOO if os.path.exists(os.path.join(ROOT, z[0].split(":")[0]))]:
        if not a.only or a.only in target:
            model_report(target, kw, ins, paths=not a.no_paths)
    if not a.no_mindone:
        _mindone_rows(a)
    if a.no_mindformers:
        return 0
    try:
        import strategist.frontend.mindformers  # noqa: F401
    except ImportError:
        # HOOK: strategist.frontend.mindformers (another helper's) is not importable here; MindFormers models skipped
        print("  MindFormers models: skipped (strategist.frontend.mindformers not importable)")
        return 0
    for ref, over in MINDFORMERS:
        if a.only and a.only not in ref:
            continue
        model_report(ref, [], [], mindformers=True, overrides=over, paths=not a.no_paths)
    return 0


def _mindone_rows(a) -> None:
    """A row per mindone architecture (:data:`MINDONE`): its operators, or the one line why it does not build."""
    try:
        from strategist.frontend.mindone.build import import_mindone
        import_mindone()
    except Exception as err:
        print(f"  mindone models: skipped ({str(err).splitlines()[0][:160]})")
        return
    for target in MINDONE:
        if a.only and a.only not in target:
            continue
        try:
            kw = mindone_kwargs(target)
        except Exception as err:
            print(f"  {target:58s} ERROR {type(err).__name__}: {str(err).splitlines()[0][:160]}")
            continue
        row = model_report(target, kw, [], paths=not a.no_paths)
        if a.verify and "error" not in row:
            print(f"      verify dp=2,tp=4, nothing configured: {_verify_row(target, kw)}")


def _verify_row(target: str, kw: list[str]) -> str:
    """MindSpore's sharding propagation of ``target`` beside strategist's: how many operators agree."""
    from strategist.verify import verify_model
    try:
        cmp = verify_model(target, "dp=2,tp=4", kwargs=kw, dataset_strategy="full_batch")
    except Exception as err:
        return f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:140] if str(err) else ''}"
    return f"{cmp.agreed}/{cmp.total} operators agree ({100 * cmp.agreed / max(cmp.total, 1):.1f} %)"


if __name__ == "__main__":
    raise SystemExit(main())
