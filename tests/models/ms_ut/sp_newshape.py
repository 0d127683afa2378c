"""Re-expressions of MindSpore's UT tests/ut/python/parallel/test_auto_parallel_sp_newshape.py
(auto_parallel, search_mode="sharding_propagation", dataset_strategy="full_batch" from setup_function; the UT compiles
the bare net).

* ScatterUpdateSelfDefine   <- test_config_layout_for_ops_success (Net, device_num=2, Layout (2,1) dp,mp,
  TensorScatterUpdate with self_define_shard=True)
* AddSelfDefine             <- test_config_layout_for_parallel_supported_ops_success (Net2, device_num=2)
* AddTupleOneInput          <- test_config_layout_for_parallel_supported_ops_failed (in_strategy ((2,1),) only;
  the UT expects RuntimeError)
* ScatterUpdateNoAttr       <- test_config_layout_for_ops_no_attr (self_define_shard=False; UT expects RuntimeError)
* ScatterUpdateNotDividable <- test_config_layout_for_ops_not_dividable (device_num=4, Layout (4,1), attr False;
  UT expects RuntimeError)
"""
from mindspore import Layout, nn, ops


class _ScatterNet(nn.Cell):
    def __init__(self, in_layout, out_layout, self_define_shard=True):
        super().__init__()
        self.tensor_scatter_update = ops.TensorScatterUpdate()
        self.tensor_scatter_update.shard(in_strategy=in_layout, out_strategy=out_layout)
        self.tensor_scatter_update.add_prim_attr("self_define_shard", self_define_shard)
        self.relu = ops.ReLU()
        self.mul = ops.Mul()
        self.example_inputs = {"input_x": "float32[2,2,3]", "indices": "int32[2,2,2]", "update": "float32[2,2,3]"}

    def construct(self, input_x, indices, update):
        out = self.relu(input_x)
        out = self.tensor_scatter_update(out, indices, update)
        return self.mul(out, 2)


def _scatter_layouts(dp):
    lay = Layout((dp, 1), ("dp", "mp"))
    return (lay("dp", "mp", "None"),) * 3, (lay("dp", "mp", "None"),)


class ScatterUpdateSelfDefine(_ScatterNet):
    def __init__(self):
        super().__init__(*_scatter_layouts(2), True)


class ScatterUpdateNoAttr(_ScatterNet):
    def __init__(self):
        super().__init__(*_scatter_layouts(2), False)


class ScatterUpdateNotDividable(_ScatterNet):
    def __init__(self):
        super().__init__(*_scatter_layouts(4), False)


class _AddNet(nn.Cell):
    def __init__(self, in_layout, out_layout, self_define_shard=True):
        super().__init__()
        self.add = ops.Add()
        self.add.shard(in_strategy=in_layout, out_strategy=out_layout)
        self.add.add_prim_attr("self_define_shard", self_define_shard)
        self.relu = ops.ReLU()
        self.mul = ops.Mul()
        self.example_inputs = {"x": "float32[2,2]", "y": "float32[2,2]", "z": "float32[2,2]"}

    def construct(self, x, y, z):
        return self.mul(self.add(self.relu(x), y), z)


class AddSelfDefine(_AddNet):
    def __init__(self):
        lay = Layout((2, 1), ("dp", "mp"))
        super().__init__((lay("dp", "mp"), lay("dp", "mp")), (lay("dp", "mp"),))


class AddTupleOneInput(_AddNet):
    def __init__(self):
        super().__init__(((2, 1),), None)
