"""``strategist`` command line: a thin shell over the library API.

Every user mistake ends as one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys

from .errors import StrategistError


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (the usage itself is in --help)."""

    def error(self, message):
        self.exit(2, f"strategist: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="strategist",
        description="Sharding-propagation strategy advisor for MindSpore.")
    sub = p.add_subparsers(dest="command", required=True)

    def model_args(sp):
        sp.add_argument("model", help="path/to/model.py:NAME (a Cell class or a factory function)")
        sp.add_argument("--input", action="append", metavar="NAME:DTYPE[d0,...]",
                        help="a construct() input, e.g. ids:int32[2,4096]; repeat per input "
                             "(default: the model's example_inputs)")
        sp.add_argument("--kwargs", nargs="*", action="extend", metavar="KEY=VALUE",
                        help="arguments for the Cell class or factory, e.g. layers=2")
        # MindFormers configs (MODEL = mindformers:<config.yaml> or a YAML path); passed on as --kwargs
        sp.add_argument("--layers", type=int, help="MindFormers: number of layers (num_hidden_layers)")
        sp.add_argument("--seq", type=int, help="MindFormers: sequence length (seq_length)")
        sp.add_argument("--batch", type=int, help="MindFormers: global batch size of the graph")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="MindFormers: any config key, dotted from the YAML root or a model_config key, "
                             "e.g. --set hidden_size=256; repeatable")
        which = sp.add_mutually_exclusive_group()
        which.add_argument("--train", dest="eval", action="store_false", default=False,
                           help="propagate as MindSpore compiles the Cell for training (set_train(True), as "
                                "Model.train or a TrainOneStepCell does: no VirtualOutput, operators created "
                                "from the inputs forward); the default")
        which.add_argument("--eval", dest="eval", action="store_true", default=False,
                           help="propagate as MindSpore compiles the Cell as built, not set to training (an "
                                "inference compile: a VirtualOutput, operators created from the output back), "
                                "which can give another plan; MindFormers configs always compile for training")

    sp = sub.add_parser("inspect", help="walk the model's graph: ops by type, parameters, cell tree")
    model_args(sp)
    sp.add_argument("--json", action="store_true", help="print the full graph as JSON")
    sp.add_argument("--depth", type=int, default=3, help="cell tree depth to print (default 3)")

    def plan_args(sp, anchors=True):
        model_args(sp)
        sp.add_argument("--mesh", required=True, help="device mesh, e.g. dp=2,tp=4 (outer axis first)")
        if anchors:
            sp.add_argument("--strategies", metavar="ANCHORS.yaml", help="operators to configure (see README)")
            sp.add_argument("--no-model-strategies", action="store_true",
                            help="ignore the model's own shard() calls")
        sp.add_argument("--hardware", default="atlas-800t-a2",
                        help="hardware profile name under rules/hardware/ or a YAML path (default atlas-800t-a2)")
        step_model_args(sp)
        sp.add_argument("--dataset-strategy", default=None, metavar="data_parallel|full_batch|x=8,1;...",
                        help="how the inputs are split, as MindSpore's dataset_strategy: the batch over all devices "
                             "(data_parallel, the default; full_batch for MindFormers configs), not at all "
                             "(full_batch), or per-input splits using every device")

    sp = sub.add_parser("propagate", help="propagate strategies from the anchors and report the redistribution cost")
    plan_args(sp)
    sp.add_argument("--semi-auto", action="store_true",
                    help="no propagation: the plan MindSpore's semi_auto_parallel runs with these strategies (every other "
                         "operator takes its batch strategy; an unconfigured Cast passes its input's layout on)")
    sp.add_argument("--format", default="table", choices=["table", "json", "md"])
    sp.add_argument("--max-rows", type=int, default=60, help="operator rows in the table (0 = all)")
    sp = sub.add_parser("advise", help="choose the operators to configure, propagate, and report the cost "
                                       "(the model's own shard() calls are compared, not used)")
    plan_args(sp, anchors=False)
    sp.add_argument("--rules", action="append", metavar="RULES.yaml", help="extra rules merged over rules/default.yaml")
    sp.add_argument("--boundary", action="append", default=[], metavar="CELL.PATH=tp|dp",
                    help="declare a parallelism boundary: weight ops under CELL.PATH prefer tp (or dp)")
    sp.add_argument("--format", default="table", choices=["table", "json", "md"])
    sp.add_argument("--max-rows", type=int, default=40, help="operator rows in the plan table (0 = all)")
    sp.add_argument("--diff", action="store_true", help="print the shard() diff of the model's sources (instead of the report)")
    sp.add_argument("--diff-out", metavar="FILE", help="write that diff to FILE (paths relative to each repository root)")
    sp.add_argument("--apply", action="store_true", help="write the advice into the model's sources in place (backups kept)")
    sp.add_argument("--prune", action="store_true", help="also remove the model's shard() calls the advice makes redundant")
    sp.add_argument("--target", choices=["sharding_propagation", "shard"], default=None,
                    help="MindFormers classes: the method the strategies go into (default sharding_propagation)")
    sp.add_argument("--emit-strategy-file", metavar="FILE.json",
                    help="write the advised plan as MindSpore's operator-strategy file (no source edit)")
    sp = sub.add_parser("explain", help="why an operator got its strategy: provenance chain and candidates")
    plan_args(sp)
    sp.add_argument("--op", required=True, help="operator name, e.g. layers.0.mlp.linear_fc2.matmul")
    sp = sub.add_parser("verify", help="run MindSpore's own sharding propagation (a child process, CPU only is "
                                       "fine) and compare it with strategist's plan, operator by operator")
    model_args(sp)
    sp.add_argument("--mesh", required=True, help="device mesh, e.g. dp=2,tp=4 (outer axis first)")
    sp.add_argument("--strategies", metavar="ANCHORS.yaml", help="operators to configure, on both sides (see README)")
    sp.add_argument("--dataset-strategy", default=None, metavar="data_parallel|full_batch|x=8,1;...",
                    help="MindSpore's dataset_strategy, used on both sides (default data_parallel; full_batch for "
                         "MindFormers configs)")
    sp.add_argument("--fully-use-devices", action="store_true", help="MindSpore's algo parameter (default off)")
    sp.add_argument("--elementwise-op-strategy-follow", action="store_true",
                    help="MindSpore's algo parameter (default off)")
    sp.add_argument("--semi-auto", action="store_true",
                    help="compare in semi_auto_parallel instead: strategist's semi_auto plan beside MindSpore compiled so")
    sp.add_argument("--redistributions", action="store_true",
                    help="also compare which edges move data: strategist's priced redistributions beside those "
                         "MindSpore inserts in its parallel graph")
    sp.add_argument("--communication", action="store_true",
                    help="also compare every collective of one training step (forward, backward, the weights' "
                         "gradient mirrors): strategist's priced plan beside MindSpore's graph after autodiff")
    sp.add_argument("--timeout", type=float, default=900, help="seconds MindSpore may take (default 900)")
    sp.add_argument("--format", default="table", choices=["table", "json"])
    sp.add_argument("--max-rows", type=int, default=0, help="operator rows in the table, disagreements first (0 = all)")
    sp = sub.add_parser("compare", help="MindFormers models: the advice beside the experts' sharding_propagation() "
                                        "anchors and their full shard() strategies (the reference)")
    plan_args(sp, anchors=False)
    sp.set_defaults(dataset_strategy="full_batch")
    sp.add_argument("--verify", action="store_true", help="also run MindSpore's own propagation of the experts' "
                                                          "anchors (a child process)")
    sp.add_argument("--format", default="table", choices=["table", "json"])
    sp.add_argument("--max-rows", type=int, default=20, help="disagreement rows per column (0 = all)")
    sp = sub.add_parser("sweep", help="which mesh and memory options for N devices: every dp x tp x cp x ep x pp "
                                      "the model allows, advised and ranked by the step model")
    model_args(sp)
    sp.add_argument("--devices", type=int, required=True, metavar="N", help="the number of devices (cards)")
    sp.add_argument("--axes", default="dp,tp,cp,ep,pp", metavar="AXIS,...",
                    help="the mesh axes to factorise N over (default dp,tp,cp,ep,pp)")
    sp.add_argument("--max-tp", type=int, metavar="N", help="largest tp tried")
    sp.add_argument("--max-pp", type=int, metavar="N", help="largest pp tried")
    sp.add_argument("--micro-batches", type=int, action="append", metavar="M",
                    help="micro-batch counts tried with pp (repeatable; default pp, 2 pp and 4 pp where they split "
                         "the batch)")
    sp.add_argument("--hardware", default="atlas-800t-a2",
                    help="hardware profile name under rules/hardware/ or a YAML path (default atlas-800t-a2)")
    sp.add_argument("--dataset-strategy", default=None, metavar="data_parallel|full_batch|x=8,1;...",
                    help="how the inputs are split, as MindSpore's dataset_strategy (default data_parallel)")
    sp.add_argument("--workers", type=int, metavar="N", help="processes advising in parallel (default: every core)")
    sp.add_argument("--format", default="table", choices=["table", "json", "md"])
    sp.add_argument("--max-rows", type=int, default=20, help="rows per table (0 = all)")
    return p


