"""A MindFormers config's own run settings as the defaults of a run, and the stage layouts and per-stage recompute
MindFormers configures, priced: MindFormers' offset rule worked by hand, its YAML forms read as its LayerSetting reads
them, one uneven stage and a partial full recompute against the plan's own figures."""
from __future__ import annotations

import os

import pytest

from strategist.advice.advisor import advise
from strategist.cost.pipeline import stage_of_ops, stage_sizes
from strategist.cost.step import StepOptions, estimate_with, memory_with
from strategist.errors import InputSpecError
from strategist.files.hardware import load_hardware
from strategist.frontend.loader import load_graph
from strategist.frontend.mindformers.settings import ALL, config_mesh, read_settings
from strategist.run_settings import resolve_run
from strategist.vocab.mesh import Mesh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "llama.py") + ":tiny"


def test_offsets_split_layers_as_mindformers_layer_setting_does():
    # avg = n // (pp chunks); each chunk holds avg + its offset; the offsets as written sum to n % (pp chunks)
    assert stage_sizes(40, 4, [-1, 1, 1, -1]) == [9, 11, 11, 9]                       # Qwen1.5-14B's
    # DeepSeek-V3 671B: 61 layers, pp=8, two chunks a stage: 3 a chunk, 13 left over; the last stage's second
    # chunk holds 1 -> stages of 4 + 4 = 8 layers, the last 4 + 1 = 5
    assert stage_sizes(61, 8, [[1] * 8, [1] * 7 + [-2]], chunks=2) == [8] * 7 + [5]
    # one row for every chunk (numpy's broadcast in LayerSetting): each chunk adds it
    assert stage_sizes(16, 2, [1, -1], chunks=2) == [10, 6]
    with pytest.raises(InputSpecError, match=r"summing to 62 % 8 = 6\) or a pp dividing 62"):
        stage_sizes(62, 8)
    with pytest.raises(InputSpecError, match=r"sum to 40 % 4 = 0 .* they sum to 1"):
        stage_sizes(40, 4, [1, 0, 0, 0])
    with pytest.raises(InputSpecError, match=r"every middle chunk needs at least one"):
        stage_sizes(8, 4, [1, -2, 1, 0])
    assert stage_sizes(2, 3, [0, 1, 1]) == [0, 1, 1]                    # an empty first stage: MindFormers allows it


def test_a_second_cell_list_runs_on_the_last_stage():
    # DeepSeek's multi-token-prediction layers (mtp.layers.*) do not count in the split: they run with the head
    from strategist.vocab.graph import Op, OpGraph, TensorSpec
    x = TensorSpec((4,), "float32")
    ops = [Op(f"{p}.{i}.add", "Add", f"{p}.{i}.block", "Block", "add", "", (), (x,))
           for p, n in (("model.layers", 4), ("mtp.layers", 1)) for i in range(n)]
    stage = stage_of_ops(OpGraph(ops, {}, {}, [], {}), 2, [1, -1])
    assert [stage[op.name] for op in ops] == [0, 0, 0, 1, 1]


def test_recompute_forms_read_as_mindformers_reads_them():
    base = {"parallel_config": {"data_parallel": 1, "model_parallel": 4, "pipeline_stage": 2, "micro_batch_num": 8},
            "model": {"model_config": {"offset": [1, -1], "pp_interleave_num": 2}},
            "parallel": {"pipeline_config": {"pipeline_interleave": True}}}
    s = read_settings({**base, "recompute_config": {"recompute": [[2, 1], [1, 0]], "select_recompute": True,
                                                    "select_comm_recompute": True}}).settings
    assert s["mesh"].value == "pp=2,dp=1,tp=4" and s["micro_batch_num"].value == 8
    assert s["pp_interleave"].value == 2 and s["offset"].value == (1, -1)
    # a row per model chunk: each stage's counts summed over its chunks; the other layers recompute selectively
    assert s["recompute_layers"].value == (3, 1) and s["recompute"].value == "selective"
    assert s["comm_recompute_layers"].value == (ALL, ALL)
    s = read_settings({**base, "recompute_config": {"recompute": False,
                                                    "select_recompute": {r"mlp\.mul": [4, 2],
                                                                         r"mlp\.activation_func\.silu": [4, 2]}}})
    assert s.settings["select_layers"].value == (4, 2) and s.settings["recompute"].value == "selective"
    assert not s.notes                                          # MindFormers' default patterns: priced as they are
    s = read_settings({**base, "recompute_config": {"select_recompute": [r"self_attention\.core_attention"]}})
    assert s.settings["recompute"].value == "selective" and "priced as MindFormers' default ones" in s.notes[0]
    s = read_settings({**base, "recompute_config": {"recompute": True}})
    assert s.settings["recompute"].value == "full" and "recompute_layers" not in s.settings


