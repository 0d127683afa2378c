"""Anchors on operators created inside installed packages (``nn.Embedding``'s gather, ``nn.Dense``'s matmul) are
written at the user's line that creates the owning instance, never into site-packages."""
import json
import subprocess
import textwrap

from strategist.cli import main

MODEL = textwrap.dedent('''
    from mindspore import nn


    class Block(nn.Cell):
        def __init__(self, hidden):
            super().__init__()
            self.fc1 = nn.Dense(hidden, 4 * hidden)
            self.act = nn.GELU()
            self.fc2 = nn.Dense(4 * hidden, hidden)

        def construct(self, x):
            return self.fc2(self.act(self.fc1(x)))


    class TinyLM(nn.Cell):
        def __init__(self, vocab=32000, hidden=1024):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.block = Block(hidden)
            self.head = nn.Dense(hidden, vocab, has_bias=False)
            self.example_inputs = {"ids": "int32[8,512]"}

        def construct(self, ids):
            return self.head(self.block(self.wte(ids)))
''')


def _repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "lm.py").write_text(MODEL)
    for cmd in (["git", "init", "-q", "."], ["git", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=repo, check=True)
    return repo


def test_nn_layer_anchors_go_to_the_users_line_and_the_rebuilt_model_carries_them(tmp_path, capsys, monkeypatch):
    repo = _repo(tmp_path)
    monkeypatch.chdir(repo)
    model = str(repo / "lm.py") + ":TinyLM"
    assert main(["advise", model, "--mesh", "dp=2,tp=4", "--format", "json"]) == 0
    anchors = json.loads(capsys.readouterr().out)["anchors"]
    advised = {a["op"]: tuple(tuple(s) for s in a["strategy"]) for a in anchors}
    assert "wte.gather" in advised           # the vocabulary-parallel embedding: nn.Embedding's own primitive
    # the report names the user's line that creates the owning instance (self.wte = nn.Embedding(...): line 19),
    # not nn.Embedding's own line in site-packages
    created = 1 + next(k for k, ln in enumerate(MODEL.splitlines()) if "self.wte = nn.Embedding" in ln)
    assert next(a for a in anchors if a["op"] == "wte.gather")["user_source"] == f"lm.py:{created}"
    assert main(["advise", model, "--mesh", "dp=2,tp=4"]) == 0
    report = capsys.readouterr().out
    assert f"configure at lm.py:{created} (created inside an installed package" in report
    assert "site-packages" not in report
    from strategist.api import advise_model
    notes = advise_model(model, "dp=2,tp=4").notes
    assert any(n.startswith("wte.gather (Gather) is created inside an installed package") and
               "configure it in your code at " in n and "lm.py:" in n and "self.wte.gather.shard(" in n
               for n in notes), notes
    patch = tmp_path / "p.diff"
    assert main(["advise", model, "--mesh", "dp=2,tp=4", "--diff-out", str(patch)]) == 0
    err = capsys.readouterr().err
    text = patch.read_text()
    assert "site-packages" not in text and "site-packages" not in err
    assert [ln for ln in text.splitlines() if ln.startswith("diff --git")] == ["diff --git a/lm.py b/lm.py"]
    assert "+        self.wte.gather.shard(" in text
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
    assert main(["advise", model, "--mesh", "dp=2,tp=4", "--apply"]) == 0
    capsys.readouterr()
    assert "self.wte.gather.shard(" in (repo / "lm.py").read_text()
    from strategist import load_graph
    g = load_graph(str(repo / "lm.py") + ":TinyLM")
    for name, strategy in advised.items():
        assert tuple(tuple(s) for s in g.op(name).in_strategy) == strategy, name
