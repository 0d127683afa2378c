"""``strategist`` command line: a thin shell over the library API.

One grammar for every command: a model, then option groups (model, MindFormers, mesh and hardware,
anchors and search, source edits, output). Every command takes ``--format table|json|md`` (``html`` too: advise,
propagate, compare, sweep; ``--json`` is ``--format json``), ``--out FILE`` and, where it prints tables,
``--max-rows``; advise and propagate take ``--trace FILE`` (the step's schedule as a Chrome trace).
Every user mistake ends as one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys

from .errors import InputSpecError, StrategistError

FORMATS = ("table", "json", "md", "html")
HTML_COMMANDS = ("advise", "propagate", "compare", "sweep")     # the commands --format html draws
MAX_ROWS = 40           # one default for every command's tables
DOCS = "docs/reference/cli.md"
EPILOG = """examples:
  strategist inspect examples/llama.py:tiny
  strategist advise examples/llama.py:llama2_70b --kwargs layers=2 batch=8 --mesh dp=8,tp=8 --dataset-strategy full_batch
  strategist propagate examples/mlp.py:MegatronMLP --mesh dp=2,tp=4 --anchors anchors.yaml --format md --out plan.md
  strategist verify examples/sharding_techniques.py:DocsFFN --mesh dp=2,tp=4

exit codes: 0 done; 1 verify found a disagreement; 2 bad input or a configuration MindSpore refuses
(one line on stderr); 130 interrupted. Reference: docs/reference/cli.md"""


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (the usage itself is in --help)."""

    def error(self, message):
        self.exit(2, f"strategist: error: {message} (see {self.prog} --help)\n")


def _installed(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    """strategist's version and the versions of the MindSpore, MindFormers and mindone installed beside it
    (read from the package metadata: nothing is imported)."""
    from . import __version__
    return (f"strategist {__version__} (MindSpore {_installed('mindspore')}, MindFormers {_installed('mindformers')}, "
            f"mindone {_installed('mindone')}, Python {platform.python_version()})")


def _hardware_profiles() -> list[str]:
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rules", "hardware")
    try:
        return sorted(f[:-5] for f in os.listdir(here) if f.endswith(".yaml"))
    except OSError:
        return []


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="strategist",
        description="Sharding-propagation strategy advisor for MindSpore: which few operators to configure "
                    "with shard(), with what strategies, and what the plan costs.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=version_text(),
                   help="print strategist's, MindSpore's, MindFormers' and mindone's versions and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")

    def command(name, help, description=None):
        return sub.add_parser(name, help=help, description=description or help,
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=f"Reference: {DOCS}#strategist-{name}")

    _inspect_command(command)
    _plan_commands(command)
    _check_commands(command)
    _sweep_command(command)
    return p


def model_args(sp, mindformers_only=False):
    g = sp.add_argument_group("model")
    g.add_argument("model", help="path/to/model.py:NAME (a Cell class or a factory function), "
                                 "mindformers:<config.yaml> or a MindFormers YAML path, or "
                                 "mindone:<model_type|ClassName> (a mindone.transformers model)")
    if not mindformers_only:
        g.add_argument("--input", action="append", metavar="NAME:DTYPE[d0,...]",
                       help="a construct() input, e.g. ids:int32[2,4096]; repeat per input "
                            "(default: the model's example_inputs)")
        g.add_argument("--kwargs", action="append", metavar="KEY=VALUE",
                       help="arguments for the Cell class or factory, e.g. --kwargs layers=2 batch=8; "
                            "takes KEY=VALUE words only, so the model may follow")
        which = g.add_mutually_exclusive_group()
        which.add_argument("--train", dest="eval", action="store_false", default=False,
                           help="compile the Cell for training (set_train(True)), as a training run does; "
                                "the default")
        which.add_argument("--eval", dest="eval", action="store_true", default=False,
                           help="compile the Cell as built (an inference compile), which can give another "
                                "plan; MindFormers configs always compile for training")
    else:
        sp.set_defaults(input=None, kwargs=None, eval=False)
    g = sp.add_argument_group("MindFormers", "for a MindFormers config (MODEL = mindformers:<config.yaml>) or a "
                                             "mindone model (MODEL = mindone:<model_type>)")
    g.add_argument("--layers", type=int, metavar="N", help="number of layers (num_hidden_layers)")
    g.add_argument("--seq", type=int, metavar="N", help="sequence length (seq_length)")
    g.add_argument("--batch", type=int, metavar="N", help="global batch size of the graph "
                                              "(default: the config's batch_size times the mesh's dp)")
    g.add_argument("--set", "--config-set", dest="set", action="append", default=[], metavar="KEY=VALUE",
                   help="any config key, dotted from the YAML root or a model_config key (a mindone model: a "
                        "key of its transformers config), e.g. --set hidden_size=256; repeatable")


def sequence_parallel_arg(g) -> None:
    g.add_argument("--sequence-parallel", action="store_true", default=None,
                   help="sequence parallelism (Megatron's; MindFormers' use_seq_parallel): the norms and residual "
                        "adds between the tp blocks split along the sequence by tp, the tp AllReduces become "
                        "AllGather + ReduceScatter (a MindFormers config: parallel_config.use_seq_parallel)")