def test_expert_parallel_beyond_data_parallel_is_drawn_from_the_stage_devices():
    # DeepSeek-V3's pretraining sizes: ep 32 of the 4 x 8 devices of dp and tp (MindFormers' consecutive ranks)
    cfg = read_settings({"parallel_config": {"data_parallel": 4, "model_parallel": 8, "pipeline_stage": 8,
                                             "expert_parallel": 32, "micro_batch_num": 32}})
    run = resolve_run(TINY, {}, config=cfg)
    assert run.mesh == "dp=4,tp=8,ep=32@dp*tp" and run.step.pp == 8 and run.step.micro_batches == 32
    assert Mesh.parse(run.mesh).size == 32 and Mesh.parse(run.mesh).ways("ep") == 32
    # Qwen3-MoE's: ep 4 of tp's 4 devices; ep dividing dp stays an axis inside data parallel
    assert config_mesh(1, 4, 4, 1, 4) == "pp=4,dp=1,tp=4,ep=4@tp"
    assert config_mesh(4, 2, 1, 1, 2) == "dp=2,ep=2,tp=2"
    assert config_mesh(2, 8, 1, 1, 4) == "dp=2,tp=8,ep=4@tp"
    # the YAML's sizes written with ep as an axis (the first try): a mesh 32 times as large, said
    run = resolve_run(TINY, {"mesh": "pp=8,dp=4,tp=8,ep=32"}, config=cfg)
    assert Mesh.parse(run.mesh).size * run.step.pp == 8192 and run.notes == (
        "--mesh pp=8,dp=4,tp=8,ep=32: ep=32 is an axis of its own here (8192 devices, MindFormers' data_parallel "
        "128); the config draws its expert_parallel from its dp and tp devices: --mesh pp=8,dp=4,tp=8,ep=32@dp*tp "
        "(256 devices)",)
    assert resolve_run(TINY, {"mesh": "pp=8,dp=4,tp=8,ep=32@dp*tp"}, config=cfg).notes == ()
    # what MindFormers refuses (ep not dividing dp x tp): one line, before any build
    cfg = read_settings({"parallel_config": {"data_parallel": 4, "model_parallel": 8, "expert_parallel": 3}})
    with pytest.raises(InputSpecError, match=r"the config's parallel_config.* has no mesh MindFormers can run "
                                             r"\(bad mesh .*ep=3 does not divide the 32 devices of dp\*tp\): give --mesh"):
        resolve_run(TINY, {}, config=cfg)


def test_stages_the_configs_layers_cannot_take_are_refused_before_any_build():
    # DeepSeek-V3's 61 layers: its YAML's 8 stages with their offset split them; 16 even stages do not
    cfg = read_settings({"parallel_config": {"data_parallel": 4, "model_parallel": 8, "pipeline_stage": 8,
                                             "expert_parallel": 32, "micro_batch_num": 32},
                         "model": {"model_config": {"num_hidden_layers": 61,
                                                    "offset": [1, 1, 1, 1, 1, 1, 1, -2]}}})
    assert cfg.get("layers").value == 61
    assert resolve_run(TINY, {}, config=cfg).step.offset == (1, 1, 1, 1, 1, 1, 1, -2)
    with pytest.raises(InputSpecError, match=r"pp=16 does not split the model's 61 layers evenly"):
        resolve_run(TINY, {"mesh": "pp=16,dp=2,tp=8,ep=16@dp*tp"}, config=cfg)
    # --layers 32 (the build's count) splits evenly
    assert resolve_run(TINY, {"mesh": "pp=16,dp=2,tp=8,ep=16@dp*tp"}, config=cfg, layers=32).step.pp == 16


