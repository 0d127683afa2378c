"""Hardening (issue 13): every bad input is one line on stderr and a clean exit, never a traceback,
and nothing is written into the model's folder or the working directory.

The corpus runs the real CLI (``python -m strategist``) in a subprocess whose cwd is an empty temporary
directory, against a private copy of a small model; each case asserts the exit code, exactly one
stderr line naming the problem, no traceback, and unchanged checksums of the model folder and the cwd.
Cases that fail before MindSpore is imported are fast; the rest (model import, graph, anchors) are
marked slow. The interrupt tests send SIGINT at four points of a 20-layer ``advise`` run. The fuzz
test feeds random text to every parser: a StrategistError or success, never another exception.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from strategist.errors import StrategistError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

TINY = '''\
import mindspore as ms
from mindspore import nn, ops
from mindspore.common.initializer import initializer


class Net(nn.Cell):
    def __init__(self, hidden=64, ffn=128, tokens=32):
        super().__init__()
        self.w1 = ms.Parameter(initializer("normal", (hidden, ffn), ms.float16), name="w1")
        self.w2 = ms.Parameter(initializer("normal", (ffn, hidden), ms.float16), name="w2")
        self.matmul1 = ops.MatMul()
        self.relu = ops.ReLU()
        self.matmul2 = ops.MatMul()
        self.example_inputs = {"x": f"float16[{tokens},{hidden}]"}

    def construct(self, x):
        return self.matmul2(self.relu(self.matmul1(x, self.w1)), self.w2)


class BadExample(Net):
    def __init__(self):
        super().__init__()
        self.example_inputs = {"x": "float99[32,64]"}


class ZeroExample(Net):
    def __init__(self):
        super().__init__()
        self.example_inputs = {"x": "float16[0,64]"}


def not_a_cell():
    return 42


def exits():
    import sys
    sys.exit(3)


VALUE = 5
'''

HW = "name: t\ndevices_per_node: 8\nintra_node: {bandwidth_GBps: 56, latency_us: 10}\n" \
     "inter_node: {bandwidth_GBps: 25, latency_us: 20}\npeak_tflops: 280\nmfu: 0.5\n"


def hw(**change) -> str:
    d = yaml.safe_load(HW)
    for k, v in change.items():
        if "." in k:
            a, b = k.split(".")
            d[a][b] = v
        elif v is None:
            d.pop(k)
        else:
            d[k] = v
    return yaml.safe_dump(d, sort_keys=False)


# (id, argv, files {name: text|bytes} written beside the model, exit code, needle in the one stderr line)
# {M} is the model file, {D} its folder. P = propagate with the usual mesh.
FAST = [
    # ---- argument syntax (argparse, one line)
    ("no-subcommand", [], 2, "required: command"),
    ("unknown-option", ["inspect", "{M}:Net", "--bogus"], 2, "unrecognized arguments: --bogus"),
    ("missing-mesh", ["propagate", "{M}:Net"], 2, "no mesh: give --mesh (e.g. --mesh dp=2,tp=4)"),
    ("negative-max-rows", ["advise", "{M}:Net", "--mesh", "dp=2", "--max-rows", "-1"], 2, "--max-rows must be >= 0"),
    ("negative-depth", ["inspect", "{M}:Net", "--depth", "-3"], 2, "--depth must be >= 0"),
    ("bad-format", ["propagate", "{M}:Net", "--mesh", "dp=2", "--format", "xml"], 2, "invalid choice: 'xml'"),
    ("layers-not-int", ["inspect", "{M}:Net", "--layers", "two"], 2, "invalid int value: 'two'"),
    ("compare-negative-max-rows", ["compare", "mindformers:x.yaml", "--mesh", "dp=2", "--max-rows", "-2"], 2,
     "--max-rows must be >= 0"),
    ("compare-bad-mesh", ["compare", "mindformers:x.yaml", "--mesh", "dp=2,tp"], 2, "bad mesh"),
    ("verify-negative-timeout", ["verify", "{M}:Net", "--mesh", "dp=2", "--timeout", "-5"], 2,
     "--timeout -5.0: give a positive number"),
    ("verify-nan-timeout", ["verify", "{M}:Net", "--mesh", "dp=2", "--timeout", "nan"], 2, "--timeout nan"),
    ("sweep-max-tp-zero", ["sweep", "{M}:Net", "--devices", "8", "--max-tp", "0"], 2,
     "--max-tp 0: give the largest size tried, at least 1 (leave it out for no limit)"),
    ("sweep-max-pp-negative", ["sweep", "{M}:Net", "--devices", "8", "--max-pp", "-2"], 2, "--max-pp -2"),
    ("explain-takes-no-step-model-option", ["explain", "{M}:Net", "--mesh", "dp=2", "--op", "x", "--recompute",
                                            "full"], 2, "unrecognized arguments: --recompute full"),
    ("advise-bad-optimizer", ["advise", "{M}:Net", "--mesh", "dp=2", "--optimizer", "adam"], 2,
     "invalid choice: 'adam'"),
    # ---- model reference
    ("model-no-colon", ["inspect", "{M}"], 2, "bad model reference"),
    ("model-bad-name", ["inspect", "{M}:1x"], 2, "bad model reference"),
    ("model-missing-file", ["inspect", "{D}/nope.py:Net"], 2, "model file not found"),
    ("model-without-py", ["inspect", "{D}/model:Net"], 2, "did you mean"),
    ("model-not-py", ["inspect", "{D}/notes.txt:Net"], 2, "is not a .py file"),
    ("model-is-dir", ["inspect", "{D}:Net"], 2, "model file not found"),
    # ---- --input / --kwargs
    ("input-no-colon", ["inspect", "{M}:Net", "--input", "x"], 2, "bad --input 'x'"),
    ("input-bad-dtype", ["inspect", "{M}:Net", "--input", "x:float99[2,2]"], 2, "bad --input"),
    ("input-bad-dims", ["inspect", "{M}:Net", "--input", "x:float16[2,a]"], 2, "bad --input"),
    ("input-negative", ["inspect", "{M}:Net", "--input", "x:float16[-2,4]"], 2, "bad --input"),
    ("input-zero-dim", ["inspect", "{M}:Net", "--input", "x:float16[0,64]"], 2, "zero-sized dimension"),
    ("input-huge", ["inspect", "{M}:Net", "--input", "x:float16[100000000,100000000]"], 2, "GiB is more than"),
    ("input-above-platform", ["inspect", "{M}:Net", "--input", "x:float16[99999999999999]"], 2,
     "above 2147483647"),
    ("input-twice", ["inspect", "{M}:Net", "--input", "x:float16[32,64]", "--input", "x:float16[32,64]"], 2,
     "--input x is given twice"),
    ("input-bad-name", ["inspect", "{M}:Net", "--input", "1x:float16[2]"], 2, "bad --input"),
    ("kwargs-no-equals", ["inspect", "{M}:Net", "--kwargs", "hidden"], 2, "bad --kwargs 'hidden'"),
    ("kwargs-huge", ["inspect", "{M}:Net", "--kwargs", "hidden=" + "9" * 50000], 2, "50000 characters"),
    ("kwargs-deep", ["inspect", "{M}:Net", "--kwargs", "hidden=" + "[" * 9000 + "]" * 9000], 2, "characters"),
    # ---- meshes
    ("mesh-no-size", ["propagate", "{M}:Net", "--mesh", "dp"], 2, "bad mesh 'dp'"),
    ("mesh-zero", ["propagate", "{M}:Net", "--mesh", "dp=0"], 2, "bad mesh 'dp=0'"),
    ("mesh-negative", ["propagate", "{M}:Net", "--mesh", "dp=-2"], 2, "bad mesh"),
    ("mesh-float", ["propagate", "{M}:Net", "--mesh", "dp=2.5"], 2, "bad mesh"),
    ("mesh-dup-axis", ["propagate", "{M}:Net", "--mesh", "dp=2,dp=2"], 2, "must be unique"),
    ("mesh-reserved", ["propagate", "{M}:Net", "--mesh", "None=2"], 2, "reserved"),
    ("mesh-too-big", ["propagate", "{M}:Net", "--mesh", "dp=100000000000000000000"], 2, "more than any real cluster"),
    ("mesh-too-big-product", ["advise", "{M}:Net", "--mesh", "dp=2048,tp=1024"], 2, "more than any real cluster"),
    ("mesh-empty", ["explain", "{M}:Net", "--mesh", "", "--op", "x"], 2, "bad mesh"),
    ("verify-bad-mesh", ["verify", "{M}:Net", "--mesh", "tp=four"], 2, "bad mesh"),
    # ---- --dataset-strategy / --boundary
    ("dataset-strategy", ["propagate", "{M}:Net", "--mesh", "dp=2", "--dataset-strategy", "x=a"], 2,
     "bad --dataset-strategy"),
    ("dataset-strategy-zero", ["propagate", "{M}:Net", "--mesh", "dp=2", "--dataset-strategy", "x=0,1"], 2,
     "bad --dataset-strategy"),
    ("boundary-syntax", ["advise", "{M}:Net", "--mesh", "dp=2", "--boundary", "head"], 2, "bad --boundary"),
    ("boundary-kind", ["advise", "{M}:Net", "--mesh", "dp=2", "--boundary", "head=pp"], 2, "bad --boundary"),
    # ---- hardware profiles
    ("hw-unknown", ["propagate", "{M}:Net", "--mesh", "dp=2", "--hardware", "tpu"], 2, "hardware profile not found"),
    ("hw-empty", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/empty.yaml"], 2, "not a mapping"),
    ("hw-zero-devices", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_zero.yaml"], 2,
     "line 2: devices_per_node: input should be greater than or equal to 1"),
    ("hw-negative-devices", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_negdev.yaml"], 2,
     "devices_per_node"),
    ("hw-zero-bandwidth", ["propagate", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_bw0.yaml"], 2,
     "intra_node.bandwidth_GBps: input should be greater than 0"),
    ("hw-negative-bandwidth", ["propagate", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_bwneg.yaml"], 2,
     "inter_node.bandwidth_GBps"),
    ("hw-zero-mfu", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_mfu0.yaml"], 2,
     "mfu: input should be greater than 0"),
    ("hw-mfu-above-one", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_mfu2.yaml"], 2,
     "mfu: input should be less than or equal to 1"),
    ("hw-nan", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_nan.yaml"], 2, "finite"),
    ("hw-inf-latency", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_inf.yaml"], 2, "finite"),
    ("hw-string-number", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_str.yaml"], 2,
     "devices_per_node: input should be a valid integer"),
    ("hw-bool", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_bool.yaml"], 2, "devices_per_node"),
    ("hw-misspelt", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_typo.yaml"], 2,
     "did you mean 'peak_tflops'"),
    ("hw-missing-key", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_missing.yaml"], 2,
     "inter_node: missing key"),
    ("hw-duplicate-key", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_dup.yaml"], 2,
     "duplicate key 'mfu'"),
    ("hw-not-utf8", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_latin1.yaml"], 2, "not UTF-8"),
    ("hw-bad-yaml", ["advise", "{M}:Net", "--mesh", "dp=2", "--hardware", "{D}/hw_yaml.yaml"], 2, "not valid YAML"),
    # ---- advisor rules
    ("rules-missing", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/none.yaml"], 2, "cannot read rules file"),
    ("rules-not-mapping", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_list.yaml"], 2, "a rules file is a mapping"),
    ("rules-unknown-section", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_sect.yaml"], 2,
     "did you mean 'templates'"),
    ("rules-misspelt-template", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_tmpl.yaml"], 2,
     "unknown template 'matmul_colum' (did you mean 'matmul_column'?)"),
    ("rules-misspelt-category", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_cat.yaml"], 2,
     "unknown category 'wieght'"),
    ("rules-nan-threshold", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_nan.yaml"], 2,
     "threshold 'boundary_ratio' must be a positive finite number"),
    ("rules-negative-threshold", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_neg.yaml"], 2,
     "threshold 'large_vocab'"),
    ("rules-bool-threshold", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_bool.yaml"], 2,
     "threshold 'large_vocab'"),
    ("rules-misspelt-threshold", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_thr.yaml"], 2,
     "did you mean 'large_vocab'"),
    ("rules-duplicate", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_dup.yaml"], 2, "duplicate key"),
    ("rules-template-ints", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_ints.yaml"], 2,
     "template 'matmul_row' maps factor names"),
    ("rules-category-str", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_catstr.yaml"], 2,
     "category 'weight' must be a list"),
    ("rules-not-utf8", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_latin1.yaml"], 2, "not UTF-8"),
    ("rules-merge-key", ["advise", "{M}:Net", "--mesh", "dp=2", "--rules", "{D}/r_merge.yaml"], 2, "merge keys"),
]

SLOW = [
    # ---- the model file itself
    ("model-syntax-error", ["inspect", "{D}/syntax.py:Net"], 2, "line 2: SyntaxError"),
    ("model-sys-exit", ["inspect", "{D}/sysexit.py:Net"], 2, "sysexit.py called sys.exit(4)"),
    ("model-os-exit", ["propagate", "{D}/osexit.py:Net", "--mesh", "dp=2"], 2, "osexit.py called os._exit(0)"),
    ("shard-row-not-a-strategy", ["propagate", "{D}/badshard.py:Net", "--mesh", "dp=8"], 2,
     "shard() strategy row 'dp' is neither a tuple of ints nor a mindspore Layout"),
    ("factory-sys-exit", ["inspect", "{M}:exits"], 2, "called sys.exit(3)"),
    ("model-name-missing", ["inspect", "{M}:Nett"], 2, "'Nett' not found"),
    ("micro-batches-not-dividing-the-batch", ["advise", "{M}:Net", "--mesh", "dp=2", "--micro-batches", "3"], 2,
     "--micro-batches 3 does not split the model's batch of 32 into whole micro-batches"),
    ("model-name-not-callable", ["inspect", "{M}:VALUE"], 2, "VALUE is an integer, not a Cell"),
    ("factory-not-cell", ["inspect", "{M}:not_a_cell"], 2, "returned int, not a mindspore.nn.Cell"),
    ("kwargs-unknown", ["inspect", "{M}:Net", "--kwargs", "layers=2"], 2, "check --kwargs"),
    ("example-inputs-bad", ["inspect", "{M}:BadExample"], 2, "bad example_inputs of"),
    ("example-inputs-zero", ["inspect", "{M}:ZeroExample"], 2, "zero-sized dimension"),
    ("input-not-a-parameter", ["inspect", "{M}:Net", "--input", "y:float16[32,64]"], 2, "not a parameter"),
    # ---- anchors files
    ("anchors-missing", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/none.yaml"], 2,
     "cannot read anchors file"),
    ("anchors-layout-int", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_lay5.yaml"], 2,
     "line 2: layout"),
    ("anchors-layout-ints", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_layints.yaml"], 2,
     "a layout entry is a mesh axis name"),
    ("anchors-bool-split", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_bool.yaml"], 2,
     "a strategy is a list of lists of positive integers"),
    ("anchors-duplicate", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_dup.yaml"], 2,
     "duplicate key 'matmul1' (first given at line 1)"),
    ("anchors-glob-conflict", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_glob.yaml"], 2,
     "configures matmul1 again (line 1"),
    ("anchors-unknown-op", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_op.yaml"], 2,
     "did you mean 'matmul1'"),
    ("anchors-misspelt-key", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_key.yaml"], 2,
     "did you mean 'in_strategy'"),
    ("anchors-not-utf8", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_latin1.yaml"], 2,
     "not UTF-8"),
    ("anchors-strategy-indivisible", ["propagate", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies",
                                      "{D}/a_div.yaml"], 2, "a_div.yaml line 2: matmul2 (MatMul)"),
    ("anchors-strategy-rank", ["explain", "{M}:Net", "--mesh", "dp=2,tp=4", "--op", "relu", "--strategies",
                               "{D}/a_rank.yaml"], 2, "a_rank.yaml line 1: matmul1"),
    ("verify-anchors-duplicate", ["verify", "{M}:Net", "--mesh", "dp=2,tp=4", "--strategies", "{D}/a_dup.yaml"], 2,
     "duplicate key"),
    # ---- the graph
    ("advise-boundary-no-cell", ["advise", "{M}:Net", "--mesh", "dp=2,tp=4", "--boundary", "layers.9=tp"], 2,
     "--boundary layers.9: the model has no cell"),
    ("explain-unknown-op", ["explain", "{M}:Net", "--mesh", "dp=2,tp=4", "--op", "matmul9"], 2,
     "--op 'matmul9' names no operator"),
]

FILES = {
    "notes.txt": "not a model\n",
    "model": "# a model file without .py\n",
    "empty.yaml": "",
    "hw_zero.yaml": hw(devices_per_node=0).replace("name: t\n", "name: t\n", 1),
    "hw_negdev.yaml": hw(devices_per_node=-8),
    "hw_bw0.yaml": hw(**{"intra_node.bandwidth_GBps": 0}),
    "hw_bwneg.yaml": hw(**{"inter_node.bandwidth_GBps": -25}),
    "hw_mfu0.yaml": hw(mfu=0),
    "hw_mfu2.yaml": hw(mfu=2),
    "hw_nan.yaml": HW.replace("peak_tflops: 280", "peak_tflops: .nan"),
    "hw_inf.yaml": HW.replace("latency_us: 10", "latency_us: .inf"),
    "hw_str.yaml": HW.replace("devices_per_node: 8", "devices_per_node: '8'"),
    "hw_bool.yaml": HW.replace("devices_per_node: 8", "devices_per_node: true"),
    "hw_typo.yaml": HW.replace("peak_tflops", "peak_tflop"),
    "hw_missing.yaml": hw(inter_node=None),
    "hw_dup.yaml": HW + "mfu: 0.4\n",
    "hw_latin1.yaml": ("# caf\u00e9\n" + HW).encode("latin-1"),
    "hw_yaml.yaml": "devices_per_node: [8\n",
    "r_list.yaml": "- thresholds\n",
    "r_sect.yaml": "templatez:\n  matmul_row: {k: [tp]}\n",
    "r_tmpl.yaml": "templates:\n  matmul_colum: {i: [dp], j: [tp]}\n",
    "r_cat.yaml": "categories:\n  wieght: [MatMul]\n",
    "r_nan.yaml": "thresholds:\n  boundary_ratio: .nan\n",
    "r_neg.yaml": "thresholds:\n  large_vocab: -1\n",
    "r_bool.yaml": "thresholds:\n  large_vocab: true\n",
    "r_thr.yaml": "thresholds:\n  large_vocabs: 100\n",
    "r_dup.yaml": "thresholds:\n  large_vocab: 100\n  large_vocab: 200\n",
    "r_ints.yaml": "templates:\n  matmul_row: {k: 3}\n",
    "r_catstr.yaml": "categories:\n  weight: MatMul\n",
    "r_latin1.yaml": "# r\u00e8gles\nthresholds: {}\n".encode("latin-1"),
    "r_merge.yaml": "base: &b {large_vocab: 5}\nthresholds:\n  <<: *b\n",
    "syntax.py": "import os\ndef broken(:\n",
    "sysexit.py": "import sys\nsys.exit(4)\n",
    "osexit.py": "import os\nos._exit(0)\n",
    "badshard.py": ("import mindspore as ms\nfrom mindspore import nn, ops\n\nclass Net(nn.Cell):\n"
                    "    def __init__(self):\n        super().__init__()\n"
                    "        self.f = ms.shard(ops.Mul(), in_strategy=((8, 1), 'dp'))\n"
                    "        self.example_inputs = {'x': 'float32[64,8]', 'y': 'float32[64,8]'}\n\n"
                    "    def construct(self, x, y):\n        return self.f(x, y)\n"),
    "a_lay5.yaml": "matmul1:\n  layout: 5\n",
    "a_layints.yaml": "matmul1:\n  layout: [[1, 2], [None, tp]]\n",
    "a_bool.yaml": "matmul1: [[true, 1], [1, 4]]\n",
    "a_dup.yaml": "matmul1: [[2, 1], [1, 4]]\nmatmul1: [[2, 1], [1, 4]]\n",
    "a_glob.yaml": "matmul1: [[2, 1], [1, 4]]\nmatmul*: [[2, 1], [1, 4]]\n",
    "a_op.yaml": "matmul11: [[2, 1], [1, 4]]\n",
    "a_key.yaml": "matmul1:\n  in_strategies: [[2, 1], [1, 4]]\n",
    "a_latin1.yaml": "# \u00e9\nmatmul1: [[2, 1], [1, 4]]\n".encode("latin-1"),
    "a_div.yaml": "matmul1: [[2, 1], [1, 4]]\nmatmul2: [[2, 3], [3, 1]]\n",
    "a_rank.yaml": "matmul1: [[2, 1, 1], [1, 4]]\n",
}


def _tree_sum(*dirs) -> str:
    h = hashlib.sha256()
    for d in dirs:
        for base, subdirs, files in sorted(os.walk(d)):
            subdirs.sort()
            h.update(base.encode())
            for f in sorted(files):
                h.update(f.encode())
                with open(os.path.join(base, f), "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A private model folder (the tiny model plus the bad files) and an empty working directory."""
    root = tmp_path_factory.mktemp("hardening")
    d = root / "models"
    d.mkdir()
    (d / "model.py").write_text(TINY)
    for name, text in FILES.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    cwd = root / "cwd"
    cwd.mkdir()
    return str(d), str(cwd)