# -- the step model's options: pipeline stages (pp= in --mesh), micro-batches, recompute, parallel optimizer ------


def step_model_args(sp) -> None:
    g = sp.add_argument_group("step model (a pp=N axis in --mesh: pipeline stages, MindSpore pipeline_stages)")
    g.add_argument("--micro-batches", type=int, default=1, metavar="M",
                   help="micro-batches a step's batch is split into: the pipeline's (micro_batch_num), or gradient "
                        "accumulation without pp (default 1)")
    g.add_argument("--recompute", default="none", metavar="none|selective|full",
                   help="recomputation: none, selective (MindFormers' select_recompute: the MLP activation and its "
                        "product) or full (every layer)")
    g.add_argument("--optimizer-parallel", action="store_true", default=None,
                   help="MindSpore's enable_parallel_optimizer: weights and optimizer states sharded over their "
                        "replicas (default: as the model's config says)")
    g.add_argument("--interleave", type=int, default=1, metavar="K",
                   help="fine-grained multi-copy (MindFormers fine_grain_interleave, interleaved_parallel): 1, 2, 4, 8")
    g.add_argument("--pp-interleave", type=int, default=1, metavar="V",
                   help="model chunks per pipeline stage (interleaved 1F1B: MindSpore pipeline_interleave, "
                        "MindFormers pp_interleave_num; default 1)")
    g.add_argument("--step-set", action="append", default=[], metavar="FIGURE=VALUE",
                   help="override a hardware figure of the step model, e.g. matmul_tflops=300, "
                        "intra_bus_GBps.AllReduce.8=80")
    g.add_argument("--choose-by-schedule", action="store_true",
                   help="the advisor's choices by the scheduled step rather than the serial sum")