def test_the_command_line_overrides_each_config_setting_and_the_run_says_where_each_came_from():
    cfg = read_settings({"parallel_config": {"data_parallel": 2, "model_parallel": 2, "pipeline_stage": 2,
                                             "micro_batch_num": 4, "use_seq_parallel": True},
                         "runner_config": {"batch_size": 2, "gradient_accumulation_steps": 3},
                         "recompute_config": {"recompute": [1, 0]},
                         "model": {"model_config": {"offset": [1, -1]}}})
    run = resolve_run(TINY, {}, config=cfg)
    assert (run.mesh, run.full_mesh, run.step.micro_batches, run.batch_per_rank) == ("dp=2,tp=2", "pp=2,dp=2,tp=2",
                                                                                      4, 2)
    assert run.step.offset == (1, -1) and run.step.recompute_layers == (1, 0) and run.sequence_parallel
    assert run.origin("offset") == "config model_config.offset" and run.origin("interleave") == "default"
    run = resolve_run(TINY, {"mesh": "dp=4,tp=2", "recompute": "selective", "sequence_parallel": None}, config=cfg)
    # no pipeline on the command line's mesh: gradient accumulation's micro-batches, and the per-stage settings
    # written for pp=2 left out, each with a note
    assert run.step.pp == 1 and run.step.micro_batches == 3 and run.step.offset == () and run.step.recompute_layers == ()
    assert run.origin("mesh") == "command line" and run.origin("recompute") == "command line"
    assert run.origin("micro_batches") == "config runner_config.gradient_accumulation_steps"
    assert any("model_config.offset" in n and "pp=2" in n for n in run.notes)
    # the pipeline's interleave is the pipeline's: without one, left out too
    chunked = read_settings({"parallel_config": {"pipeline_stage": 2, "micro_batch_num": 4},
                             "parallel": {"pipeline_config": {"pipeline_interleave": True}},
                             "model": {"model_config": {"pp_interleave_num": 2}}})
    run = resolve_run(TINY, {"mesh": "dp=2"}, config=chunked)
    assert run.step.pp_interleave == 1 and any("pp_interleave_num" in n for n in run.notes)
    with pytest.raises(InputSpecError, match="no mesh: give --mesh"):
        resolve_run(TINY, {})


@pytest.fixture(scope="module")
def plan():
    graph = load_graph(TINY, None, ["layers=4", "batch=8"])
    return advise(graph, Mesh.parse("dp=2"), hardware=load_hardware("atlas-800t-a2")).plan


def test_an_uneven_stage_holds_its_layers_time_and_memory(plan):
    even = estimate_with(plan, StepOptions(pp=2, micro_batches=4))
    uneven = estimate_with(plan, StepOptions(pp=2, micro_batches=4, offset=(1, -1)))
    # three layers and the embedding on stage 0, one and the head on stage 1: stage 0's micro-batch takes longer by
    # what one layer takes, and the pipeline runs at its pace
    (a0, a1), (b0, b1) = [[s["micro_batch_s"] for s in e.per_stage] for e in (even, uneven)]
    assert b0 > a0 and b1 < a1
    assert b0 - a0 == pytest.approx(a1 - b1, rel=0.05)             # one layer moved from stage 1 to stage 0
    assert uneven.step_s > even.step_s
    m_even, m_uneven = [[s["memory_total"] for s in e.per_stage] for e in (even, uneven)]
    assert m_uneven[0] > m_even[0] and m_uneven[1] < m_even[1]


def test_a_full_recompute_of_each_stages_first_layers_lies_between_none_and_all(plan):
    opts = StepOptions(pp=2, micro_batches=4)

    def forward_end(**kw):        # what a stage holds at the end of its forward (the first stage's: its fullest)
        return memory_with(plan, StepOptions(pp=2, micro_batches=4, **kw))["moments"]["end of the forward"]
    none, full = forward_end(recompute="none"), forward_end(recompute="full")
    every, zero, some = (forward_end(recompute_layers=c) for c in ((ALL, ALL), (0, 0), (1, 1)))
    assert every == full and zero == none and full < some < none
    # in time: the recomputed layers' forward once more in the backward, and nothing for the others
    t_none, t_some, t_full = (estimate_with(plan, o).schedule["computing_s"] for o in
                              (opts, StepOptions(pp=2, micro_batches=4, recompute_layers=(1, 1)),
                               StepOptions(pp=2, micro_batches=4, recompute="full")))
    assert t_none < t_some < t_full
    assert t_some - t_none == pytest.approx((t_full - t_none) / 2, rel=0.02)     # one layer of each stage's two


