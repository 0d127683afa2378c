"""``--format html`` and ``--trace``: the demo model's page (``make demo``: llama2_70b, 2 layers, dp=8,tp=8) opened in
headless Chromium and read back from the DOM after its scripts ran; the trace's events against the step model."""
import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import EXAMPLES

DEMO = (os.path.join(EXAMPLES, "llama.py") + ":llama2_70b", "dp=8,tp=8", ["layers=2", "batch=8"])
MLP = os.path.join(EXAMPLES, "mlp.py") + ":MegatronMLP"
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium on PATH (apt-get install chromium)")


@pytest.fixture(scope="module")
def demo():
    """(the advice, its page, its trace) of the demo model."""
    from strategist.api import advise_model
    from strategist.cost.step import StepOptions
    from strategist.report.html import advice_html
    from strategist.report.trace import trace_dict
    model, mesh, kwargs = DEMO
    advice = advise_model(model, mesh, kwargs=kwargs, dataset_strategy="full_batch", step=StepOptions())
    return advice, advice_html(advice), trace_dict(advice.plan)


def chromium(url: str, tmp, *extra) -> str:
    out = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp / 'profile'}", *extra, url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


class Dom(HTMLParser):
    """Every element as (tag, attributes, the ids and classes of its ancestors and itself)."""

    VOID = {"meta", "link", "br", "input", "img", "hr", "col", "source", "wbr", "area", "base", "embed", "track"}

    def __init__(self, text: str):
        super().__init__()
        self.elements, self.stack, self.text, self.texts = [], [], {}, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        marks = {f"#{a['id']}"} if a.get("id") else set()
        marks |= {f".{c}" for c in (a.get("class") or "").split()}
        within = (self.stack[-1][2] if self.stack else frozenset()) | marks
        self.elements.append((tag, a, within))
        if tag not in self.VOID:
            self.stack.append((tag, a, within))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self.stack:
            self.texts.append((self.stack[-1][2], data))
            if self.stack[-1][1].get("id"):
                self.text[self.stack[-1][1]["id"]] = self.text.get(self.stack[-1][1]["id"], "") + data

    def text_in(self, mark) -> str:
        return "".join(d for w, d in self.texts if mark in w)

    def count(self, tag, *within) -> int:
        return sum(1 for t, _a, w in self.elements if t == tag and all(x in w for x in within))

    def attr(self, tag, name):
        return [a[name] for t, a, _w in self.elements if t == tag and name in a]


@pytest.fixture(scope="module")
def page(demo, tmp_path_factory):
    """The demo page as Chromium left it after its scripts ran, and the screenshot (a test artifact)."""
    tmp = tmp_path_factory.mktemp("html")
    path = tmp / "report.html"
    path.write_text(demo[1], encoding="utf-8")
    url = path.resolve().as_uri()
    dom = chromium(url, tmp, "--dump-dom")
    shot = tmp / "report.png"
    chromium(url, tmp, f"--screenshot={shot}", "--window-size=1400,3000", "--hide-scrollbars")
    return Dom(dom), shot


def _outside(plan):
    """The schedule's rows that are no layer's: ``(outside layers)``, ``(optimizer)``."""
    from strategist.report.layers import layer_runs
    from strategist.report.step import step_dict
    inside = {layer for r in layer_runs(plan) for layer in r.layers}
    return [k for k in step_dict(plan)["per_layer"] if k not in inside]


