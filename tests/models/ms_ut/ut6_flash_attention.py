"""Re-expressions of FlashAttentionScore UTs in MindSpore's tests/ut/python/parallel/test_flash_attention_score_info.py.
All: auto_parallel, search_mode="sharding_propagation", global_rank 0, dataset_strategy "full_batch"
(setup_function), nothing configured unless noted. The UTs compile GradWrap(NetWithLoss(VirtualLoss)) or the
bare Net under semi_auto_parallel (or auto_parallel with the default search_mode); here the bare Net compiles under
sharding_propagation, the FlashAttentionScore's in_strategy (the UT's ``Net(..., dp, mp, sp)`` tuple, or its Layout)
being the one anchor: there is no other operator to shard, so MindSpore's answer is the FA's strategy checked
and laid out, with the graph inputs' (pse, attn_mask) redistribution onto it.

The UT's shapes (B=8, N=16, S=1024, D=128/192) are cut to B=8, N=8, S=128, D=64 (the split factors all still
divide); ``keep_prob`` is 1.0 unless noted, so no DropoutGenMask (the UT's keep_prob=0.9 mask is
``Reshape(DropoutGenMask((B, N, S, S)), (B, N, S, 128))``, valid only for S=1024: with S=128 it is
``(B, N, S, S // 8)``). The mask is ``attn_mask`` [B, 1, S, S] uint8 (sparse_mode 0), or the compressed
[2048, 2048] one (sparse_mode 2/3/4); ``real_shift`` (pse) is [B, N, S, S] float16 when ``with_real_shift``.

* FaBSH8            <- test_flash_attention_semi_auto_parallel (BSH, use_mqa=False, with_real_shift=True; 8 devices,
  dp=2, mp=4: ((2,1,4), (2,1,4), (2,1,4), (2,4,1,1), (2,1,1,1)); keep_prob 1.0 (the UT's 0.9 below: FaBSHDrop8)
* FaBSHMqa8         <- test_flash_attention_semi_auto_parallel (BSH, use_mqa=True (key/value [B,S,D], one kv head),
  with_real_shift=False: ((2,1,4), (2,1,1), (2,1,1), (2,1,1,1)))
* FaBNSD8           <- test_flash_attention_semi_auto_parallel (BNSD, with_real_shift=True:
  ((2,4,1,1), (2,4,1,1), (2,4,1,1), (2,4,1,1), (2,1,1,1)))
* FaBNSDNoPse8      <- as FaBNSD8 with with_real_shift=False (the mask the one optional input)
* FaBSNDSp8         <- test_flash_attention_with_seq_parallel (BSND, dp=mp=sp=2, use_mqa=False, with_real_shift=True:
  ((2,2,2,1), (2,1,2,1), (2,1,2,1), (2,2,2,1), (2,1,2,1)))
* FaSBHSp8          <- test_flash_attention_with_seq_parallel (SBH, dp=mp=sp=2, with_real_shift=False:
  ((2,2,2), (1,2,2), (1,2,2), (2,1,2,1)))
* FaBSHCompressed8  <- test_flash_attention_semi_auto_parallel_with_compressed_mask (BSH, sparse_mode=2, dp=2, mp=4;
  the compressed [2048, 2048] mask (1, 1); pre_tokens 512, next_tokens 0; with_real_shift=True (the UT's default))
* FaBSHGqaLayout8   <- test_flash_attention_bsh_layout_with_gqa (128 devices, dp, sp, mp = 2, 8, 8, N1=64, N2=8; here 8
  devices, dp=sp=mp=2, N1=8, N2=2 (GQA 4:1): Layout (dp, sp, mp): query ("dp", None, ("sp", "mp")), key/value
  ("dp", None, "mp"), the compressed mask (None, None); sparse_mode 2, keep_prob 1.0, no real_shift)
* FaBSHDrop8        <- test_flash_attention_semi_auto_parallel with the UT's keep_prob 0.9 (BSH, with_real_shift=False):
  DropoutGenMask + Reshape make the drop mask input (B, N, S, S // 8); strategy ((2,1,4), (2,1,4), (2,1,4),
  (2,4,1,1), (2,1,1,1))
* FaBSHAuto8        <- test_flash_attention_auto_parallel (BSH, use_mqa=False, with_real_shift=True, keep_prob 1.0;
  nothing configured: the UT's auto_parallel runs its default search_mode, here sharding_propagation)
* FaBNSDMqaAuto8    <- test_flash_attention_auto_parallel (BNSD, use_mqa=True, with_real_shift=False, keep_prob 1.0;
  nothing configured)
"""
import mindspore as ms
from mindspore import Layout, Tensor, nn
from mindspore.ops import operations as P
from mindspore.ops.operations.nn_ops import FlashAttentionScore

B, N, S, D = 8, 8, 128, 64
_COMPRESSED = (2, 3, 4, 5, 6, 7, 8)