def test_a_configs_parallel_speed_up_json_sets_the_overlaps(tmp_path):
    cfg = {"parallel_config": {"data_parallel": 8},
           "context": {"ascend_config": {"parallel_speed_up_json_path": "./speed/parallel_speed_up.json"}}}
    # the file missing: MindSpore's defaults (no overlap), said in a note
    missing = read_settings(cfg, str(tmp_path))
    assert missing.get("grad_comm_overlap") is None and "not found" in missing.notes[-1]
    run = resolve_run("examples/llama.py:tiny", {}, config=missing)
    assert (run.step.grad_comm_overlap, run.step.allgather_overlap) == (False, False)
    assert run.origin("grad_comm_overlap") == "default"
    # found beside the YAML (or in a directory above it, as a path relative to the repository's root is written)
    (tmp_path / "speed").mkdir()
    (tmp_path / "speed" / "parallel_speed_up.json").write_text('{"grad_computation_allreduce_overlap": true}')
    found = read_settings(cfg, str(tmp_path / "configs" / "model"))
    run = resolve_run("examples/llama.py:tiny", {}, config=found)
    assert (run.step.grad_comm_overlap, run.step.allgather_overlap) == (True, False)
    assert run.origin("grad_comm_overlap") == ("config ./speed/parallel_speed_up.json "
                                               "grad_computation_allreduce_overlap")
    # the command line overrides the file
    run = resolve_run("examples/llama.py:tiny", {"grad_comm_overlap": False, "allgather_overlap": True}, config=found)
    assert (run.step.grad_comm_overlap, run.step.allgather_overlap) == (False, True)
    # FlashAttention's load balance from the same file, and from the command line
    (tmp_path / "speed" / "parallel_speed_up.json").write_text('{"enable_flash_attention_load_balance": true}')
    run = resolve_run("examples/llama.py:tiny", {}, config=read_settings(cfg, str(tmp_path)))
    assert run.step.fa_load_balance and not run.step.grad_comm_overlap
    assert run.origin("fa_load_balance") == "config ./speed/parallel_speed_up.json enable_flash_attention_load_balance"
    assert not resolve_run("examples/llama.py:tiny", {"fa_load_balance": False},
                           config=read_settings(cfg, str(tmp_path))).step.fa_load_balance
    (tmp_path / "speed" / "parallel_speed_up.json").write_text('{"grad_computation_allreduce_overlap": tru')
    with pytest.raises(InputSpecError, match="parallel_speed_up_json_path ./speed/parallel_speed_up.json: not JSON"):
        read_settings(cfg, str(tmp_path))


def test_a_configs_optimizer_swap_is_read_and_the_command_line_gives_it_too():
    # DeepSeek-V3's pretraining config sets optimizer.swap: True (MindFormers' AdamW keeps its moments on the host)
    cfg = read_settings({"parallel_config": {"data_parallel": 2}, "optimizer": {"type": "AdamW", "swap": True}})
    run = resolve_run(TINY, {}, config=cfg)
    assert run.step.optimizer_swap is True and run.origin("optimizer_swap") == "config optimizer.swap"
    plain = resolve_run(TINY, {}, config=read_settings({"parallel_config": {"data_parallel": 2}}))
    assert plain.step.optimizer_swap is False and plain.origin("optimizer_swap") == "default"
    given = resolve_run(TINY, {"optimizer_swap": True}, config=read_settings({"parallel_config": {"data_parallel": 2}}))
    assert given.step.optimizer_swap is True and given.origin("optimizer_swap") == "command line"


def test_a_configs_max_device_memory_is_read_and_the_command_line_gives_it_too():
    # Yi-34B's finetuning config sets context.max_device_memory "57GB": what MindSpore's pool may take per device
    cfg = read_settings({"parallel_config": {"data_parallel": 2}, "context": {"max_device_memory": "57GB"}})
    run = resolve_run(TINY, {}, config=cfg)
    assert run.step.max_device_memory == 57.0
    assert ("max_device_memory", "57GB", "config context.max_device_memory") in run.origins
    plain = resolve_run(TINY, {}, config=read_settings({"parallel_config": {"data_parallel": 2}}))
    assert plain.step.max_device_memory is None and plain.origin("max_device_memory") == "default"
    given = resolve_run(TINY, {"max_device_memory": 52.5}, config=cfg)
    assert given.step.max_device_memory == 52.5 and given.origin("max_device_memory") == "command line"
    with pytest.raises(InputSpecError, match="bad context.max_device_memory 'lots': give the device memory"):
        read_settings({"context": {"max_device_memory": "lots"}})
