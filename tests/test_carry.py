"""Anchors carried from one mesh onto another of the same axes (what ``strategist sweep`` prices a family's other
meshes with): sizes read as the axes that make them, Layouts by their axes' names -- worked by hand."""
from __future__ import annotations

from strategist.advice.carry import carry_anchor, carry_anchors, carry_layout, carry_size, told_apart_from_dp
from strategist.vocab.anchors import Anchor
from strategist.vocab.graph import ShardLayout
from strategist.vocab.mesh import Mesh

SRC, DST = Mesh.parse("dp=4,tp=8"), Mesh.parse("dp=16,tp=8")


def test_sizes_carry_as_the_axes_that_make_them():
    assert carry_size(1, SRC, DST) == 1
    assert carry_size(4, SRC, DST) == 16                  # dp
    assert carry_size(8, SRC, DST) == 8                   # tp
    assert carry_size(32, SRC, DST) == 128                # dp x tp
    assert carry_size(2, SRC, DST) == 2                   # no set of axes makes 2: 2 of tp's 8, which keeps its size
    assert carry_size(2, SRC, Mesh.parse("dp=16,tp=4")) is None       # inside dp or tp, both of which change
    # 16: no set makes it; dp times 4 of tp's 8 (tp kept: dp x 4 on the other mesh) -- the batch split of
    # DeepSeek-V3's rotary concat the advisor gives at dp=4,tp=8 (and at dp=8 32, at dp=32 128)
    # on dp=8,tp=8 an 8 is dp or tp: not carried
    assert carry_size(8, Mesh.parse("dp=8,tp=8"), DST) is None
    # an axis the other mesh lacks (dp=1 there) carries as 1
    assert carry_size(4, SRC, Mesh.parse("tp=8")) == 1


def test_sizes_of_several_readings_or_none_carry_where_every_reading_agrees():
    # dp=2,ep=2,tp=4: a 2 is dp or ep. Both are 2 on a mesh that changes only pp: carried as 2. On dp=4 one reading
    # gives 4 and the other 2: not carried
    src = Mesh.parse("dp=2,ep=2,tp=4")
    assert carry_size(2, src, Mesh.parse("dp=2,ep=2,tp=4,pp=2")) == 2
    assert carry_size(8, src, Mesh.parse("dp=2,ep=2,tp=4,pp=2")) == 8      # dp x tp or ep x tp: 8 either way
    assert carry_size(2, src, Mesh.parse("dp=4,ep=2,tp=4")) is None
    assert carry_size(8, src, Mesh.parse("dp=4,ep=2,tp=4")) is None        # 16 or 8
    # 4 under tp=32 (4 key/value heads): no set of axes makes 4; tp keeps its 32, so the 4 stays, read inside the
    # axis the other mesh keeps (dp=8 -> 16 changes the other axis it could be inside); where tp changes too, it is
    # not carried
    assert carry_size(4, Mesh.parse("dp=2,tp=32"), Mesh.parse("dp=8,tp=32")) == 4
    assert carry_size(4, Mesh.parse("dp=2,tp=32"), Mesh.parse("dp=4,tp=16")) is None
    assert carry_size(4, Mesh.parse("dp=8,tp=32"), Mesh.parse("dp=16,tp=32")) == 4
    assert carry_size(4, Mesh.parse("dp=8,tp=32"), Mesh.parse("dp=16,tp=16")) is None
    # readings with the fewest whole axes that disagree: not carried (dp=4,tp=4,cp=4: an 8 is dp x 2 of tp or of
    # cp, 16 on dp=8, or tp x 2 of cp, or cp x 2 of tp, 8 there); where they agree, carried (a 64 under
    # dp=4,tp=8,cp=4: dp x tp x 2 of cp, or dp x cp x 4 of tp, 128 on dp=8 either way)
    assert carry_size(16, Mesh.parse("dp=4,tp=8"), Mesh.parse("dp=32,tp=8")) == 128
    assert carry_size(8, Mesh.parse("dp=4,tp=4,cp=4"), Mesh.parse("dp=8,tp=4,cp=4")) is None
    assert carry_size(64, Mesh.parse("dp=4,tp=8,cp=4"), Mesh.parse("dp=8,tp=8,cp=4")) == 128


def test_told_apart_from_dp():
    # dp=8,tp=2,cp=2: the sizes with dp (8, 16, 32) none of those without (2, 4): a 4 is tp x cp on every dp
    m = Mesh.parse("dp=8,tp=2,cp=2")
    assert told_apart_from_dp(m)
    assert carry_size(4, m, Mesh.parse("dp=2,tp=2,cp=2")) == 4 and carry_size(8, m, Mesh.parse("dp=2,tp=2,cp=2")) == 2
    # dp=4,tp=2,cp=2: a 4 is dp or tp x cp, which differ on dp=8
    m = Mesh.parse("dp=4,tp=2,cp=2")
    assert not told_apart_from_dp(m) and carry_size(4, m, Mesh.parse("dp=8,tp=2,cp=2")) is None
    assert told_apart_from_dp(SRC) and not told_apart_from_dp(Mesh.parse("dp=8,tp=8"))


def test_layouts_carry_by_their_axes_names():
    # (dp, None) x (None, tp) on dp=4,tp=8: the same names on dp=16,tp=8; dp dropped where the mesh has none
    x = ShardLayout((4, 8), ("dp", "tp"), ((1,), ()))
    assert carry_layout(x, SRC, DST) == ShardLayout((16, 8), ("dp", "tp"), ((1,), ()))
    assert carry_layout(x, SRC, Mesh.parse("tp=8")) == ShardLayout((8,), ("tp",), ((), ()))
    # a device matrix splitting tp further (key/value heads under more tp than heads: tp=32 as 8 x 4) keeps the
    # split where tp keeps its size, and cannot be carried where tp changes
    src, dst = Mesh.parse("dp=2,tp=32"), Mesh.parse("dp=8,tp=32")
    kv = ShardLayout((2, 8, 4), ("dp", "tp", "tp_group"), ((2,), (), (1,)))
    assert carry_layout(kv, src, dst) == ShardLayout((8, 8, 4), ("dp", "tp", "tp_group"), ((2,), (), (1,)))
    assert carry_layout(kv, src, Mesh.parse("dp=4,tp=16")) is None


def test_anchors_carry_whole_or_not_at_all():
    tuple_form = Anchor("gather", ((8, 1), (4, 1)))
    layout_form = Anchor("mm", None, (ShardLayout((4, 8), ("dp", "tp"), ((1,), ())),
                                      ShardLayout((4, 8), ("dp", "tp"), ((), (0,)))))
    got = carry_anchors({"gather": tuple_form, "mm": layout_form}, SRC, DST)
    assert got["gather"].strategy == ((8, 1), (16, 1))
    assert got["mm"].layouts[0].device_matrix == (16, 8) and got["mm"].layouts[1].axes() == ((), ("tp",))
    odd = Anchor("odd", ((2, 1),))          # inside dp or tp, both of which change on dp=16,tp=4
    assert carry_anchor(odd, SRC, Mesh.parse("dp=16,tp=4")) is None
    assert carry_anchors({"gather": tuple_form, "odd": odd}, SRC, Mesh.parse("dp=16,tp=4")) is None
    # a mesh with an axis the advised one lacks: where the anchors would split along it is not known
    assert carry_anchors({"gather": tuple_form}, Mesh.parse("tp=8"), DST) is None