def step_model_options(args):
    """(the mesh without its pp axis, :class:`~strategist.cost.step.StepOptions`) of the parsed arguments."""
    from .cost.profile import parse_overrides
    from .cost.step import StepOptions
    from .engine.mesh import Mesh
    mesh = Mesh.parse(args.mesh)
    pp = mesh.get("pp")
    rest = ",".join(f"{n}={v}" for n, v in mesh.axes if n != "pp") or "dp=1"
    over = parse_overrides(args.step_set)
    opts = StepOptions(pp=pp, micro_batches=args.micro_batches, recompute=args.recompute,
                       optimizer_parallel=args.optimizer_parallel, interleave=args.interleave,
                       pp_interleave=args.pp_interleave,
                       overrides=tuple(sorted(over.items(), key=lambda kv: kv[0])) if over else (),
                       choose_by_schedule=args.choose_by_schedule)
    return rest, opts.check()


def _say(lines) -> None:
    for line in lines:
        print(f"strategist: {line}", file=sys.stderr)


def _fold_model_options(args) -> None:
    """``--layers/--seq/--batch/--set`` (MindFormers configs) travel as ``--kwargs`` entries."""
    extra = [f"{k}={getattr(args, k)}" for k in ("layers", "seq", "batch") if getattr(args, k, None) is not None]
    extra += list(getattr(args, "set", None) or [])
    if extra:
        args.kwargs = list(args.kwargs or []) + extra


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``strategist`` console script: Ctrl-C at any moment exits 130 with
    ``strategist: interrupted``; a closed or full stdout ends quietly, non-zero (strategist.progress)."""
    sys.dont_write_bytecode = True      # no __pycache__ beside the user's model or its own imports
    from .progress import run_guarded
    return run_guarded(_main, argv)


def _main(argv: list[str] | None = None) -> int:
    parser = _parser()
    # argparse's own errors already print one usage line and exit 2.
    args = parser.parse_args(argv)
    if getattr(args, "max_rows", 0) < 0 or getattr(args, "depth", 0) < 0:
        parser.error(f"--{'max-rows' if getattr(args, 'max_rows', 0) < 0 else 'depth'} must be >= 0 (0 = all)")
    if not 0 < getattr(args, "timeout", 1) < float("inf"):
        parser.error(f"--timeout {args.timeout}: give a positive number of seconds")
    _fold_model_options(args)
    os.environ.setdefault("GLOG_v", "4")  # MindSpore's C++ log: only critical; we report errors ourselves
    try:
        from .api import mindformers_defaults, parse_dataset_strategy
        if hasattr(args, "dataset_strategy") and getattr(args, "model", None):
            args.kwargs, args.dataset_strategy, said = mindformers_defaults(
                args.model, getattr(args, "mesh", None), args.kwargs, args.dataset_strategy)
        else:
            said = []
        if args.command == "inspect":
            from .frontend.loader import load_graph
            from .report.render import inspect_text
            graph = load_graph(args.model, args.input, args.kwargs, training=not args.eval)
            sys.stdout.write(graph.to_json() + "\n" if args.json else inspect_text(graph, args.depth))
        elif args.command == "advise":
            import json
            from .api import advise_model
            from .report.render import advice_dict, advice_text
            mesh, step = step_model_options(args)
            advice = advise_model(args.model, mesh, inputs=args.input, kwargs=args.kwargs, rules=args.rules,
                                  boundaries=args.boundary, hardware=args.hardware,
                                  dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                  training=not args.eval, step=step)
            from .progress import mark
            mark("writing the report")
            from .source import advise_outputs
            if advise_outputs(advice, diff=args.diff, diff_out=args.diff_out, apply=args.apply, prune=args.prune,
                              target=args.target, emit_strategy_file=args.emit_strategy_file):
                pass
            elif args.format == "json":
                sys.stdout.write(json.dumps(advice_dict(advice), indent=1, sort_keys=True) + "\n")
            else:
                sys.stdout.write(advice_text(advice, markdown=args.format == "md", max_rows=args.max_rows))
        elif args.command in ("propagate", "explain"):
            import json
            from .api import find_op, mindformers_anchors_note, plan_model
            from .report.render import explain_text, plan_dict, plan_text
            mesh, step = step_model_options(args)
            plan = plan_model(args.model, mesh, inputs=args.input, kwargs=args.kwargs,
                              strategies=args.strategies, hardware=args.hardware,
                              use_model_strategies=not args.no_model_strategies,
                              dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                              semi_auto=getattr(args, "semi_auto", False), training=not args.eval, step=step)
            note = mindformers_anchors_note(plan)
            said = list(said) + ([note] if note else [])
            if args.command == "explain":
                sys.stdout.write(explain_text(plan, find_op(plan, args.op)))
            elif args.format == "json":
                sys.stdout.write(json.dumps(plan_dict(plan), indent=1, sort_keys=True) + "\n")
            else:
                sys.stdout.write(plan_text(plan, markdown=args.format == "md", max_rows=args.max_rows))
        elif args.command == "sweep":
            import json
            from .report.sweep import sweep_text
            from .sweep import sweep_model
            if args.devices < 1 or (args.workers is not None and args.workers < 1):
                parser.error("--devices and --workers must be >= 1")
            result = sweep_model(args.model, args.devices, inputs=args.input, kwargs=args.kwargs,
                                 training=not args.eval, hardware=args.hardware,
                                 axes=tuple(a.strip() for a in args.axes.split(",") if a.strip()),
                                 max_tp=args.max_tp, max_pp=args.max_pp,
                                 micro_batches=tuple(args.micro_batches) if args.micro_batches else None,
                                 dataset_strategy=parse_dataset_strategy(args.dataset_strategy) or "data_parallel",
                                 workers=args.workers)
            if args.format == "json":
                sys.stdout.write(json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
            else:
                sys.stdout.write(sweep_text(result, markdown=args.format == "md", max_rows=args.max_rows))
        elif args.command == "verify":
            from .verify import verify_model
            result = verify_model(args.model, args.mesh, inputs=args.input, kwargs=args.kwargs,
                                  strategies=args.strategies, timeout=args.timeout,
                                  dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                  fully_use_devices=args.fully_use_devices,
                                  elementwise_op_strategy_follow=args.elementwise_op_strategy_follow,
                                  semi_auto=args.semi_auto, redistributions=args.redistributions,
                                  communication=args.communication, training=not args.eval)
            sys.stdout.write(result.to_json() + "\n" if args.format == "json" else result.text(args.max_rows))
            _say(list(said) + [result.timings()])
            return 0 if result.all_agree else 1
        elif args.command == "compare":
            from .advice.compare import compare_model
            from .frontend.mindformers import split_model_options
            cmp = compare_model(args.model, args.mesh, hardware=args.hardware, verify=args.verify,
                                dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                **split_model_options(args.kwargs))
            sys.stdout.write(cmp.to_json(args.max_rows) + "\n" if args.format == "json" else cmp.text(args.max_rows))
            said = list(said) + [cmp.timings()]
        _say(said)          # after the work: a refusal stays one line
        return 0
    except StrategistError as err:
        print(f"strategist: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("strategist: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