def run_cli(argv, cwd, env=None, **kw):
    e = dict(os.environ)
    e.pop("PYTHONDONTWRITEBYTECODE", None)       # strategist must keep the model folder clean by itself
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "strategist"] + argv, cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=kw.pop("timeout", 300), **kw)


def _check_case(project, argv, code, needle):
    d, cwd = project
    argv = [a.replace("{M}", os.path.join(d, "model.py")).replace("{D}", d) for a in argv]
    before = _tree_sum(d, cwd)
    r = run_cli(argv, cwd)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, (r.returncode, r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("strategist: error: "), lines[0]
    assert needle in lines[0], lines[0]
    assert _tree_sum(d, cwd) == before, "the run wrote into the model folder or the working directory"


@pytest.mark.parametrize("case", FAST, ids=[c[0] for c in FAST])
def test_bad_input_fast(project, case):
    _check_case(project, *case[1:])


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW, ids=[c[0] for c in SLOW])
def test_bad_input_needing_the_model(project, case):
    _check_case(project, *case[1:])


def test_corpus_size():
    assert len(FAST) + len(SLOW) >= 60
    assert {c[1][0] for c in FAST + SLOW if c[1]} >= {"inspect", "propagate", "advise", "explain", "verify"}


# ---------------------------------------------------------------------------------------------
# warnings instead of silence; stdout closed or full