def _inputs(layout, n_kv=N, with_real_shift=True, sparse_mode=0, n_q=N):
    if layout == "BSH":
        q, kv = [B, S, n_q * D], [B, S, n_kv * D]
    elif layout == "SBH":
        q, kv = [S, B, n_q * D], [S, B, n_kv * D]
    elif layout == "BNSD":
        q, kv = [B, n_q, S, D], [B, n_kv, S, D]
    else:   # BSND
        q, kv = [B, S, n_q, D], [B, S, n_kv, D]
    f = lambda s: "float16[" + ",".join(map(str, s)) + "]"  # noqa: E731
    ins = {"query": f(q), "key": f(kv), "value": f(kv)}
    if with_real_shift:
        ins["real_shift"] = f([B, n_q, S, S])
    ins["attn_mask"] = "uint8[2048,2048]" if sparse_mode in _COMPRESSED else f"uint8[{B},1,{S},{S}]"
    return ins


def _strategy(layout, dp, mp, sp=1, use_mqa=False, with_real_shift=True, keep_prob=1.0, sparse_mode=0):
    """The UT's Net(..., dp=dp, mp=mp, sp=sp) in_strategy tuple."""
    kv = 1 if use_mqa else mp
    stra = {"BSH": ((dp, sp, mp), (dp, 1, kv), (dp, 1, kv)),
            "SBH": ((sp, dp, mp), (1, dp, kv), (1, dp, kv)),
            "BNSD": ((dp, mp, sp, 1), (dp, kv, 1, 1), (dp, kv, 1, 1)),
            "BSND": ((dp, sp, mp, 1), (dp, 1, kv, 1), (dp, 1, kv, 1))}[layout]
    if with_real_shift:
        stra += ((dp, mp, sp, 1),)
    if keep_prob < 1.0:
        stra += ((dp, mp, sp, 1),)
    stra += ((1, 1),) if sparse_mode in _COMPRESSED else ((dp, 1, sp, 1),)
    return stra


class _FaNet(nn.Cell):
    LAYOUT = "BSH"
    MQA = False
    SHIFT = True
    SPARSE = 0
    KEEP = 1.0
    DP_MP_SP = (2, 4, 1)        # None: nothing configured

    def __init__(self):
        super().__init__()
        comp = self.SPARSE in _COMPRESSED
        self.fa_op = FlashAttentionScore(head_num=N, keep_prob=self.KEEP, pre_tokens=512 if comp else 2147483647,
                                         next_tokens=0 if comp else 2147483647, input_layout=self.LAYOUT,
                                         sparse_mode=self.SPARSE)
        self.reshape = P.Reshape()
        self.drop_gen_mask = P.DropoutGenMask()
        self.keep_prob = Tensor(self.KEEP, ms.float16)
        stra = self.in_strategy()
        if stra is not None:
            self.fa_op.shard(in_strategy=stra)
        self.example_inputs = _inputs(self.LAYOUT, 1 if self.MQA else N, self.SHIFT, self.SPARSE)

    def in_strategy(self):
        if self.DP_MP_SP is None:
            return None
        dp, mp, sp = self.DP_MP_SP
        return _strategy(self.LAYOUT, dp, mp, sp, self.MQA, self.SHIFT, self.KEEP, self.SPARSE)

    def _drop_mask(self):
        if self.KEEP < 1.0:
            return self.reshape(self.drop_gen_mask((B, N, S, S), self.keep_prob), (B, N, S, S // 8))
        return None


class _FaShift(_FaNet):
    def construct(self, query, key, value, real_shift, attn_mask):
        _, _, _, out = self.fa_op(query, key, value, real_shift, self._drop_mask(), None, attn_mask, None)
        return out


class _FaNoShift(_FaNet):
    SHIFT = False

    def construct(self, query, key, value, attn_mask):
        _, _, _, out = self.fa_op(query, key, value, None, self._drop_mask(), None, attn_mask, None)
        return out


class FaBSH8(_FaShift):
    pass


class FaBSHMqa8(_FaNoShift):
    MQA = True


class FaBNSD8(_FaShift):
    LAYOUT = "BNSD"


class FaBNSDNoPse8(_FaNoShift):
    LAYOUT = "BNSD"


class FaBSNDSp8(_FaShift):
    LAYOUT = "BSND"
    DP_MP_SP = (2, 2, 2)


class FaSBHSp8(_FaNoShift):
    LAYOUT = "SBH"
    DP_MP_SP = (2, 2, 2)


class FaBSHCompressed8(_FaShift):
    SPARSE = 2


class FaBSHGqaLayout8(_FaNoShift):
    SPARSE = 2
    N2 = 2

    def __init__(self):
        super().__init__()
        self.example_inputs = _inputs("BSH", self.N2, False, self.SPARSE)

    def in_strategy(self):
        layout = Layout((2, 2, 2), ("dp", "sp", "mp"))
        return (layout("dp", "None", ("sp", "mp")), layout("dp", "None", "mp"), layout("dp", "None", "mp"),
                layout("None", "None"))


class FaBSHDrop8(_FaNoShift):
    KEEP = 0.9


class FaBSHAuto8(_FaShift):
    DP_MP_SP = None


class FaBNSDMqaAuto8(_FaNoShift):
    LAYOUT = "BNSD"
    MQA = True
    DP_MP_SP = None
