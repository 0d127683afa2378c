"""MindSpore 2.9.0's Reshape strategy-with-cost (ReshapeInfo::SetCostForReshape), pinned to its own log.

Every row is one (input layout, output layout) pair MindSpore printed at INFO level
(``GenerateStrategyCosts] ... The corresponding cost: comp, comm, comm_without_parameter`` in bytes)
while compiling a random net (``rN`` = tests/netgen.py seed N, run through msoracle with GLOG_v=1) or a
hand-written one (``c1``: ReLU / Reshape chain [16,6,4] -> [16,4,6] -> [16,3,8] -> [8,12,2,2] -> [4,96]
on 8 devices, full_batch, float32 — shapes whose refinement is "unexpandable" for most layouts).
Layouts are built from the printed standard fields (size-1 device axes dropped); comments name the net,
the ReshapeInfo and its input strategy, and the features the row exercises.
"""
import pytest

from strategist.vocab.layout import Layout as L
from strategist.engine.reshape_cost import reshape_swc_cost, reshape_swc_logged

# (src, dst, type length, (computation, communication, communication_without_parameter) as logged, bytes)
RECORDS = [
    (L((32, 8, 8), (16,), ((), (), ())), L((256, 8), (16,), ((), ())), 4, (16384, 0, 0)),  # r0 ReshapeInfo22 [[1, 1, 1]]: comm0
    (L((32, 8, 8), (2, 8), ((), (), (0,))), L((256, 8), (2, 8), ((), ())), 4, (32768, 7168, 7168)),  # r0 ReshapeInfo22 [[1, 1, 2]]: comm split->repl bigcomm concat-inner
    (L((8, 16), (8,), ((), ())), L((4, 2, 16), (8,), ((), (), ())), 4, (1024, 0, 0)),  # r1 ReshapeInfo11 [[1, 1]]: comm0
    (L((8, 16), (2, 4), ((), (0,))), L((4, 2, 16), (2, 4), ((), (), ())), 4, (2048, 3072, 3072)),  # r1 ReshapeInfo11 [[1, 2]]: comm split->repl concat-inner
    (L((8,), (8,), ((),)), L((2, 2, 2), (8,), ((), (), ())), 2, (32, 0, 0)),  # r1 ReshapeInfo88 [[1]]: comm0 tl2
    (L((16,), (16,), ((),)), L((4, 4), (16,), ((), ())), 4, (128, 0, 0)),  # r2 ReshapeInfo44 [[1]]: comm0
    (L((16,), (2, 8), ((0,),)), L((4, 4), (2, 8), ((), ())), 4, (128, 3072, 3072)),  # r2 ReshapeInfo44 [[2]]: comm split->repl
    (L((16, 32), (2, 8), ((), (0,))), L((4, 4, 32), (2, 8), ((), (), ())), 4, (8192, 3072, 3072)),  # r3 ReshapeInfo66 [[1, 2]]: comm split->repl concat-inner
    (L((16, 32), (4, 4), ((), (0,))), L((4, 4, 32), (4, 4), ((), (), ())), 4, (6144, 3072, 3072)),  # r3 ReshapeInfo66 [[1, 4]]: comm split->repl concat-inner
    (L((16, 32, 1), (16,), ((), (), ())), L((16, 32), (16,), ((), ())), 4, (4096, 0, 0)),  # r3 ReshapeInfo1313 [[1, 1, 1]]: comm0 size1
    (L((64, 8, 12), (2, 8), ((), (), (0,))), L((512, 12), (2, 8), ((), ())), 4, (98304, 19456, 19456)),  # r4 ReshapeInfo22 [[1, 1, 2]]: comm split->repl bigcomm concat-inner
    (L((64, 8, 12), (4, 4), ((), (), (0,))), L((512, 12), (4, 4), ((), ())), 4, (73728, 16384, 16384)),  # r4 ReshapeInfo22 [[1, 1, 4]]: comm split->repl bigcomm concat-inner
    (L((512, 6), (2, 8), ((), (0,))), L((512, 2, 3), (2, 8), ((), (), ())), 4, (49152, 10240, 10240)),  # r4 ReshapeInfo88 [[1, 2]]: comm split->repl bigcomm concat-inner
    (L((32, 4, 16), (2, 8), ((), (), (0,))), L((128, 16), (2, 8), ((), ())), 4, (32768, 7168, 7168)),  # r10 ReshapeInfo1313 [[1, 1, 2]]: comm split->repl bigcomm concat-inner
    (L((32, 4, 16), (2, 2, 2, 2), ((0,), (1,), (2,))), L((128, 16), (2, 2, 2, 2), ((), ())), 4, (16384, 5632, 5632)),  # r10 ReshapeInfo1313 [[2, 2, 2]]: comm split->repl bigcomm 3ops concat-inner
    (L((32, 4, 32), (2, 2, 2, 2), ((0,), (1,), (2,))), L((2, 16, 4, 32), (2, 2, 2, 2), ((), (), (), ())), 4, (32768, 10240, 10240)),  # r11 ReshapeInfo33 [[2, 2, 2]]: comm split->repl bigcomm 3ops concat-inner
    (L((32, 4, 32), (2, 2, 4), ((0,), (1,), (2,))), L((2, 16, 4, 32), (2, 2, 4), ((), (), (), ())), 4, (20480, 6656, 6656)),  # r11 ReshapeInfo33 [[2, 2, 4]]: comm split->repl bigcomm 3ops concat-inner
    (L((2, 16, 4, 32), (2, 2, 2, 2), ((), (0,), (1,), (2,))), L((128, 32), (2, 2, 2, 2), ((), ())), 4, (40960, 10240, 10240)),  # r11 ReshapeInfo55 [[1, 2, 2, 2]]: comm split->repl bigcomm 3ops concat-inner
    (L((32, 6), (16,), ((0,), ())), L((192,), (16,), ((),)), 4, (191, 3072, 3072)),  # r12 ReshapeInfo22 [[16, 1]]: comm split->repl tiebreak
    (L((32, 6), (16,), ((), ())), L((192,), (2, 8), ((0,),)), 4, (2304, 0, 0)),  # r12 ReshapeInfo22 [[1, 1]]: comm0 repl->split devdiff
    (L((4, 4, 32), (4,), ((0,), (), ())), L((4, 128), (4,), ((), ())), 4, (2047, 3072, 3072)),  # r13 ReshapeInfo22 [[4, 1, 1]]: comm split->repl tiebreak
    (L((4, 4, 32), (2, 2), ((0,), (1,), ())), L((4, 128), (4,), ((), ())), 4, (5120, 3072, 3072)),  # r13 ReshapeInfo22 [[2, 2, 1]]: comm split->repl devdiff concat-inner
    (L((16, 8, 6), (2, 2, 2), ((0,), (1,), (2,))), L((128, 6), (2, 2, 2), ((), ())), 4, (6144, 3072, 3072)),  # r16 ReshapeInfo66 [[2, 2, 2]]: comm split->repl 3ops concat-inner
    (L((16, 8, 6), (8,), ((0,), (), ())), L((128, 6), (8,), ((), ())), 4, (1535, 3072, 3072)),  # r16 ReshapeInfo66 [[8, 1, 1]]: comm split->repl tiebreak
    (L((8, 8, 16), (8,), ((), (), ())), L((2, 32, 16), (2, 4), ((), (), (0,))), 4, (12288, 0, 0)),  # r19 ReshapeInfo44 [[1, 1, 1]]: comm0 repl->split devdiff
    (L((8, 8, 16), (8,), ((), (), ())), L((2, 32, 16), (4, 2), ((), (), (0,))), 4, (12288, 0, 0)),  # r19 ReshapeInfo44 [[1, 1, 1]]: comm0 repl->split devdiff
    (L((1, 4, 16), (16,), ((), (), ())), L((1, 16, 4), (16,), ((), (), ())), 4, (512, 0, 0)),  # r20 ReshapeInfo66 [[1, 1, 1]]: comm0 size1
    (L((1, 4, 16), (2, 8), ((), (), (0,))), L((1, 16, 4), (2, 8), ((), (), ())), 4, (1024, 3072, 3072)),  # r20 ReshapeInfo66 [[1, 1, 2]]: comm split->repl size1 concat-inner
    (L((16, 4), (16,), ((), ())), L((2, 32), (2, 8), ((), (0,))), 4, (768, 0, 0)),  # r20 ReshapeInfo88 [[1, 1]]: comm0 repl->split devdiff
    (L((32, 8), (2, 4), ((0,), ())), L((2, 16, 8), (2, 4), ((), (), (0,))), 4, (2560, 3072, 3072)),  # r25 ReshapeInfo55 [[2, 1]]: comm both-split both-split-comm
    (L((32, 8), (4, 2), ((0,), ())), L((2, 16, 8), (2, 4), ((), (), (0,))), 4, (2816, 3072, 3072)),  # r25 ReshapeInfo55 [[4, 1]]: comm devdiff both-split both-split-comm 3ops concat-inner
    (L((16, 4, 4), (2, 8), ((), (), (0,))), L((16, 2, 2, 4), (4, 4), ((0,), (), (), ())), 4, (5120, 3072, 3072)),  # r30 ReshapeInfo66 [[1, 1, 2]]: comm devdiff both-split both-split-comm 3ops concat-inner
    (L((16, 4, 4), (4, 4), ((), (), (0,))), L((16, 2, 2, 4), (4, 4), ((0,), (), (), ())), 4, (3328, 3072, 3072)),  # r30 ReshapeInfo66 [[1, 1, 4]]: comm both-split both-split-comm concat-inner
    (L((16, 2, 8, 4), (16,), ((0,), (), (), ())), L((256, 4), (8, 2), ((0,), ())), 4, (2047, 3072, 3072)),  # r34 ReshapeInfo22 [[16, 1, 1, 1]]: comm devdiff tiebreak both-split both-split-comm concat-inner
    (L((16, 2, 4, 4), (2, 8), ((), (), (), (0,))), L((16, 8, 4, 1), (2, 8), ((0,), (), (), ())), 4, (9216, 3072, 3072)),  # r34 ReshapeInfo66 [[1, 1, 1, 2]]: comm size1 both-split both-split-comm concat-inner
    (L((32, 4, 8), (16,), ((), (), ())), L((128, 8), (16,), ((), ())), 2, (4096, 0, 0)),  # r64 ReshapeInfo1717 [[1, 1, 1]]: comm0 tl2
    (L((32, 4, 8), (2, 8), ((), (), (0,))), L((128, 8), (2, 8), ((), ())), 2, (8192, 3072, 3072)),  # r64 ReshapeInfo1717 [[1, 1, 2]]: comm split->repl concat-inner tl2
    (L((16, 3, 8), (8,), ((), (), ())), L((8, 12, 2, 2), (4, 2), ((), (0,), (), ())), 4, (4608, 0, 0)),  # c1 ReshapeInfo44 [[1, 1, 1]]: unexpandable comm0 repl->split devdiff
    (L((16, 3, 8), (8,), ((), (), ())), L((8, 12, 2, 2), (4, 2), ((), (0,), (), (1,))), 4, (6144, 0, 0)),  # c1 ReshapeInfo44 [[1, 1, 1]]: unexpandable comm0 repl->split devdiff
    (L((16, 4, 6), (8,), ((), (), ())), L((16, 3, 8), (8,), ((), (), ())), 4, (3072, 0, 0)),  # c1 ReshapeInfo66 [[1, 1, 1]]: unexpandable comm0
    (L((16, 4, 6), (4, 2), ((), (0,), ())), L((16, 3, 8), (2, 4), ((0,), (), (1,))), 4, (9984, 3072, 3072)),  # c1 ReshapeInfo66: unexpandable comm devdiff both-split
    (L((16, 6, 4), (2, 2, 2), ((0,), (1,), (2,))), L((16, 4, 6), (4, 2), ((), (0,), ())), 4, (7296, 3072, 3072)),  # c1 ReshapeInfo88: unexpandable comm devdiff both-split
    (L((16, 3, 8), (8,), ((0,), (), ())), L((8, 12, 2, 2), (4, 2), ((), (0,), (), ())), 4, (4991, 3072, 3072)),  # c1 ReshapeInfo44: unexpandable comm devdiff tiebreak
]


