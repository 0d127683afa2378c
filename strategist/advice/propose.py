"""The four heuristics: every operator that deserves an explicit strategy, with its template's sharding
(:func:`propose`)."""
from __future__ import annotations

from ..vocab.graph import OpGraph
from ..vocab.mesh import Mesh
from ..engine.search.caches import cached_rule
from .rules import Rules, anchor_of, template_sharding
from .choice import Choice
from .anatomy import (WEIGHT_MATMULS, _attention_projections, _cut_before, _data_parallel_choice,
    _data_parallel_template, _embedding_companion, _flippable, _grouped_query_attention, _model_own,
    _moe_permute_companion, _pair_interior, _preferences, _reduce_scatter_rows, _roles, _sequence_first,
    _sequence_parallel, _sp_templates, _split_interiors, _splits_nothing_model_parallel, _token_template,
    _weight_params)


def propose(graph: OpGraph, mesh: Mesh, rules: Rules, boundaries: dict[str, str] | None = None,
            megatron: bool = False) -> tuple[list[Choice], list[str]]:
    """Rules 1, 3 and 4: the proposed anchors (before rule 2 and minimality), and notes. ``megatron``: the
    linears of column/row pairs (:func:`_megatron_pairs`) that prefer data parallelism are proposed as
    Megatron's pair instead (the advisor tries both, see :func:`advise`)."""
    t = rules.templates
    cats = rules.categories
    roles = _roles(graph, rules)
    prefs = _preferences(graph, rules, boundaries or {})
    if megatron:
        for n in _flippable(graph, rules, prefs, boundaries):
            prefs[n] = ""
    notes: list[str] = []
    out: list[Choice] = []
    order = [op.name for op in graph if op.name in prefs]
    # the config asks for sequence parallelism (MindFormers' use_seq_parallel) on sequence-first rows
    sp = _sequence_parallel(graph, mesh)
    sp_norm, plain_norm = _sp_templates(graph, t, mesh)     # (the norms' templates with and without it)
    sp_head = ""
    router_head: dict[str, str] = {}
    # the embedding tables' row counts: a weight MatMul producing that many features is a language-model head
    # (a wide MLP linear is not: its features are the intermediate size)
    vocabularies = {op.inputs[s].spec.shape[0] for op in graph if op.type in ("Embedding", "Gather", "GatherV2")
                    for s in _weight_params(graph, op)
                    if op.inputs[s].spec is not None and len(op.inputs[s].spec.shape) == 2}
    attention = _attention_projections(graph, roles, cats.get("norm", ()))
    # rule 3: where the preference flips dp -> tp
    boundary_ops: dict[str, str] = {}
    last_dp = None
    for name in order:
        p = prefs[name]
        if p == "dp":
            last_dp = name
        elif last_dp is not None and mesh.get("tp") > 1 and (p == "tp" or (p == "" and name == order[-1])):
            # a last weight op that is not clearly data-parallel (a classifier head whose parameters
            # about equal its activations) after a data-parallel body is a boundary candidate too:
            # minimality drops the cut where it does not pay
            # the dp side sits at the cut in front of the tp op: the producer of its activation. Under
            # MindSpore's seed order the tp op's search runs first and would flood the whole body
            # backward; a configured op at the cut stops it there, and the dataset gives the body dp
            cut = _cut_before(graph, name)
            if cut is not None:
                boundary_ops[cut] = "dp"
            boundary_ops[name] = "tp"
            last_dp = None
    own = _model_own(graph)
    for op in graph:
        if op.name in own:          # configured by the model itself in every parallel build: never advice
            continue
        rule = cached_rule(op)
        choice = None
        if op.name in boundary_ops:
            if boundary_ops[op.name] == "dp":
                tname = ("conv_data_parallel" if op.type.startswith("Conv") else
                         "matmul_data_parallel" if op.type.startswith(("MatMul", "BatchMatMul")) else "data_parallel")
                tmpl = t.get(tname, {})
                why = (f"parallelism boundary: data parallel up to here, the cut in front of "
                       f"{next(k for k, v in boundary_ops.items() if v == 'tp')}, so the model-parallel side's "
                       f"propagation stops here")
            else:
                tname = ("matmul_column" if op.type.startswith(("MatMul", "BatchMatMul")) else
                         "conv_column" if op.type.startswith("Conv") else "embedding_vocab_parallel")
                tmpl = t.get(tname, {})
                why = "parallelism boundary: parameters outweigh activations from here on (model parallel)"
            choice = ("3 boundary", tname, tmpl, why)
        elif op.cell_class in cats.get("moe_router", ()) and op.type not in ("Reshape", "Flatten", "Cast") \
                and not _weight_params(graph, op) and "moe_router" in t:
            tmpl = _token_template(op, rule, t["moe_router"].get("tokens", ()))
            if tmpl is not None:
                choice = ("4 fused", "moe_router", tmpl,
                          "MoE router: its tokens over every device (each device scores, picks and counts only "
                          "its own tokens), as its gating input arrives; left to propagation it repeats the whole "
                          "batch's routing on every device")
        elif op.type in cats.get("fused", ()):
            if op.type == "FlashAttentionScore":
                choice = ("4 fused", "flash_attention", t.get("flash_attention", {}),
                          "fused attention: heads by tp, batch by dp, query sequence by cp")
            elif op.type in cats.get("norm", ()):
                rank = len(op.inputs[0].spec.shape) if op.inputs and op.inputs[0].spec else 0
                name = "norm" if rank >= 3 else "norm_2d"
                why = "fused norm: tokens by dp (and cp), hidden unsplit"
                if rank >= 3 and _sequence_first(graph) and "norm_sequence_first" in t:
                    name = "norm_sequence_first"      # MindFormers' [S, B, H]: batch by dp, sequence by cp
                    if rank >= 4 and "norm_heads_sequence_first" in t:
                        name = "norm_heads_sequence_first"     # q/k norms on [S, B, N, D]: heads by tp
                    elif graph.sequence_parallel and "norm_sequence_parallel" in t \
                            and mesh.get("tp") > 1:
                        # the config asks for sequence parallelism: S by cp and tp between the tp blocks
                        name = "norm_sequence_parallel"
                        why = "fused norm, sequence parallel (the config's use_seq_parallel): sequence by tp (and cp), batch by dp"
                tmpl = t.get(name, {})
                if rank == 3 and not _sequence_first(graph) and sp:
                    # a legacy model's batch-first [B, S, H] under the config's sequence parallelism
                    name, tmpl = "norm_sequence_parallel", sp_norm
                    why = ("fused norm, sequence parallel (the config's use_seq_parallel): as the row linears' "
                           "reduce-scattered rows [B*S] arrive, B by " + ", ".join(tmpl["d0"]) +
                           (", S by " + ", ".join(tmpl["d1"]) if tmpl["d1"] else ""))
                choice = ("4 fused", name, tmpl, why)
            elif op.type == "MorphFFN":
                choice = ("4 fused", "moe_ffn", t.get("moe_ffn", {}),
                          "MoE dispatcher + experts (MindFormers' Morph): each device permutes and computes its own "
                          "tokens; left to propagation they arrive in whatever layout the router had")
            elif op.type == "GroupedMatmul":
                choice = ("4 fused", "grouped_matmul", t.get("grouped_matmul", {}),
                          "MoE experts' GroupedMatmul: tokens over every device (MindSpore never splits its expert "
                          "dimension), each device computing only its own tokens")
            else:
                choice = ("4 fused", "moe", t.get("moe", {}), "MoE dispatch/combine: experts by ep")
        elif op.type in cats.get("weight", ()) and _weight_params(graph, op) and prefs.get(op.name) == "dp" \
                and op.type in WEIGHT_MATMULS and mesh.get("tp") > 1:
            oshape = op.outputs[0].shape if op.outputs and op.outputs[0] is not None else ()
            vocab = oshape[-1] if oshape else 0
            if op.name in attention:
                # an attention projection: Megatron's head-parallel pair whatever its weight's size, so that
                # FlashAttention runs on each device's own heads
                role = roles[op.name]
                choice = ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                          "attention projection, Megatron " + ("column-parallel: heads by tp" if role == "column"
                                                               else "row-parallel: heads contracted by tp"))
            elif vocab >= rules.thresholds.get("large_vocab", 16384) and op.name in roles \
                    and (not vocabularies or vocab in vocabularies):
                # a language-model head: its logits dwarf its weight, but a replicated vocabulary would
                # gather them whole for the loss; vocabulary-parallel keeps them split
                choice = ("1 weight", "matmul_column", t.get("matmul_column", {}),
                          f"language-model head ({vocab} vocabulary rows): vocabulary by tp, the logits stay split")
            else:
                # activations outweigh the weight: data parallel over every device. Left to propagation
                # (a full-batch dataset seeds nothing), the tp devices would repeat each other's work
                tname = _data_parallel_template(graph, op, t)
                choice = ("1 weight", tname, t.get(tname, {}),
                          "activations outweigh the weight: data parallel over every device")
        elif op.type in cats.get("weight", ()) and _weight_params(graph, op) and prefs.get(op.name) != "dp":
            slot = next(iter(_weight_params(graph, op)))
            if op.type == "Embedding" and slot == 1:
                vocab = op.inputs[1].spec.shape[0]
                if vocab >= rules.thresholds.get("large_vocab", 16384):
                    choice = ("1 weight", "embedding_table_vocab_parallel", t.get("embedding_table_vocab_parallel", {}),
                              f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
            elif op.type in ("Gather", "GatherV2") and slot == 0:
                vocab = op.inputs[0].spec.shape[0]
                if vocab >= rules.thresholds.get("large_vocab", 16384):
                    choice = ("1 weight", "embedding_vocab_parallel", t.get("embedding_vocab_parallel", {}),
                              f"embedding with a large vocabulary ({vocab} rows): vocabulary split by tp")
                else:
                    choice = ("1 weight", "embedding_data_parallel", t.get("embedding_data_parallel", {}),
                              f"embedding with a small vocabulary ({vocab} rows): data parallel")
            elif op.name in roles:
                wspec = op.inputs[slot].spec
                if len(wspec.shape) >= 3 and op.type.startswith("BatchMatMul"):
                    choice = ("1 weight", "experts", t.get("experts", {}), "expert weights: experts by ep")
                else:
                    role = roles[op.name]
                    choice = ("1 weight", f"matmul_{role}", t.get(f"matmul_{role}", {}),
                              "Megatron " + ("column-parallel: output features by tp" if role == "column"
                                             else "row-parallel: contracted features by tp, after a column MatMul"))
        if choice is None:
            continue
        rule_name, tname, tmpl, why = choice
        if _splits_nothing_model_parallel(tmpl, mesh):
            continue
        s = template_sharding(op, rule, tmpl, mesh)
        on = mesh
        if tname == "flash_attention":
            gqa = _grouped_query_attention(op, rule, tmpl, mesh, s)
            if gqa is not None:
                s, on = gqa
                why += (f"; grouped-query attention ({rule.layout_rule.factor_size('n2')} key/value heads): the "
                        f"query heads by tp, the key/value heads by the part of tp that divides them (a Layout "
                        f"splitting tp in two)")
        if s is None:
            continue
        declared = rule_name == "3 boundary" and any(
            op.cell_path == p or op.cell_path.startswith(p + ".") for p in (boundaries or {}))
        anchor = anchor_of(op.name, s, on, op.type)
        if tname == "matmul_row" and sp:
            # sequence parallelism: the row-parallel output reduce-scattered over the sequence (Megatron-SP),
            # its rows [S*B] split by S's axes (cp, tp), then B's (dp, ep), as the norms after it take them
            anchor = _reduce_scatter_rows(anchor, mesh, _sequence_first(graph))
            tname, why = "matmul_row_sequence_parallel", why + "; output reduce-scattered over the sequence (sequence parallel)"
        choice_ = Choice(op.name, rule_name, tname, why, anchor, declared=declared)
        if tname in ("matmul_column", "matmul_row", "matmul_row_sequence_parallel") and prefs.get(op.name) == "" \
                and op.name not in attention \
                and op.type in WEIGHT_MATMULS and not (op.outputs and op.outputs[0] is not None
                                                       and op.outputs[0].shape[-1] in vocabularies):
            # neither its weight nor its activations clearly outweigh the other: data parallel over every
            # device is the alternative the step model weighs against the Megatron layout (MTP's eh_proj)
            choice_.alternative = _data_parallel_choice(graph, op, rule, t, mesh)
        if tname == "matmul_row_sequence_parallel" and choice_.alternative is not None \
                and sp_norm:
            # data parallel under sequence parallelism: the rows stay as the sequence-parallel norm split them
            # (S by cp and tp, B by dp), and so do the element-wise operators between the pair's linears (the
            # row linear's Reshape stops every search that would carry them the layout)
            choice_.alternative.package = _pair_interior(graph, op, mesh, sp_norm,
                                                         choice_.alternative.op)
        if tname == "matmul_row_sequence_parallel":
            # without sequence parallelism: the plain row-parallel pair (its output all-reduced)
            choice_.fallback = Choice(op.name, rule_name, "matmul_row", why.split("; output reduce-scattered")[0],
                                      anchor_of(op.name, s, mesh, op.type))
        elif tname == "norm_sequence_parallel" and plain_norm:
            fs = template_sharding(op, rule, plain_norm, mesh)
            if fs is not None:
                choice_.fallback = Choice(op.name, rule_name, "norm_sequence_first" if _sequence_first(graph)
                                          else "norm", "fused norm: tokens by dp "
                                          "(and cp), hidden unsplit (sequence parallelism does not pay here)",
                                          anchor_of(op.name, fs, mesh, op.type))
        if tname == "moe_ffn":
            # MindFormers' code fixes this Morph's layout (FFNGroupedGEMM.shard: tokens over dp_cp, every device of
            # the MoE layout): a plan whose propagation gives it another one is not the model that runs
            choice_.declared = True
        if tname == "moe_router":
            # one package per router: a split router pays only whole (each of its operators alone pays the
            # gather or split at its edges and is dropped, leaving the whole batch's routing on every device)
            choice_.with_op = router_head.setdefault(op.cell_path, op.name)
        if tname in ("norm_sequence_parallel", "matmul_row_sequence_parallel"):
            # one package: a sequence-parallel norm pays only where every row-parallel output is
            # reduce-scattered to it and every column-parallel input gathered from it. The config asks for it
            # (use_seq_parallel, for activation memory the step model does not weigh): kept like a declared
            # boundary, with what it costs or saves in the notes
            sp_head = sp_head or op.name
            choice_.with_op = sp_head
            choice_.declared = True
            if tname == "norm_sequence_parallel":
                # the residual stream between the tensor-parallel blocks is sequence parallel too: the residual
                # add feeding this norm (through Casts) takes its layout; left to propagation it keeps whole
                # sequences and every norm would re-split them
                res = _cut_before(graph, op.name)
                r = graph.op(res) if res is not None else None
                if r is not None and r.type in ("Add", "AddExt") and r.outputs and r.outputs[0] is not None \
                        and tuple(r.outputs[0].shape) == tuple(op.inputs[0].spec.shape):
                    rs = template_sharding(r, cached_rule(r), tmpl, mesh)
                    if rs is not None:
                        out.append(Choice(r.name, "4 fused", "residual_sequence_parallel",
                                          f"residual add into the sequence-parallel {op.name}: the residual stream "
                                          f"is sequence parallel between the tensor-parallel blocks",
                                          anchor_of(r.name, rs, mesh, r.type), with_op=sp_head, declared=True))
        out.append(choice_)
        if tname == "flash_attention" and on is not mesh:
            out.extend(_split_interiors(graph, op, roles, plain_norm, mesh))
        if tname == "moe_ffn":
            comp = _moe_permute_companion(graph, op, t.get("moe_ffn", {}), mesh)
            if comp is not None:
                out.append(comp)
        if tname == "embedding_table_vocab_parallel":
            comp = _embedding_companion(graph, op, rules, mesh, sp)
            if comp is not None:
                out.append(comp)
    seq = max((op.inputs[0].spec.shape[1] for op in graph if op.type == "FlashAttentionScore"
               and op.inputs[0].spec is not None and len(op.inputs[0].spec.shape) >= 3), default=0)
    if seq >= rules.thresholds.get("long_sequence", 32768) and mesh.get("cp") == 1:
        notes.append(f"long sequence ({seq}): a cp axis (--mesh ...,cp=N) would split it (rule 3)")
    out += _unconfigurable(graph, mesh, rules, {c.op for c in out} | own)
    return _one_layout_per_shared_parameter(graph, mesh, out, notes), notes


def _unconfigurable(graph: OpGraph, mesh: Mesh, rules: Rules, taken: set[str]) -> list[Choice]:
    """Rule 4: the operators MindSpore cannot leave to propagation (it generates no strategy for them,
    :func:`strategist.engine.search.structure.no_generated_strategy`) are always configured: ApplyRotaryPosEmb by its template
    (batch by dp, heads by tp), a weighted CrossEntropyLoss data parallel; all-ones where the template splits
    nothing. Kept whatever they cost (without them MindSpore's compile fails)."""
    from ..engine.ops import shard
    from ..engine.search.structure import no_generated_strategy
    out = []
    for op in graph:
        why = no_generated_strategy(op) if op.name not in taken else None
        if not why:
            continue
        tname = "rotary" if op.type == "ApplyRotaryPosEmb" else "loss_data_parallel"
        rule = cached_rule(op)
        s = template_sharding(op, rule, rules.templates.get(tname, {}), mesh)
        if s is None:
            s = shard(op, tuple((1,) * len(r) for r in rule.strategy_rows), mesh.size, rule=rule)
        out.append(Choice(op.name, "4 fused", tname, f"MindSpore generates no strategy for an unconfigured {op.type} "
                          f"({why}): it must be configured", anchor_of(op.name, s, mesh, op.type), declared=True,
                          required=True))
    return out


def _one_layout_per_shared_parameter(graph: OpGraph, mesh: Mesh, out: list[Choice], notes: list[str]) -> list[Choice]:
    """Drop a proposal that would configure a Parameter another proposal (an earlier one) configures differently:
    MindSpore refuses such a configuration ("Incorrect strategy configuration ... shared parameter"), and the
    dropped operator takes the kept layout through the parameter's TmpIdentity anyway (random net 37: an
    embedding table that a MatMul reads as its weight; the embedding's data-parallel table and the MatMul's
    column split)."""
    from ..engine.ops import shard_anchor
    from ..engine.search.layout_eq import same_placement
    from ..engine.search.structure import shared_param_users
    from ..errors import StrategyError
    shared = {p for p, us in shared_param_users(graph).items() if len(us) > 1}
    if not shared:
        return out
    seen: dict[str, tuple[str, object]] = {}
    keep = []
    for c in out:
        op = graph.op(c.op)
        rule = cached_rule(op)
        try:
            s = shard_anchor(op, c.anchor, mesh.size, rule)
        except StrategyError:
            keep.append(c)
            continue
        mine = {}
        for slot, x in enumerate(op.inputs):
            if x.kind == "param" and x.ref in shared and slot in rule.slots:
                mine[x.ref] = s.inputs[rule.slots.index(slot)]
        clash = next(((p, seen[p][0]) for p, lay in mine.items() if p in seen and not same_placement(seen[p][1], lay)), None)
        if clash:
            notes.append(f"{c.op}: not configured ({c.template}): it would shard the parameter {clash[0]} unlike "
                         f"{clash[1]}, which MindSpore refuses; it takes {clash[1]}'s layout of it")
            continue
        for p, lay in mine.items():
            seen.setdefault(p, (c.op, lay))
        keep.append(c)
    return keep