def mesh_args(sp, hardware=True, dataset_default="data_parallel; full_batch for MindFormers configs"):
    g = sp.add_argument_group("mesh and hardware")
    g.add_argument("--mesh", metavar="AXIS=N,...",
                   help="device mesh, e.g. dp=2,tp=4 (outer axis first; ep drawn from the innermost axes as "
                        "MindFormers draws it: dp=4,tp=8,ep=32@dp*tp); a MindFormers config's own parallel sizes "
                        "when left out (data_parallel, model_parallel, pipeline_stage, context_parallel, expert_parallel)")
    if hardware:
        profiles = _hardware_profiles()
        g.add_argument("--hardware", default="atlas-800t-a2", metavar="PROFILE",
                       help="hardware profile: " + (", ".join(profiles) + " (under rules/hardware/)"
                                                    if profiles else "a name under rules/hardware/")
                            + " or a YAML path (default atlas-800t-a2)")
    g.add_argument("--dataset-strategy", default=None, metavar="data_parallel|full_batch|x=8,1;...",
                   help="how the inputs are split, as MindSpore's dataset_strategy: the batch over all "
                        "devices (data_parallel), not at all (full_batch), or per-input splits "
                        f"(default {dataset_default})")
    return g


def anchors_args(g, what="operators to configure"):
    g.add_argument("--anchors", "--strategies", dest="strategies", metavar="ANCHORS.yaml",
                   help=f"{what}: an anchors file (format: docs/reference/file-formats.md)")


def output_args(sp, max_rows="operator rows in each table", html=False, trace=False):
    g = sp.add_argument_group("output")
    g.add_argument("--format", choices=FORMATS, default=None,
                   help="report format: table (default), json, md (Markdown)" + (
                       " or html (one self-contained page: charts, graph, communication matrix, operator table)"
                       if html else "; html is for advise, propagate, compare and sweep"))
    g.add_argument("--json", action="store_true", help="same as --format json")
    g.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    if trace:
        g.add_argument("--trace", metavar="FILE.json",
                       help="also write the step model's schedule of one step as a Chrome trace (open it in "
                            "Perfetto or chrome://tracing)")
    if max_rows:
        g.add_argument("--max-rows", type=int, default=MAX_ROWS, metavar="N",
                       help=f"{max_rows} (default {MAX_ROWS}; 0 = all)")
    return g


def plan_args(sp, anchors=True, step=True):
    model_args(sp)
    mesh_args(sp)
    if step:
        step_model_args(sp)
    g = sp.add_argument_group("anchors and search")
    if anchors:
        anchors_args(g)
        g.add_argument("--no-model-strategies", action="store_true",
                       help="ignore the model's own shard() calls (by default they count as anchors)")
    return g


def _inspect_command(command) -> None:
    sp = command("inspect", "walk the model's graph: operators by type, parameters, cell tree")
    model_args(sp)
    g = output_args(sp, max_rows=None)
    g.add_argument("--depth", type=int, default=3, metavar="N", help="cell tree depth to print (default 3)")


def _plan_commands(command) -> None:
    """propagate, advise and explain."""
    sp = command("propagate", "propagate strategies from the anchors and report the redistribution cost")
    g = plan_args(sp)
    g.add_argument("--semi-auto", action="store_true",
                   help="no propagation: the plan MindSpore's semi_auto_parallel runs with these strategies "
                        "(every other operator takes its batch strategy)")
    output_args(sp, html=True, trace=True)

    sp = command("advise", "choose the operators to configure, propagate, and report the cost",
                 "choose the operators to configure, propagate, and report the cost (the model's own shard() "
                 "calls are compared, not used)")
    g = plan_args(sp, anchors=False)
    g.add_argument("--rules", action="append", metavar="RULES.yaml",
                   help="extra advisor rules merged over rules/default.yaml; repeatable")
    g.add_argument("--boundary", action="append", default=[], metavar="CELL.PATH=tp|dp",
                   help="declare a parallelism boundary: weight ops under CELL.PATH prefer tp (or dp)")
    sequence_parallel_arg(g)
    g = sp.add_argument_group("source edits", "write the advice into the model's sources")
    g.add_argument("--diff", action="store_true",
                   help="print the shard() diff of the model's sources instead of the report")
    g.add_argument("--diff-out", metavar="FILE", help="write that diff to FILE (paths relative to each "
                                                      "repository root); the report is still printed")
    g.add_argument("--apply", action="store_true",
                   help="write the advice into the model's sources in place (backups kept)")
    g.add_argument("--prune", action="store_true",
                   help="with --diff, --diff-out or --apply: also remove the model's shard() calls the advice "
                        "makes redundant")
    g.add_argument("--target", choices=["sharding_propagation", "shard"], default=None,
                   help="with --diff, --diff-out or --apply, MindFormers classes: the method the strategies go "
                        "into (default sharding_propagation)")
    g.add_argument("--emit-strategy-file", metavar="FILE.json",
                   help="write the advised plan as MindSpore's operator-strategy file (no source edit)")
    output_args(sp, html=True, trace=True)

    sp = command("explain", "why an operator got its strategy: provenance chain and candidates")
    g = plan_args(sp, step=False)       # the provenance is the propagation's: no step-model option changes it
    g.add_argument("--op", required=True, metavar="NAME", help="operator name, e.g. layers.0.mlp.linear_fc2.matmul")
    output_args(sp, max_rows=None)


