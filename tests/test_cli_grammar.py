"""One CLI grammar: every command shares the output options with the same defaults, every option has help
text, ``--kwargs`` never takes the model, ``--version`` reads the installed versions, and every invalid option
combination is one line on stderr with exit code 2."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from strategist import cli
from strategist.cli import _kwargs_words, _parser, main

from conftest import ROOT

MLP = os.path.join(ROOT, "examples/mlp.py:MegatronMLP")
FFN = os.path.join(ROOT, "examples/sharding_techniques.py:DocsFFN")
SMALL = ["--kwargs", "hidden=64", "ffn=256", "--input", "x:float16[8,64]"]
COMMANDS = ["inspect", "propagate", "advise", "explain", "verify", "compare", "sweep"]


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _options(sp):
    return {o: a for a in sp._actions for o in a.option_strings}


def test_every_command_is_there():
    assert sorted(_subparsers(_parser())) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_has_help_text(command):
    sp = _subparsers(_parser())[command]
    for a in sp._actions:
        assert a.help and a.help.strip() and a.help != argparse.SUPPRESS, (command, a.dest)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_exits_0_and_shows_the_groups(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for group in ("model:", "MindFormers:", "output:"):
        assert f"\n{group}" in out, (command, group)
    if command != "inspect":
        assert "\nmesh and hardware:" in out
    if command == "advise":
        assert "\nsource edits:" in out
    if command == "compare":            # MindFormers only: no --input/--kwargs/--train there
        assert "--kwargs" not in out and "--input" not in out


def test_shared_options_have_the_same_defaults_everywhere():
    subs = _subparsers(_parser())
    for command, sp in subs.items():
        opts = _options(sp)
        assert opts["--format"].choices == ("table", "json", "md", "html"), command
        assert opts["--format"].default is None, command       # None: not given, which reads as table
        assert opts["--json"].default is False and opts["--out"].default is None, command
        assert opts["--set"].default == [] and opts["--layers"].default is None, command
    traced = sorted(c for c, sp in subs.items() if "--trace" in _options(sp))
    assert traced == ["advise", "propagate"] and all(_options(subs[c])["--trace"].default is None for c in traced)
    rows = {c: _options(sp)["--max-rows"].default for c, sp in subs.items() if "--max-rows" in _options(sp)}
    assert sorted(rows) == ["advise", "compare", "propagate", "sweep", "verify"]
    assert set(rows.values()) == {cli.MAX_ROWS}
    meshes = {c: _options(sp)["--mesh"] for c, sp in subs.items() if c not in ("inspect", "sweep")}  # sweep: --devices
    # never required: a MindFormers config gives its own (strategist.run_settings); a model file without one is refused
    assert not any(a.required for a in meshes.values()) and len({a.help for a in meshes.values()}) == 1
    hardware = {c: _options(sp)["--hardware"].default for c, sp in subs.items() if "--hardware" in _options(sp)}
    assert set(hardware.values()) == {"atlas-800t-a2"} and "verify" not in hardware
    for c in ("propagate", "explain", "verify"):             # --anchors, with --strategies its alias
        a = _options(subs[c])["--anchors"]
        assert a is _options(subs[c])["--strategies"] and a.dest == "strategies"


def test_hardware_help_lists_the_profiles():
    helptext = _options(_subparsers(_parser())["advise"])["--hardware"].help
    assert "atlas-800t-a2" in helptext and "gpu-8x-nvlink" in helptext


def test_version_names_strategist_mindspore_and_mindformers(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    from importlib.metadata import version
    assert out.startswith(f"strategist 0.1.0 (MindSpore {version('mindspore')}, MindFormers "), out
    assert version("mindspore").startswith(("2.9.", "2.10.")), out     # pyproject's range
    assert ", mindone " in out and "Python 3." in out


def test_version_does_not_import_mindspore():
    code = ("import sys\nfrom strategist.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
            "    pass\nprint('imported' if 'mindspore' in sys.modules else 'not imported')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.stdout.strip().endswith("not imported"), r.stdout + r.stderr


def test_kwargs_words_stop_at_the_first_word_without_equals():
    assert _kwargs_words(["inspect", "--kwargs", "layers=2", "batch=8", "m.py:Net", "--json"]) == \
        ["inspect", "--kwargs=layers=2", "--kwargs=batch=8", "m.py:Net", "--json"]
    # the first word is always --kwargs' own (a word without '=' is then reported as a bad --kwargs)
    assert _kwargs_words(["--kwargs", "hidden", "m.py:Net"]) == ["--kwargs=hidden", "m.py:Net"]
    assert _kwargs_words(["--", "--kwargs", "a=1"]) == ["--", "--kwargs", "a=1"]


@pytest.mark.parametrize("before", [True, False])
def test_kwargs_never_swallow_the_model(before):
    kw = ["--kwargs", "layers=2", "batch=8"]
    args = _parser().parse_args(_kwargs_words(["inspect", *kw, "m.py:Net"] if before else
                                              ["inspect", "m.py:Net", *kw]))
    assert args.model == "m.py:Net" and args.kwargs == ["layers=2", "batch=8"]


def test_inspect_with_kwargs_before_the_model_runs(capsys):
    assert main(["inspect", "--kwargs", "hidden=64", "ffn=256", MLP, "--input", "x:float16[8,64]"]) == 0
    first = capsys.readouterr().out
    assert main(["inspect", MLP, *SMALL]) == 0
    assert capsys.readouterr().out == first and "operators: 5   edges: 4" in first


BAD = [
    (["advise", "m.py:Net", "--mesh", "dp=2", "--prune"],
     "--prune only changes the source edits: add --diff, --diff-out FILE or --apply"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--target", "shard"],
     "--target only changes the source edits: add --diff, --diff-out FILE or --apply"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--diff", "--format", "json"],
     "--diff prints the diff instead of the report, so --format json has nothing to format"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--diff", "--json"],
     "--diff prints the diff instead of the report, so --format json has nothing to format"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--diff-out", "a.patch", "--out", "a.patch"],
     "--out and --diff-out both write a.patch: give them different files"),
    (["propagate", "m.py:Net", "--mesh", "dp=2", "--json", "--format", "md"],
     "--json is --format json, which contradicts --format md: give one of them"),
    (["inspect", "m.py:Net", "--format", "html"],
     "--format html: inspect has no HTML report (advise, propagate, compare and sweep have); use --format table"),
    (["verify", "m.py:Net", "--mesh", "dp=2", "--format", "html"], "--format html: verify has no HTML report"),
    (["explain", "m.py:Net", "--mesh", "dp=2", "--op", "x", "--format", "html"],
     "--format html: explain has no HTML report"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--diff", "--format", "html"],
     "--diff prints the diff instead of the report, so --format html has nothing to format"),
    (["advise", "m.py:Net", "--mesh", "dp=2", "--trace", "a.json", "--out", "a.json"],
     "--out and --trace both write a.json: give them different files"),
    (["propagate", "m.py:Net", "--mesh", "dp=2", "--trace", "a.json", "--out", "a.json"],
     "--out and --trace both write a.json: give them different files"),
    (["compare", "mindformers:x.yaml", "--mesh", "dp=2", "--kwargs", "layers=2"],
     "unrecognized arguments: --kwargs=layers=2"),
    (["propagate", "m.py:Net", "--mesh", "dp=2", "--max-rows", "-1"], "--max-rows must be >= 0"),
    (["verify", "m.py:Net", "--mesh", "dp=2", "--timeout", "0"], "--timeout 0.0: give a positive number"),
]


@pytest.mark.parametrize("argv, needle", BAD, ids=[" ".join(a[2:] if a[0] != "inspect" else a[2:]) or a[0]
                                                   for a, _ in BAD])
def test_invalid_combinations_are_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith("strategist: error: ") and needle in lines[0], lines[0]
    # argparse reports unrecognized arguments from the top-level parser
    where = "strategist" if "unrecognized arguments" in needle else f"strategist {argv[0]}"
    assert lines[0].endswith(f"(see {where} --help)"), lines[0]


def test_valid_combinations_pass_the_checks():
    p = _parser()
    for argv in (["advise", "m.py:Net", "--mesh", "dp=2", "--diff", "--prune"],
                 ["advise", "m.py:Net", "--mesh", "dp=2", "--apply", "--target", "shard"],
                 ["advise", "m.py:Net", "--mesh", "dp=2", "--diff-out", "a.patch", "--format", "json"],
                 ["advise", "m.py:Net", "--mesh", "dp=2", "--format", "html", "--out", "r.html", "--trace", "t.json"],
                 ["propagate", "m.py:Net", "--mesh", "dp=2", "--format", "html", "--trace", "t.json"],
                 ["compare", "mindformers:x.yaml", "--mesh", "dp=2", "--format", "html"],
                 ["sweep", "m.py:Net", "--devices", "8", "--format", "html"],
                 ["propagate", "m.py:Net", "--mesh", "dp=2", "--json", "--format", "json"]):
        args = p.parse_args(argv)
        cli._check(p, args)
    assert args.format == "json"
    args = p.parse_args(["explain", "m.py:Net", "--mesh", "dp=2", "--op", "x", "--json"])
    cli._check(p, args)
    assert args.format == "json"


def test_out_writes_the_report_to_the_file(capsys, tmp_path):
    out = tmp_path / "graph.md"
    assert main(["inspect", MLP, *SMALL, "--format", "md", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"strategist: wrote {out}" in captured.err
    text = out.read_text()
    # Markdown as every command writes it: headings, lists and tables, no fenced console text
    assert text.startswith("# strategist inspect: ") and "```" not in text and "- operators: 5, edges: 4" in text
    assert "| type | operators |" in text


def test_out_to_an_unwritable_place_is_one_line(capsys, tmp_path):
    rc = main(["inspect", MLP, *SMALL, "--out", str(tmp_path / "no" / "such" / "dir" / "x.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("strategist: error: --out ") and "writable" in err[0]


def test_inspect_json_alias_equals_format_json(capsys):
    assert main(["inspect", MLP, *SMALL, "--json"]) == 0
    a = capsys.readouterr().out
    assert main(["inspect", MLP, *SMALL, "--format", "json"]) == 0
    assert capsys.readouterr().out == a and json.loads(a)["ops"]


def test_explain_json_and_md(capsys):
    args = ["explain", "--dataset-strategy", "full_batch", FFN, "--mesh", "dp=2,tp=4", "--op", "matmul2"]
    assert main(args + ["--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["op"]["name"] == "matmul2" and d["provenance"] and d["provenance"][-1]["name"] == "matmul2"
    assert sum(c["chosen"] for c in d["candidates"]) == 1
    assert main(args + ["--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# matmul2 (MatMul)") and "## Provenance (seed first)" in md and "```" not in md
    rows = [line for line in md.splitlines() if line.startswith("| `(")]
    assert len(rows) == len(d["candidates"]) and sum(line.endswith("| chosen |") for line in rows) == 1


def test_sweep_takes_micro_batch_counts_as_a_list_or_repeated(capsys):
    """advise's --micro-batches M gives one count; sweep's the counts it tries, written 4,8 or repeated."""
    from strategist import cli
    p = cli._parser()
    a = p.parse_args(["sweep", "m.py:Net", "--devices", "8", "--micro-batches", "1,2", "--micro-batches", "4"])
    assert [m for ms in a.micro_batches for m in ms] == [1, 2, 4]
    with pytest.raises(SystemExit):
        p.parse_args(["sweep", "m.py:Net", "--devices", "8", "--micro-batches", "2,0"])
    assert "give micro-batch counts >= 1, e.g. 4 or 4,8" in capsys.readouterr().err
    assert p.parse_args(["advise", "m.py:Net", "--micro-batches", "4"]).micro_batches == 4


def test_a_sweep_of_a_mindformers_config_trains_with_its_global_batch():
    """Without --kwargs batch=N a sweep of a MindFormers config takes the config's own global batch (batch_size x
    data parallel x micro-batches) for every mesh; it had the build's batch of 1, which no dp mesh divides."""
    from strategist import cli
    from strategist.api import mindformers_defaults
    p = cli._parser()
    args = p.parse_args(["sweep", "mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", "--devices", "8"])
    run, said = cli._sweep_run(args)
    assert said == []
    kwargs, _ds, notes = mindformers_defaults(args.model, run.mesh, [], None, micro_batches=run.step.micro_batches,
                                              per_rank=run.batch_per_rank)
    from strategist.vocab.mesh import Mesh
    want = run.batch_per_rank * Mesh.parse(run.mesh).get("dp") * run.step.micro_batches
    assert kwargs == [f"batch={want}"] and "runner_config.batch_size" in notes[0]
    given = p.parse_args(["sweep", "mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", "--devices", "8",
                          "--kwargs", "batch=16"])
    assert cli._sweep_run(given) == (None, [])
    assert cli._sweep_run(p.parse_args(["sweep", "examples/mlp.py:MegatronMLP", "--devices", "8"])) == (None, [])


def test_a_sweep_of_a_mindformers_config_keeps_its_optimizer_swap_and_max_device_memory():
    """DeepSeek-V3's pretraining config sets optimizer.swap (MindFormers' AdamW moments on the host) and
    context.max_device_memory 56GB: its sweep prices every configuration so, as advise prices the config's own
    settings; Qwen3's sets no swap."""
    from strategist import cli
    from strategist.sweep import Shapes, option_sets
    assert cli._config_memory("mindformers:deepseek3/pretrain_deepseek3_671b.yaml", []) == \
        {"optimizer_swap": True, "max_device_memory": 56.0}
    assert not cli._config_memory("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", []).get("optimizer_swap")
    assert cli._config_memory("examples/mlp.py:MegatronMLP", []) == {}
    s = Shapes(batch=8, heads=8, kv_heads=8, seq=128, experts=None, layers=4, widths=frozenset())
    opts = option_sets({"dp": 2, "pp": 2}, s, None, "full_batch", True, 56.0)
    assert {o.optimizer_swap for o in opts} == {True} and {o.max_device_memory for o in opts} == {56.0}