@pytest.mark.slow
def test_mesh_dividing_nothing_is_a_warning(project):
    d, cwd = project
    before = _tree_sum(d, cwd)
    r = run_cli(["propagate", os.path.join(d, "model.py:Net"), "--mesh", "dp=7", "--dataset-strategy",
                 "full_batch", "--format", "json"], cwd)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == ("strategist: warning: mesh axis dp=7 divides no dimension of the model: every "
                                "operator is replicated along it (pick sizes that divide the batch or hidden sizes)")
    import json
    assert json.loads(r.stdout)["warnings"][0].startswith("mesh axis dp=7 divides no dimension")
    assert _tree_sum(d, cwd) == before


def test_closed_and_full_stdout_exit_quietly(project):
    d, cwd = project
    argv = [sys.executable, "-m", "strategist", "inspect", os.path.join(d, "model.py") + ":Net", "--input",
            "x:float16[0,1]"]
    # the error path with stdout closed still prints its one line
    r = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    with open("/dev/full", "w") as full:
        r = subprocess.run(argv, cwd=cwd, stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_stdout_closed_or_full_during_a_report(project):
    d, cwd = project
    argv = [sys.executable, "-m", "strategist", "inspect", os.path.join(d, "model.py") + ":Net"]
    with open("/dev/full", "w") as full:
        r = subprocess.run(argv, cwd=cwd, stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1 and r.stderr == "strategist: error: cannot write the output: No space left on device\n"
    r = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 141 and r.stderr == ""
    p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()                                  # `| true`: the reader is gone before the report
    err = p.stderr.read().decode()
    assert p.wait() == 141 and err == ""


# ---------------------------------------------------------------------------------------------
# Ctrl-C


# Points of a 20-layer advise run, spread over MindSpore's import, its compile (C++, about 0.5 s: three
# blocks compiled and grown), the advisor's propagations (about 0.05 s), its minimality checks (about
# 0.5 s) and the report: (the step whose start is marked, seconds after it). Each point falls inside the
# run on a quiet machine; the test fails, naming the point, if the run ended before its signal.
POINTS = [("importing MindSpore", 0.0), ("importing MindSpore", 0.05), ("importing MindSpore", 0.1),
          ("extracting the graph", 0.05), ("extracting the graph", 0.15), ("extracting the graph", 0.3),
          ("extracting the graph", 0.4), ("advising", 0.0), ("advising", 0.02), ("minimality checks", 0.0),
          ("minimality checks", 0.2), ("writing the report", 0.0)]
# what is sent, ~50 ms apart
BURSTS = {"int": [signal.SIGINT], "int-int": [signal.SIGINT] * 2, "int-int-int": [signal.SIGINT] * 3,
          "term": [signal.SIGTERM], "term-term": [signal.SIGTERM] * 2, "int-term": [signal.SIGINT, signal.SIGTERM]}
CASES = [pytest.param(phase, delay, burst, id=f"{phase.split()[0]}-{delay}-{burst}",
                      marks=[pytest.mark.slow] + ([pytest.mark.ci_sample] if burst.startswith("int-int")
                                                  or burst == "int" or (burst == "term" and i % 2 == 0) else []))
         for i, (phase, delay) in enumerate(POINTS) for burst in BURSTS]
DEADLINE_S = 5.0


@pytest.mark.parametrize("phase, delay, burst", CASES)
def test_signals_exit_once_and_in_time(project, tmp_path, phase, delay, burst):
    """One, two or three SIGINTs (or SIGTERMs) ~50 ms apart at a point of a 20-layer advise run: exit 130
    (143 for a first SIGTERM) within 5 s of the first signal, one line, nothing left behind (model
    folder, cwd, temporary files). A run that does not exit in time is killed and fails."""
    d, cwd = project
    marks = tmp_path / "phases"
    before = _tree_sum(d, cwd, EXAMPLES)
    tmpdir = tmp_path / "tmp"          # the run's TMPDIR: its private temporary directory goes here
    tmpdir.mkdir()
    e = dict(os.environ, STRATEGIST_PHASE_FILE=str(marks), TMPDIR=str(tmpdir))
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.Popen([sys.executable, "-m", "strategist", "advise", os.path.join(EXAMPLES, "llama.py:tiny"),
                          "--kwargs", "layers=20", "--mesh", "dp=2,tp=4", "--dataset-strategy", "full_batch"],
                         cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent_at = None
    t0 = time.time()
    while time.time() - t0 < 300 and p.poll() is None:
        if marks.exists() and phase in marks.read_text():
            time.sleep(delay)
            assert p.poll() is None, f"the run ended within {delay} s of {phase!r}: move the point earlier"
            sent_at = time.time()
            for k, signum in enumerate(BURSTS[burst]):
                if k:
                    time.sleep(0.05)
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signum)
            break
        time.sleep(0.01)
    assert sent_at is not None, f"the run ended before {phase!r}: {p.returncode}"
    try:
        out, err = p.communicate(timeout=max(0.1, sent_at + DEADLINE_S - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"no exit within {DEADLINE_S} s of the first signal ({burst} at {phase} +{delay} s)")
    first = BURSTS[burst][0]
    assert p.returncode == (130 if first == signal.SIGINT else 143), (p.returncode, err[-2000:])
    assert err.strip().splitlines()[-1:] == ["strategist: interrupted"] and err.count("\n") == 1, err[-2000:]
    assert _tree_sum(d, cwd, EXAMPLES) == before
    assert os.listdir(tmpdir) == []


def test_a_signal_in_the_leaving_thread_lets_the_exit_finish(monkeypatch):
    """The handler re-entered while it performs the exit (a second Ctrl-C arriving inside it) returns at
    once, so the first call finishes: one line, one exit, nothing waits forever."""
    from strategist import progress
    exits, lines = [], []

    def fake_exit(code):
        exits.append(code)
        raise SystemExit(code)

    def fake_write(fd, data):
        if not lines:                      # the second signal arrives while the first is writing its line
            progress._on_signal(signal.SIGINT, None)
        lines.append(data)
        return len(data)
    monkeypatch.setattr(progress, "_EXIT", fake_exit)
    monkeypatch.setattr(progress.os, "write", fake_write)
    monkeypatch.setattr(progress, "_leaving", False)
    with pytest.raises(SystemExit):
        progress._on_signal(signal.SIGTERM, None)
    assert exits == [143] and lines == [b"strategist: interrupted\n"]
    progress._LEAVING.release()           # the fake exit returned through the held lock


# ---------------------------------------------------------------------------------------------
# fuzz: the parsers answer a StrategistError or a value, never another exception

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from strategist.api import parse_dataset_strategy  # noqa: E402
from strategist.vocab.graph import TensorSpec  # noqa: E402
from strategist.frontend.loader import ModelRef, parse_inputs, parse_kwargs  # noqa: E402
from strategist.vocab.mesh import Mesh
from strategist.files.hardware import load_hardware  # noqa: E402

_atoms = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                   st.text(max_size=12), st.sampled_from(["dp", "tp", "cp", "None", "matmul1", "in_strategy",
                                                          "layout", "bandwidth_GBps", "large_vocab"]))
_values = st.recursive(_atoms, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=10), st.sampled_from(
        ["thresholds", "templates", "categories", "devices_per_node", "intra_node", "inter_node", "mfu",
         "latency_us", "bandwidth_GBps", "matmul_row", "in_strategy", "out_strategy", "layout", "out_layout",
         "weight", "k", "i", "large_vocab"])), inner, max_size=4)), max_leaves=12)