def _check_commands(command) -> None:
    """verify and compare: strategist beside MindSpore and beside the experts."""
    sp = command("verify", "run MindSpore's own sharding propagation and compare it with strategist's plan",
                 "run MindSpore's own sharding propagation (a child process, CPU only is fine) and compare it "
                 "with strategist's plan, operator by operator")
    model_args(sp)
    g = mesh_args(sp, hardware=False)
    g.add_argument("--fully-use-devices", action="store_true",
                   help="MindSpore's fully_use_devices algorithm parameter: only strategies that use every "
                        "device (default off, as in MindSpore)")
    g.add_argument("--elementwise-op-strategy-follow", action="store_true",
                   help="MindSpore's elementwise_op_strategy_follow algorithm parameter, set on MindSpore's "
                        "side (default off, as in MindSpore)")
    g = sp.add_argument_group("anchors and search")
    anchors_args(g, "operators to configure, on both sides")
    g.add_argument("--semi-auto", action="store_true",
                   help="compare in semi_auto_parallel instead: strategist's semi_auto plan beside MindSpore "
                        "compiled so")
    g.add_argument("--redistributions", action="store_true",
                   help="also compare which edges move data (strategist's priced redistributions beside those "
                        "MindSpore inserts)")
    g.add_argument("--communication", action="store_true",
                   help="also compare every collective of one training step (forward, backward, gradient "
                        "mirrors) with MindSpore's graph after autodiff")
    g.add_argument("--fa-load-balance", dest="fa_load_balance", action="store_true",
                   help="both sides with MindSpore's FlashAttention load balance (parallel_speed_up_json "
                        "enable_flash_attention_load_balance): its exchanges in --communication")
    g.add_argument("--timeout", type=float, default=900, metavar="SECONDS", help="seconds MindSpore may take (default 900)")
    _memory_args(sp)
    output_args(sp, max_rows="operator rows in the table, disagreements first")

    sp = command("compare", "MindFormers models: the advice beside the experts' anchors and full strategies",
                 "MindFormers models: the advice beside the experts' sharding_propagation() anchors and their "
                 "full shard() strategies (the reference)")
    model_args(sp, mindformers_only=True)
    g = mesh_args(sp, dataset_default="full_batch")
    sp.set_defaults(dataset_strategy="full_batch")
    g = sp.add_argument_group("checks")
    g.add_argument("--verify", action="store_true",
                   help="also run MindSpore's own propagation of the experts' anchors (a child process)")
    output_args(sp, max_rows="disagreement rows per column", html=True)


def _memory_args(sp) -> None:
    g = sp.add_argument_group("memory", "--memory: MindSpore's own peak memory per device (its DryRun, one training "
                                        "step) beside strategist's estimate, instead of the propagation comparison")
    g.add_argument("--memory", action="store_true",
                   help="run one training step in MindSpore's DryRun (MS_SIMULATION_LEVEL=1; needs a C and a C++ "
                        "compiler) and print its used and actual peak beside strategist's memory estimate; without "
                        "--anchors, strategist's advice on the mesh is compiled")
    optimizer_arg(g, memory=True)
    g.add_argument("--optimizer-parallel", action="store_true", default=None,
                   help="with --memory: MindSpore's enable_parallel_optimizer")
    g.add_argument("--optimizer-swap", dest="optimizer_swap", action="store_true", default=None,
                   help="with --memory: MindFormers' AdamW with swap=True, its moments on the host (MindSpore's "
                        "runtime with switch_inline:False, as MindFormers documents it)")
    g.add_argument("--recompute", choices=["none", "selective", "full"], default=None,
                   help="with --memory: none (default), selective (the MLP activation and its product) or full "
                        "(every repeated layer)")
    g.add_argument("--micro-batches", type=int, default=None, metavar="M",
                   help="with --memory: micro-batches (a pp axis in --mesh: the pipeline's; else gradient "
                        "accumulation; default 1)")
    g.add_argument("--rank", type=int, default=None, metavar="R",
                   help="with --memory: the rank to simulate (default rank 0 and, with pp, the last rank)")


def _sweep_command(command) -> None:
    sp = command("sweep", "which mesh and memory options for N devices, ranked by the step model",
                 "which mesh and memory options for N devices: every dp x tp x cp x ep x pp factorisation the "
                 "model's shapes allow, advised and priced by the step model under each memory option, ranked by "
                 "step among those that fit the card")
    model_args(sp)
    g = sp.add_argument_group("mesh and hardware", "the meshes tried: every factorisation of --devices")
    g.add_argument("--devices", type=int, required=True, metavar="N", help="the number of devices (cards)")
    g.add_argument("--axes", default="dp,tp,cp,ep,pp", metavar="AXIS,...",
                   help="the mesh axes N is factorised over (default dp,tp,cp,ep,pp)")
    g.add_argument("--max-tp", type=int, metavar="N", help="the largest tp tried")
    g.add_argument("--max-pp", type=int, metavar="N", help="the largest pp tried")
    g.add_argument("--micro-batches", type=_micro_batch_counts, action="append", metavar="M[,M...]",
                   help="micro-batch counts tried on every mesh, as advise's --micro-batches M gives one (gradient "
                        "accumulation without pp): 4,8 or repeated (default 1 without pp; pp, 2 pp, 4 pp ... with "
                        "it, where they split the batch)")
    profiles = _hardware_profiles()
    g.add_argument("--hardware", default="atlas-800t-a2", metavar="PROFILE",
                   help="hardware profile: " + (", ".join(profiles) + " (under rules/hardware/)" if profiles
                                                else "a name under rules/hardware/") + " or a YAML path "
                        "(default atlas-800t-a2)")
    g.add_argument("--dataset-strategy", default=None, metavar="data_parallel|full_batch|x=8,1;...",
                   help="how the inputs are split, as MindSpore's dataset_strategy (default data_parallel; "
                        "full_batch for MindFormers configs)")
    sequence_parallel_arg(g)
    max_device_memory_arg(g)
    g.add_argument("--workers", type=int, metavar="N", help="processes advising in parallel (default: every core)")
    g.add_argument("--exhaustive", action="store_true",
                   help="advise every mesh on its own (default: each family of meshes with the same tp, cp and ep "
                        "is advised at one of them and its others priced with those anchors, then the fastest "
                        "meshes are advised on their own)")
    g.add_argument("--refine", type=int, default=None, metavar="N",
                   help="how many of the fastest meshes are advised on their own after the families (default 8)")
    g.add_argument("--ray", metavar="ADDRESS",
                   help="run the meshes as tasks on a Ray cluster: its address (auto, ray://host:10001) or local "
                        "(pip install 'strategist[ray]')")
    output_args(sp, max_rows="rows in each table", html=True)