@needs_browser
def test_the_scripts_ran_and_no_request_left_the_page(page, demo):
    dom, _shot = page
    root = dom.elements[0][1]
    assert root.get("data-scripts") == "ran"
    assert root.get("data-requests") == "0"            # the page's own resource timing: nothing fetched
    raw = demo[1]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", raw, re.I)
    assert "<link" not in raw and "<script src" not in raw and "@import" not in raw and "url(" not in raw
    meta = [a for t, a, _w in dom.elements if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert [m["content"] for m in meta] == [CSP]


@needs_browser
def test_the_layer_chart_has_a_bar_per_layer_kind_and_the_runs_expand(page, demo):
    from strategist.report.layers import layer_runs
    dom, _shot = page
    advice = demo[0]
    runs = layer_runs(advice.plan)
    # the two decoder layers are one kind: one bar for them, beside the rows outside the layers
    assert [len(r.layers) for r in runs] == [2]
    outside = _outside(advice.plan)
    assert "(outside layers)" in outside and "(optimizer)" in outside
    assert dom.count("g", "#layer-bars", ".bar") == len(outside) + 1
    assert dom.count("g", ".run", ".bars-run", ".bar") == 2
    assert dom.count("details", ".run") == 1
    labels = [a["data-key"] for t, a, w in dom.elements if t == "g" and "#layer-bars" in w and ".bar" in w]
    assert "model.layers.0" in labels and "model.layers.1" not in labels
    assert "model.layers.0 .. model.layers.1 \u00d72" in dom.text_in("#layer-bars")
    assert dom.count("g", "#step-bar", ".bar") == 1 and dom.count("g", "#config-bars", ".bar") == 3


@needs_browser
def test_the_anchors_alike_across_the_layers_are_one_row(page, demo):
    dom, _shot = page
    advice = demo[0]
    # 11 anchors: the embedding, 4 linears in each of the 2 layers, the lm_head and the loss's one_hot
    assert len(advice.chosen) == 11
    assert dom.count("tr", "#anchor-table") == 1 + 11 - 4
    assert dom.count("details", "#anchor-table") == 4


@needs_browser
def test_the_matrix_has_a_cell_per_pair_of_devices(page, demo):
    dom, _shot = page
    assert dom.count("rect", "#matrix-svg", ".cell") == demo[0].plan.mesh.size ** 2 == 64 * 64


@needs_browser
def test_the_operator_table_has_a_row_per_operator_and_filters(page, demo):
    dom, _shot = page
    graph = demo[0].graph
    assert dom.count("tr", "#op-table") == len(graph) + 1          # the header row and one per operator
    assert dom.text["op-table-count"] == f"{len(graph)} of {len(graph)} operators"   # written by the filter script
    assert dom.count("input", "#operators") == 1
    labels = [a for t, a, _w in dom.elements if t == "label"]
    assert {"for": "op-filter"} in labels                            # the filter has its label, for the keyboard
    assert "@media (prefers-color-scheme: dark)" in demo[1]


@needs_browser
def test_the_graph_draws_every_operator_and_marks_the_moving_edges(page, demo):
    dom, _shot = page
    plan = demo[0].plan
    names = {op.name for op in plan.graph}
    assert sorted(dom.attr("g", "data-op")) == sorted(names)
    moving = {(e.src, e.dst) for e in plan.edges if e.bytes and e.src in names and e.dst in names}
    assert moving and dom.count("path", "#graph-svg", ".moves") == len(moving)
    assert dom.count("text", "#graph-svg", ".edge-label") == len(moving)
    # the operators reducing partial sums of their own: the vocabulary-split embedding, each layer's wo and w2
    own = sorted(n for n, c in plan.op_costs.items() if c.fwd_bytes or c.bwd_bytes)
    assert len(own) == 1 + 2 * 2 and dom.count("circle", "#graph-svg", ".own-mark") == len(own)


@needs_browser
def test_the_screenshot_is_kept(page):
    _dom, shot = page
    assert shot.exists() and shot.stat().st_size > 20_000


def test_the_trace_is_the_step_models_schedule(demo):
    from strategist.cost.step import estimate
    advice, _html, trace = demo
    est = estimate(advice.plan)
    ev = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "phases", 1: "compute", 2: "communication", 3: "weight AllGather (prefetch)",
                     4: "gradient reduction"}
    spans = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["pid"] == 1 for e in spans)
    assert [e["name"] for e in spans if e["tid"] == 0] == ["forward", "backward", "optimizer"]
    end = max(e["ts"] + e["dur"] for e in spans)
    assert end == pytest.approx(est.step_s * 1e6, abs=0.01)           # one micro-batch, one stage: no bubble
    compute = sum(e["dur"] for e in spans if e["tid"] == 1)
    assert compute == pytest.approx(est.schedule["computing_s"] * 1e6, rel=1e-6)
    # the tensor-parallel partial sums on the communication stream, the gradient buckets on their own
    assert any(e["tid"] == 2 and e["args"]["operator"].endswith("w2.matmul") for e in spans)
    assert any(e["tid"] == 4 and e["cat"] == "gradient" for e in spans)