@pytest.mark.parametrize("src,dst,type_len,logged", RECORDS)
def test_logged_bytes(src, dst, type_len, logged):
    assert reshape_swc_logged(src, dst, type_len) == tuple(float(x) for x in logged)


def _elements(src, type_len, logged):
    """Undo the tie-break and refinement where the log determines the raw value (comm 3072 does not)."""
    comp, comm, _ = logged
    tb = 1.0 if src.split(0) == src.device_num else 0.0
    comm_el = None
    if comm == 0:
        comm_el = 0.0
    elif comm > 3072:
        comm_el = (comm - 1024 + tb) / type_len
    return comm_el, (comp + tb) / type_len


@pytest.mark.parametrize("src,dst,type_len,logged", RECORDS)
def test_elements(src, dst, type_len, logged):
    comm_el, comp_el = _elements(src, type_len, logged)
    comm, comp = reshape_swc_cost(src, dst)
    assert comp == comp_el
    if comm_el is not None:
        assert comm == comm_el
    else:
        assert 0 < comm * type_len <= 2048


def test_table_is_distinct_and_broad():
    assert len({(s, d) for s, d, _, _ in RECORDS}) == len(RECORDS) >= 25


def test_not_applicable():
    a = L((8, 4), (8,), ((0,), ()))
    assert reshape_swc_cost(a, L((16, 4), (8,), ((0,), ()))) is None          # element counts differ
    assert reshape_swc_cost(L((8, 4), (2, 4), ((0,), ()), partial=(1,)), L((32,), (8,), ((0,),))) is None