def step_model_args(sp) -> None:
    """The step model's options: pipeline stages (a pp axis in --mesh), micro-batches, recompute, the parallel
    optimizer, fine-grained multi-copy, profile overrides."""
    g = sp.add_argument_group("step model", "a pp=N axis in --mesh gives pipeline stages (MindSpore "
                                            "pipeline_stages); the plan is propagated within a stage")
    g.add_argument("--micro-batches", type=int, default=None, metavar="M",
                   help="micro-batches a step's batch is split into: the pipeline's (micro_batch_num), or gradient "
                        "accumulation without pp (default 1; a MindFormers config's own)")
    g.add_argument("--recompute", default=None, metavar="none|selective|full",
                   help="recomputation: none (default), selective (MindFormers' select_recompute: the MLP "
                        "activation and its product) or full (every layer); a MindFormers config's own by default")
    g.add_argument("--recompute-layers", type=_counts, default=None, metavar="N,N,...",
                   help="full recompute of each stage's first N layers (MindFormers' recompute: [N, ...]); the "
                        "other layers as --recompute says")
    g.add_argument("--select-recompute-layers", dest="select_layers", type=_counts, default=None, metavar="N,N,...",
                   help="selective recompute on each stage's first N layers only (MindFormers' select_recompute: "
                        "[N, ...])")
    g.add_argument("--comm-recompute-layers", type=_counts, default=None, metavar="N,N,...",
                   help="recompute the norms and the communication after them on each stage's first N layers "
                        "(MindFormers' select_comm_recompute: [N, ...])")
    g.add_argument("--offset", type=_offset, default=None, metavar="N,N,...[;N,N,...]",
                   help="per stage, the layers beyond an even split (MindFormers' model_config.offset, summing to "
                        "layers %% (pp x chunks)); one row per model chunk with --pp-interleave, rows split by ';'")
    g.add_argument("--optimizer-parallel", action="store_true", default=None,
                   help="MindSpore's enable_parallel_optimizer: weights and optimizer states sharded over their "
                        "replicas (default: as the model's config says)")
    optimizer_arg(g)
    g.add_argument("--overlap-grad-reduce", dest="grad_comm_overlap", action="store_true", default=None,
                   help="the data-parallel gradient reductions run beside the backward (MindSpore's "
                        "parallel_speed_up_json grad_computation_allreduce_overlap; default: as a MindFormers config's "
                        "parallel_speed_up_json_path says, else off, MindSpore's default)")
    g.add_argument("--overlap-param-gather", dest="allgather_overlap", action="store_true", default=None,
                   help="the parallel optimizer's weight AllGathers run beside the forward (MindSpore's "
                        "parallel_speed_up_json computation_allgather_overlap; default as --overlap-grad-reduce)")
    g.add_argument("--fa-load-balance", dest="fa_load_balance", action="store_true", default=None,
                   help="FlashAttention split over a context-parallel axis balances its causal work over the devices, "
                        "swapping half of each query chunk with a partner (MindSpore's parallel_speed_up_json "
                        "enable_flash_attention_load_balance; default as --overlap-grad-reduce)")
    g.add_argument("--optimizer-swap", dest="optimizer_swap", action="store_true", default=None,
                   help="the optimizer's states kept on the host, each weight's on the device only during its update "
                        "(MindFormers' AdamW swap; default: as a MindFormers config's optimizer.swap says, else off)")
    max_device_memory_arg(g)
    g.add_argument("--interleave", type=int, default=None, metavar="K",
                   help="fine-grained multi-copy (MindFormers fine_grain_interleave, interleaved_parallel): "
                        "1 (default), 2, 4 or 8")
    g.add_argument("--pp-interleave", type=int, default=None, metavar="V",
                   help="model chunks per pipeline stage (interleaved 1F1B: MindSpore pipeline_interleave, "
                        "MindFormers pp_interleave_num; default 1)")
    g.add_argument("--step-set", action="append", default=[], metavar="FIGURE=VALUE",
                   help="override a hardware figure of the step model, e.g. matmul_tflops=300, "
                        "intra_bus_GBps.AllReduce.8=80; repeatable")
    g.add_argument("--choose-by-serial-sum", action="store_true",
                   help="the advisor's choices by the serial sum of communication and compute rather than the "
                        "scheduled step (the default)")
    g.add_argument("--choose-by-schedule", action="store_true",
                   help="the advisor's choices by the scheduled step: the default (accepted for earlier command lines)")


def max_device_memory_arg(g) -> None:
    """``--max-device-memory``: what a step must fit in (MindSpore's max_device_memory)."""
    g.add_argument("--max-device-memory", dest="max_device_memory", type=_device_memory, default=None,
                   metavar="GB", help="the device memory MindSpore may use, e.g. 58GB (its max_device_memory, in GB "
                                      "of 2**30 bytes); default: as a MindFormers config's context.max_device_memory "
                                      "says, else the hardware profile's memory less its reserve")


def _device_memory(text: str) -> float:
    """``--max-device-memory 58GB`` -> 58.0."""
    from .frontend.mindformers.settings import device_memory_GB
    try:
        return device_memory_GB(text, "--max-device-memory")
    except InputSpecError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("bad --max-device-memory ")) from None