_yaml_text = st.one_of(st.text(max_size=80), _values.map(lambda v: yaml.safe_dump(v, allow_unicode=True)),
                       st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
_spec_text = st.one_of(st.text(max_size=30), st.from_regex(r"[a-z]{1,4}:[a-z0-9]{3,9}\[[-0-9, ]{0,25}\]",
                                                           fullmatch=True))
_mesh_text = st.one_of(st.text(max_size=30), st.from_regex(r"([a-z]{1,3}=-?[0-9]{1,25},?){1,4}", fullmatch=True))

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _ok_or_strategist(fn, *a):
    try:
        fn(*a)
    except StrategistError as err:
        assert "\n" not in str(err) and str(err)


@FUZZ
@given(_mesh_text)
def test_fuzz_mesh(text):
    _ok_or_strategist(Mesh.parse, text)


@FUZZ
@given(st.lists(_spec_text, max_size=3), st.lists(st.text(max_size=40), max_size=3), st.text(max_size=30),
       _spec_text)
def test_fuzz_inputs_kwargs_dataset_strategy(inputs, kwargs, ds, spec):
    _ok_or_strategist(parse_inputs, inputs)
    _ok_or_strategist(parse_kwargs, kwargs)
    _ok_or_strategist(parse_dataset_strategy, ds)
    _ok_or_strategist(ModelRef.parse, spec)
    try:
        TensorSpec.parse(spec)
    except StrategistError:
        pass
    except ValueError:        # TensorSpec.parse itself is graph.py's; parse_inputs wraps it
        pass


@FUZZ
@given(_yaml_text)
def test_fuzz_rules_and_hardware_files(tmp_path_factory, text):
    from strategist.advice.advisor import load_rules
    f = tmp_path_factory.mktemp("fz") / "f.yaml"
    f.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    _ok_or_strategist(load_rules, [str(f)])
    try:
        h = load_hardware(str(f))
    except StrategistError as err:
        assert "\n" not in str(err)
    else:   # whatever is accepted makes physical sense
        assert h.devices_per_node >= 1 and h.intra.bandwidth > 0 and h.inter.bandwidth > 0 and 0 < h.mfu <= 1
        assert all(math.isfinite(x) for x in (h.intra.latency, h.inter.latency, h.peak_flops, h.memory_bytes))


@FUZZ
@given(_yaml_text)
def test_fuzz_anchor_values(text):
    """Anchors files: the YAML reader, duplicate/line bookkeeping and each value's schema."""
    from strategist.files.anchors import parse_anchor
    from strategist.files.schema import SourceLines, to_python
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return
    if root is None:
        return
    mesh = Mesh.parse("dp=2,tp=4")
    lines = SourceLines()
    try:
        data = to_python(root, "a.yaml", lines)
        if isinstance(data, dict):
            for k, v in data.items():
                parse_anchor("op", v, mesh, "a.yaml line 1", lines, (k,))
        else:
            parse_anchor("op", data, mesh, "a.yaml line 1", lines, ())
    except StrategistError as err:
        assert "\n" not in str(err)


def test_progress_goes_to_stderr_only_when_enabled(capsys):
    """Progress is drawn on stderr (a terminal) and never on stdout; off, the hooks are no-ops."""
    from strategist import progress
    try:
        progress.set_enabled(False)
        assert list(progress.bar(range(3), "minimality checks")) == [0, 1, 2]
        with progress.task("extracting the graph"):
            pass
        assert capsys.readouterr() == ("", "")
        progress.set_enabled(True)
        assert list(progress.bar(range(3), "minimality checks")) == [0, 1, 2]
        with progress.task("extracting the graph"):
            time.sleep(0.6)
        out, err = capsys.readouterr()
        assert out == "" and "minimality checks" in err and "extracting the graph" in err
    finally:
        progress.set_enabled(None)


@pytest.mark.slow
def test_progress_never_in_json_stdout(project):
    """Progress forced on (as on a terminal): drawn on stderr, stdout stays pure JSON."""
    import json
    d, cwd = project
    r = run_cli(["advise", os.path.join(d, "model.py:Net"), "--mesh", "dp=2,tp=4", "--dataset-strategy",
                 "full_batch", "--format", "json"], cwd, env={"STRATEGIST_PROGRESS": "1"})
    assert r.returncode == 0, r.stderr
    assert "importing MindSpore" in r.stderr and "advising" in r.stderr
    assert json.loads(r.stdout)["mesh"]