def test_the_cli_writes_the_page_and_the_trace(tmp_path, capsys):
    from strategist.cli import main
    out, trace = tmp_path / "r.html", tmp_path / "t.json"
    argv = ["propagate", MLP, "--mesh", "dp=2,tp=4", "--micro-batches", "2"]
    assert main(argv + ["--format", "html", "--out", str(out), "--trace", str(trace)]) == 0
    err = capsys.readouterr()
    assert err.out == "" and f"wrote {out}" in err.err and f"wrote {trace}" in err.err
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and f'content="{CSP}"' in html.unescape(page)
    ev = json.loads(trace.read_text(encoding="utf-8"))["traceEvents"]
    phases = [e["name"] for e in ev if e["ph"] == "X" and e["tid"] == 0]
    assert phases == ["forward (micro-batch 1 of 2)", "backward (micro-batch 1 of 2)",
                      "forward (micro-batch 2 of 2)", "backward (micro-batch 2 of 2)", "optimizer"]
    assert main(argv + ["--format", "html", "--out", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == page          # deterministic


def test_the_text_report_names_groups_and_fits_120_columns(demo):
    from strategist.report.render import advice_text, human_bytes, plan_dict, plan_text
    plan = demo[0].plan
    text = plan_text(plan)
    assert "group=[" not in text
    assert "AllReduce(tp group of 8)" in text and "grad AllReduce(dp group of 8)" in text
    assert "AllGather(all 64, dim=0)" in text
    assert "model.layers.1.*" in text and "as model.layers.0.*" in text     # the repeated layer, one row
    prose = ("memory per device", "  assumed:", "- anchors ", "- Inconsistency")
    wide = [line for line in text.splitlines() if len(line) > 120 and not line.startswith(prose)]
    assert wide == []
    # the own-communication rows of the repeated layer: one row, each layer's sum, layer 0's
    own = {k: c.bytes for k, c in plan.op_costs.items()}
    layer0 = sum(b for k, b in own.items() if k.startswith("model.layers.0."))
    section = text.split("Operators' own communication", 1)[1].split("Per layer", 1)[0]
    (row,) = [ln for ln in section.splitlines() if ln.startswith("model.layers.1.*  ")]
    assert "as model.layers.0.*" in row and human_bytes(layer0) in row
    assert any(ln.startswith("model.layers.1.*  ") and ln.split()[1:] == ["4", "anchors", "each,", "as",
                                                                        "model.layers.0.*'s", "advisor"]
               for ln in text.splitlines())
    # the advice names the anchors of layer 1 beside layer 0's, once
    advice = advice_text(demo[0])
    assert "and 1 more alike: model.layers.1.attention.wq.matmul" in advice
    assert "\nmodel.layers.1.attention.wq.matmul (MatMul" not in advice
    # the rank lists stay in JSON
    d = plan_dict(plan)
    assert any("group=[0, 1, 2, 3, 4, 5, 6, 7]" in s for c in d["op_communication"].values() for s in c["steps"])


def test_the_sweep_page_ranks_and_charts_every_configuration(tmp_path, capsys):
    from strategist.cli import main
    tiny = os.path.join(EXAMPLES, "llama.py") + ":tiny"
    argv = ["sweep", tiny, "--kwargs", "layers=2", "batch=8", "--devices", "4", "--axes", "dp,tp", "--workers", "1"]
    assert main(argv + ["--format", "json", "--out", str(tmp_path / "s.json")]) == 0
    assert main(argv + ["--format", "html", "--out", str(tmp_path / "s.html")]) == 0
    d = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    dom = Dom((tmp_path / "s.html").read_text(encoding="utf-8"))
    assert d["ranked"] and dom.count("tr", "#sweep-table") == len(d["ranked"]) + 1
    assert dom.count("circle", "#sweep-chart", ".dot") == len(d["ranked"]) + len(d["unfit"])
    # the ranking's rows, fastest first, in the JSON's order
    meshes = [d_ for w, d_ in dom.texts if "#sweep-table" in w and ".mono" in w]
    assert meshes == [c["mesh"] for c in d["ranked"]]


def test_the_compare_page_sets_the_configurations_side_by_side():
    from strategist.compare import compare_model
    from strategist.report.html import compare_html
    dense = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                 vocab_size=1024)
    c = compare_model("mindformers:qwen3/pretrain_qwen3_32b_4k.yaml", "dp=2,tp=4", layers=2, seq=128, batch=8,
                      overrides=dense)
    page = compare_html(c)
    dom = Dom(page)
    assert dom.count("th", "#columns") == len(c.columns) + 1
    priced = [k for k, col in c.columns.items() if col.plan is not None]
    assert {"a", "b", "c"} <= set(priced) and dom.count("g", "#compare-bars", ".bar") == len(priced)
    wrong = sum(len(col.disagreements) for k, col in c.columns.items() if k != "c")
    assert wrong and dom.count("tr", "#dis-table") == wrong + 1
    assert page == compare_html(c)