def optimizer_arg(g, memory: bool = False) -> None:
    """``--optimizer``: whose states the memory holds (and, with verify --memory, what MindSpore's step runs)."""
    g.add_argument("--optimizer", choices=["adamw", "adam-weight-decay", "momentum"], default=None,
                   help=("with --memory: " if memory else "") + "the optimizer whose states each device keeps: "
                        "adamw (MindFormers' AdamW, two fp32 moments), adam-weight-decay (MindSpore's "
                        "nn.AdamWeightDecay, two moments in the weights' dtype) or momentum (nn.Momentum); default: "
                        "as the model's config says (optimizer.type), else adamw")


def _int_list(text: str, low: int, fix: str) -> tuple:
    """``"4,2,0"`` -> (4, 2, 0), every number at least ``low``; else a usage error ending with ``fix``."""
    try:
        out = tuple(int(x) for x in text.split(","))
    except ValueError:
        out = ()
    if not out or any(x < low for x in out):
        raise argparse.ArgumentTypeError(f"{text!r}: {fix}")
    return out


def _micro_batch_counts(text: str) -> tuple:
    """sweep's ``--micro-batches 4,8`` -> (4, 8)."""
    return _int_list(text, 1, "give micro-batch counts >= 1, e.g. 4 or 4,8")


def _counts(text: str) -> tuple:
    """``--recompute-layers 4,0`` -> (4, 0)."""
    return _int_list(text, 0, "give one layer count >= 0 per pipeline stage, e.g. 4,2,0,0")


