"""The console tables fit 120 columns (``render_table``): cells wrap between words, nothing is lost."""
from hypothesis import given, settings
from hypothesis import strategies as st

from strategist.report.render import TABLE_WIDTH, render_table

word = st.text(alphabet="abcdefghij(),.=", min_size=1, max_size=8)
cell = st.lists(word, min_size=1, max_size=12).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.lists(word, min_size=n, max_size=n),
                                                     st.lists(st.lists(cell, min_size=n, max_size=n), max_size=6))))
def test_a_table_fits_120_columns_and_keeps_every_word(table):
    header, rows = table
    lines = render_table(header, rows)
    assert all(len(line) <= TABLE_WIDTH for line in lines)
    assert sorted(" ".join(lines).split()) == sorted(" ".join(header + [c for r in rows for c in r]).split())


def test_a_narrow_table_is_as_it_was():
    assert render_table(["a", "bb"], [("x", "y y")]) == ["a  bb", "x  y y"]


def test_the_widest_prose_column_wraps_first_and_names_stay_whole():
    name = "model.layers.0.feed_forward.w2.matmul"
    prose = " ".join(["the collective waits for the last gradient"] * 4)
    lines = render_table(["operator", "why"], [(name, prose)])
    assert lines[1].startswith(name + "  ") and len(lines) > 2
    assert max(len(x) for x in lines) <= TABLE_WIDTH


def test_markdown_tables_are_not_wrapped():
    long = "x " * 100
    assert render_table(["a"], [(long,)], markdown=True)[2] == f"| {long} |"