def _offset(text: str) -> tuple:
    """``--offset 1,1,-2`` -> (1, 1, -2); ``--offset "1,1;1,-2"`` -> ((1, 1), (1, -2))."""
    try:
        rows = [tuple(int(x) for x in row.split(",")) for row in text.split(";")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give whole numbers per stage, e.g. 1,1,-2 (rows per model "
                                         f"chunk split by ';')") from None
    return rows[0] if len(rows) == 1 else tuple(rows)


#: the run settings the command line gives (argparse dest -> run_settings name)
RUN_ARGS = {"mesh": "mesh", "micro_batches": "micro_batches", "recompute": "recompute",
            "recompute_layers": "recompute_layers", "select_layers": "select_layers",
            "comm_recompute_layers": "comm_recompute_layers", "optimizer_parallel": "optimizer_parallel",
            "interleave": "interleave", "pp_interleave": "pp_interleave", "offset": "offset",
            "sequence_parallel": "sequence_parallel", "grad_comm_overlap": "grad_comm_overlap",
            "allgather_overlap": "allgather_overlap", "fa_load_balance": "fa_load_balance",
            "optimizer_swap": "optimizer_swap", "max_device_memory": "max_device_memory"}


def resolve_args(args):
    """The :class:`~strategist.run_settings.Run` of the parsed arguments: what they give, the rest from a MindFormers
    config's own settings or the defaults."""
    from .cost.profile import parse_overrides
    from .frontend.mindformers import split_model_options
    from .run_settings import resolve_run
    given = {name: getattr(args, dest, None) for dest, name in RUN_ARGS.items()}
    if not hasattr(args, "micro_batches"):          # a command without the step model's options (explain)
        given = {"mesh": args.mesh}
    over = parse_overrides(getattr(args, "step_set", None))
    options = split_model_options(args.kwargs) if _is_config(args.model) else {"overrides": None, "layers": None}
    return resolve_run(args.model, given, overrides=options["overrides"], layers=options["layers"],
                       optimizer=getattr(args, "optimizer", None),
                       step_overrides=tuple(sorted(over.items(), key=lambda kv: kv[0])) if over else (),
                       choose_by_schedule=not getattr(args, "choose_by_serial_sum", False))


def _is_config(model: str) -> bool:
    from .frontend.mindformers import is_mindformers_ref
    return is_mindformers_ref(model)


def _run_of(args):
    """(the run the command prices (advise, propagate, explain), or a MindFormers config's own mesh where verify or
    compare is given none (``args.mesh`` set to it); None for the other commands, the notes it has for stderr)."""
    if args.command in ("advise", "propagate", "explain"):
        return resolve_args(args), []
    if args.command == "sweep":
        return _sweep_run(args)
    if args.command in ("verify", "compare") and not args.mesh:
        from .run_settings import resolve_run
        run = resolve_run(args.model, {}, overrides=None)
        memory = args.command == "verify" and args.memory
        args.mesh = run.full_mesh if memory else run.mesh
        return None, []
    return None, []


def _sweep_run(args):
    """(a MindFormers config's own run, whose global batch (batch_size x data parallel x micro-batches) the sweep
    trains every mesh with where ``--kwargs batch=N`` does not say, or None: a model file, or a run strategist cannot
    spell -- the batch is then the build's default, and the note says to give one; the notes)."""
    from .frontend.mindformers import is_mindformers_ref, split_model_options
    if not is_mindformers_ref(args.model):
        return None, []
    opts = split_model_options(args.kwargs)
    if opts["batch"] is not None:
        return None, []
    from .errors import InputSpecError
    from .run_settings import resolve_run
    try:
        return resolve_run(args.model, {}, overrides=opts["overrides"] or None), []
    except InputSpecError:
        return None, ["the config's own mesh has no strategist spelling, so its global batch is not known: give "
                      "--kwargs batch=N (a sweep needs a batch every mesh's data parallelism divides)"]


def _settings_note(run) -> str | None:
    """One stderr line: the run's settings a MindFormers config gave (the report's "settings" line says from where)."""
    taken = [f"{n.replace('_', ' ')} {v}" for n, v, o in run.origins if o.startswith("config")]
    if not taken:
        return None
    return "the config's own settings: " + ", ".join(taken) + " (an option overrides each one)"


def step_model_options(args):
    """(the mesh without its pp axis, :class:`~strategist.cost.step.StepOptions`) of the parsed arguments."""
    run = resolve_args(args)
    return run.mesh, run.step


def _check_memory(parser, args) -> None:
    """verify's --memory options: only with --memory, which compares no propagation."""
    given = [f for f, v in (("--optimizer", args.optimizer), ("--optimizer-parallel", args.optimizer_parallel),
                            ("--optimizer-swap", args.optimizer_swap),
                            ("--recompute", args.recompute), ("--micro-batches", args.micro_batches),
                            ("--rank", args.rank)) if v is not None]
    if given and not args.memory:
        parser.error(f"{given[0]} is an option of --memory (MindSpore's peak memory): add --memory")
    if args.memory:
        other = [f for f, v in (("--semi-auto", args.semi_auto), ("--redistributions", args.redistributions),
                                ("--communication", args.communication), ("--eval", args.eval)) if v]
        if other:
            parser.error(f"--memory runs a training step and compares no propagation, so {other[0]} does not apply: "
                         f"drop one of them")
        if args.micro_batches is not None and args.micro_batches < 1:
            parser.error("--micro-batches must be >= 1")


def _kwargs_words(argv: list[str]) -> list[str]:
    """``--kwargs a=1 b=2 MODEL`` -> ``--kwargs=a=1 --kwargs=b=2 MODEL``: ``--kwargs`` takes its first word
    and then only KEY=VALUE words, so it never swallows the model (argparse alone cannot tell them apart)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return out + argv[i:]
        if a == "--kwargs" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            out.append(f"--kwargs={argv[i + 1]}")
            i += 2
            while i < len(argv) and "=" in argv[i] and not argv[i].startswith("-"):
                out.append(f"--kwargs={argv[i]}")
                i += 1
            continue
        out.append(a)
        i += 1
    return out


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The subcommand's own parser (its errors point at ``strategist COMMAND --help``)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _check(parser: argparse.ArgumentParser, args) -> None:
    """Option combinations argparse cannot express: each mistake is one line naming the fix (exit 2)."""
    parser = _command_parser(parser, args.command)
    if getattr(args, "max_rows", 0) < 0 or getattr(args, "depth", 0) < 0:
        parser.error(f"--{'max-rows' if getattr(args, 'max_rows', 0) < 0 else 'depth'} must be >= 0 (0 = all)")
    if not 0 < getattr(args, "timeout", 1) < float("inf"):
        parser.error(f"--timeout {args.timeout}: give a positive number of seconds")
    if args.json and args.format not in (None, "json"):
        parser.error(f"--json is --format json, which contradicts --format {args.format}: give one of them")
    fmt = "json" if args.json else args.format
    if fmt == "html" and args.command not in HTML_COMMANDS:
        parser.error(f"--format html: {args.command} has no HTML report (advise, propagate, compare and sweep have); "
                     f"use --format table, json or md")
    if args.command == "propagate" and args.out and args.trace and os.path.abspath(args.out) == \
            os.path.abspath(args.trace):
        parser.error(f"--out and --trace both write {args.out}: give them different files")
    if args.command == "verify":
        _check_memory(parser, args)
    if args.command == "sweep":
        for flag, v in (("--max-tp", args.max_tp), ("--max-pp", args.max_pp)):
            if v is not None and v < 1:
                parser.error(f"{flag} {v}: give the largest size tried, at least 1 (leave it out for no limit)")
    if args.command == "advise":
        edits = args.diff or args.diff_out or args.apply
        for flag, given in (("--prune", args.prune), ("--target", args.target)):
            if given and not edits:
                parser.error(f"{flag} only changes the source edits: add --diff, --diff-out FILE or --apply")
        if args.diff and fmt not in (None, "table"):
            parser.error(f"--diff prints the diff instead of the report, so --format {fmt} has nothing to "
                         f"format: drop one, or write the diff with --diff-out FILE")
        paths = [(f, v) for f, v in (("--out", args.out), ("--diff-out", args.diff_out),
                                     ("--emit-strategy-file", args.emit_strategy_file), ("--trace", args.trace)) if v]
        for i, (f1, v1) in enumerate(paths):
            for f2, v2 in paths[i + 1:]:
                if os.path.abspath(v1) == os.path.abspath(v2):
                    parser.error(f"{f1} and {f2} both write {v1}: give them different files")
    args.format = fmt or "table"


def _say(lines) -> None:
    for line in lines:
        print(f"strategist: {line}", file=sys.stderr)


def _fold_model_options(args) -> None:
    """``--layers/--seq/--batch/--set`` (MindFormers configs) travel as ``--kwargs`` entries."""
    extra = [f"{k}={getattr(args, k)}" for k in ("layers", "seq", "batch") if getattr(args, k, None) is not None]
    extra += list(getattr(args, "set", None) or [])
    if getattr(args, "sequence_parallel", False):
        from .frontend.mindformers import is_mindformers_ref
        if is_mindformers_ref(args.model):
            extra.append("parallel_config.use_seq_parallel=True")     # the config's own switch: the build follows it
    if extra:
        args.kwargs = list(args.kwargs or []) + extra


#: the stdout strategist's report goes to, while whatever else prints (the user's model, ``transformers`` at import,
#: MindSpore's Python warnings) goes to stderr (:func:`_report_stdout`)
_REPORT_OUT: list = []


@contextlib.contextmanager
def _report_stdout():
    """While a command runs: ``print`` and ``sys.stdout`` go to stderr, :func:`_write` to the real stdout, so that
    stdout holds the report alone (``--format json`` stays JSON whatever the model prints)."""
    _REPORT_OUT.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _REPORT_OUT.pop()


def _write(args, text: str, flag: str = "--out") -> None:
    """The report to stdout, or to ``--out FILE`` (``flag``: the option naming the file)."""
    path = getattr(args, flag[2:])
    if not path:
        (_REPORT_OUT[-1] if _REPORT_OUT else sys.stdout).write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise StrategistError(f"{flag} {path}: cannot write it ({err.strerror or err}): "
                              f"give a writable file path") from None
    print(f"strategist: wrote {path}", file=sys.stderr)


def _plan_report(args, plan, advice=None) -> None:
    """``advise`` and ``propagate``'s report of ``plan`` (``advice``: the advice behind it) in ``--format``, and the
    ``--trace`` file."""
    import json
    if getattr(args, "trace", None):
        from .report.trace import trace_json
        _write(args, trace_json(plan), "--trace")
    if args.format == "html":
        from .report.html import advice_html, plan_html
        if advice is None:
            _write(args, plan_html(plan))
            return
        from .source import source_changes
        try:
            diff, note = source_changes(advice).diff(), None
        except (StrategistError, OSError) as err:   # the page still shows the advice, and why no diff
            diff, note = None, f"no diff: {err}"
        _write(args, advice_html(advice, diff=diff, diff_note=note))
    elif advice is not None:
        from .report.render import advice_dict, advice_text
        if args.format == "json":
            _write(args, json.dumps(advice_dict(advice), indent=1, sort_keys=True) + "\n")
        else:
            _write(args, advice_text(advice, markdown=args.format == "md", max_rows=args.max_rows))
    else:
        from .report.render import plan_dict, plan_text
        if args.format == "json":
            _write(args, json.dumps(plan_dict(plan), indent=1, sort_keys=True) + "\n")
        else:
            _write(args, plan_text(plan, markdown=args.format == "md", max_rows=args.max_rows))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``strategist`` console script: Ctrl-C at any moment exits 130 with
    ``strategist: interrupted``; a closed or full stdout ends quietly, non-zero (strategist.progress)."""
    sys.dont_write_bytecode = True      # no __pycache__ beside the user's model or its own imports
    from .progress import run_guarded
    return run_guarded(_main, argv)


def console() -> None:
    """The ``strategist`` executable (and ``python -m strategist``): :func:`main`, then the process ends at once
    with its code, its output flushed. Its signal handling stays until then: Python's own shutdown would put the
    default SIGINT handler back first, and a Ctrl-C arriving there would kill the process with a traceback-less
    -2 instead of strategist's one line and 130."""
    sys.dont_write_bytecode = True
    from .progress import leave_with, run_guarded
    try:
        code = run_guarded(_main, None, restore=False)
    except SystemExit as done:              # argparse's --help, --version and usage errors
        code = done.code
    leave_with(code)


def _sweep(parser, args, said: list) -> int:
    """``strategist sweep``: the ranking (partial, exit 130, after a Ctrl-C)."""
    from .api import parse_dataset_strategy
    import json
    from .report.sweep import sweep_text
    from .sweep import sweep_model
    if args.devices < 1 or (args.workers is not None and args.workers < 1):
        _command_parser(parser, "sweep").error("--devices and --workers must be >= 1")
    if args.refine is not None and args.refine < 0:
        _command_parser(parser, "sweep").error("--refine must be >= 0")
    own = _config_memory(args.model, args.kwargs)
    swap, limit = own.get("optimizer_swap", False), args.max_device_memory or own.get("max_device_memory")
    if swap:
        said = said + ["the config's optimizer.swap: the optimizer's states on the host in every configuration"]
    if limit and not args.max_device_memory:
        said = said + [f"the config's context.max_device_memory: every configuration fits in {limit:g}GB"]
    result = sweep_model(args.model, args.devices, inputs=args.input, kwargs=args.kwargs, optimizer_swap=swap,
                         max_device_memory=limit,
                         training=not args.eval, hardware=args.hardware,
                         axes=tuple(a.strip() for a in args.axes.split(",") if a.strip()),
                         max_tp=args.max_tp, max_pp=args.max_pp,
                         micro_batches=tuple(m for ms in args.micro_batches for m in ms) if args.micro_batches
                         else None,
                         dataset_strategy=parse_dataset_strategy(args.dataset_strategy) or "data_parallel",
                         workers=args.workers, ray=args.ray, sequence_parallel=args.sequence_parallel,
                         exhaustive=args.exhaustive, **({} if args.refine is None else {"refine": args.refine}))
    if args.format == "json":
        _write(args, json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
    elif args.format == "html":
        from .report.html import sweep_html
        _write(args, sweep_html(result, args.max_rows))
    else:
        _write(args, sweep_text(result, markdown=args.format == "md", max_rows=args.max_rows))
    if result.interrupted:
        _say(said + [f"interrupted: the ranking of the {result.meshes_advised + result.meshes_carried} meshes "
                     f"priced so far"])
        return 130
    _say(said)
    return 0


def _config_memory(model: str, kwargs) -> dict:
    """A MindFormers config's ``optimizer.swap`` and ``context.max_device_memory`` (its ``--set`` keys applied), as
    ``{"optimizer_swap": bool, "max_device_memory": GB}`` where it sets them; {} for any other model."""
    from .frontend.mindformers import config_settings, is_mindformers_ref, split_model_options
    if not is_mindformers_ref(model):
        return {}
    own = config_settings(model, split_model_options(kwargs)["overrides"] or None)
    return {name: s.value for name in ("optimizer_swap", "max_device_memory") if (s := own.get(name)) is not None}


def _verify_memory(args) -> None:
    """``strategist verify --memory``: MindSpore's DryRun peak memory beside strategist's estimate."""
    from .api import parse_dataset_strategy, verify_memory
    from .verify.memory_report import memory_json, memory_text
    checks = verify_memory(args.model, args.mesh, inputs=args.input, kwargs=args.kwargs, strategies=args.strategies,
                           dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                           optimizer=args.optimizer, optimizer_parallel=bool(args.optimizer_parallel),
                           recompute=args.recompute or "none", micro_batches=args.micro_batches or 1,
                           rank=args.rank, timeout=args.timeout, optimizer_swap=bool(args.optimizer_swap))
    if args.format == "json":
        _write(args, memory_json(checks, args.model, args.mesh))
    else:
        _write(args, memory_text(checks, args.model, args.mesh, markdown=args.format == "md"))


def _main(argv: list[str] | None = None) -> int:
    # size: the command dispatch: one short branch per command
    parser = _parser()
    # argparse's own errors already print one usage line and exit 2.
    args = parser.parse_args(_kwargs_words(list(sys.argv[1:] if argv is None else argv)))
    _check(parser, args)
    _fold_model_options(args)
    os.environ.setdefault("GLOG_v", "4")  # MindSpore's C++ log: only critical; we report errors ourselves
    quiet = contextlib.ExitStack()
    quiet.enter_context(_report_stdout())
    try:
        from .api import mindformers_defaults, parse_dataset_strategy
        run, run_notes = _run_of(args)
        if hasattr(args, "dataset_strategy") and getattr(args, "model", None):
            args.kwargs, args.dataset_strategy, said = mindformers_defaults(
                args.model, run.mesh if run else getattr(args, "mesh", None), args.kwargs, args.dataset_strategy,
                micro_batches=run.step.micro_batches if run else 1, per_rank=run.batch_per_rank if run else None)
        else:
            said = []
        if run is not None and args.command != "sweep":
            said = [n for n in [_settings_note(run)] if n] + list(run.notes) + said
        said = list(run_notes) + list(said)
        if args.command == "inspect":
            from .frontend.loader import load_graph
            from .report.render import inspect_text
            graph = load_graph(args.model, args.input, args.kwargs, training=not args.eval)
            if args.format == "json":
                _write(args, graph.to_json() + "\n")
            else:
                _write(args, inspect_text(graph, args.depth, markdown=args.format == "md"))
        elif args.command == "advise":
            import io
            from .api import advise_model
            advice = advise_model(args.model, run.mesh, inputs=args.input, kwargs=args.kwargs, rules=args.rules,
                                  boundaries=args.boundary, hardware=args.hardware,
                                  dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                  training=not args.eval, step=run.step, sequence_parallel=run.sequence_parallel)
            from .progress import mark
            mark("writing the report")
            from .source import advise_outputs
            diff = io.StringIO()
            if advise_outputs(advice, diff=args.diff, diff_out=args.diff_out, apply=args.apply, prune=args.prune,
                              target=args.target, emit_strategy_file=args.emit_strategy_file, out=diff):
                _write(args, diff.getvalue())
                if args.trace:
                    from .report.trace import trace_json
                    _write(args, trace_json(advice.plan), "--trace")
            else:
                _plan_report(args, advice.plan, advice)
        elif args.command in ("propagate", "explain"):
            import json
            from .api import find_op, mindformers_anchors_note, plan_model
            from .report.render import explain_dict, explain_text
            plan = plan_model(args.model, run.mesh, inputs=args.input, kwargs=args.kwargs,
                              strategies=args.strategies, hardware=args.hardware,
                              use_model_strategies=not args.no_model_strategies,
                              dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                              semi_auto=getattr(args, "semi_auto", False), training=not args.eval, step=run.step)
            note = mindformers_anchors_note(plan)
            said = list(said) + ([note] if note else [])
            if args.command == "explain":
                name = find_op(plan, args.op)
                if args.format == "json":
                    _write(args, json.dumps(explain_dict(plan, name), indent=1, sort_keys=True) + "\n")
                else:
                    _write(args, explain_text(plan, name, markdown=args.format == "md"))
            else:
                _plan_report(args, plan)
        elif args.command == "verify" and args.memory:
            _verify_memory(args)
        elif args.command == "verify":
            from .verify import verify_model
            result = verify_model(args.model, args.mesh, inputs=args.input, kwargs=args.kwargs,
                                  strategies=args.strategies, timeout=args.timeout,
                                  dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                  fully_use_devices=args.fully_use_devices,
                                  elementwise_op_strategy_follow=args.elementwise_op_strategy_follow,
                                  semi_auto=args.semi_auto, redistributions=args.redistributions,
                                  communication=args.communication, training=not args.eval,
                                  **({"fa_load_balance": True} if args.fa_load_balance else {}))
            if args.format == "json":
                _write(args, result.to_json() + "\n")
            else:
                _write(args, result.text(args.max_rows, markdown=args.format == "md"))
            _say(list(said) + [result.timings()])
            return 0 if result.all_agree else 1
        elif args.command == "compare":
            from .compare import compare_model
            from .frontend.mindformers import split_model_options
            cmp = compare_model(args.model, args.mesh, hardware=args.hardware, verify=args.verify,
                                dataset_strategy=parse_dataset_strategy(args.dataset_strategy),
                                **split_model_options(args.kwargs))
            if args.format == "json":
                _write(args, cmp.to_json(args.max_rows) + "\n")
            elif args.format == "html":
                from .report.html import compare_html
                _write(args, compare_html(cmp, args.max_rows))
            else:
                _write(args, cmp.text(args.max_rows, markdown=args.format == "md"))
            said = list(said) + [cmp.timings()]
        elif args.command == "sweep":
            return _sweep(parser, args, said)
        _say(said)          # after the work: a refusal stays one line
        return 0
    except StrategistError as err:
        print(f"strategist: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("strategist: interrupted", file=sys.stderr)
        return 130
    finally:
        quiet.close()


if __name__ == "__main__":
    raise SystemExit(main())
