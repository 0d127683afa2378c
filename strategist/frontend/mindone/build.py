"""A mindone.transformers model from its ``transformers`` config, built as strategist traces it.

:func:`resolve_class` turns ``llama`` or ``LlamaForCausalLM`` into the model type and mindone's class,
:func:`mindone_config` makes the config with strategist's options applied, :func:`build_mindone` builds the model
(weights lazy, init-time kernels on the host) with its ``example_inputs``. MindSpore, mindone and ``transformers``
are imported inside the functions that use them: importing this module loads none of them.
"""
from __future__ import annotations

import contextlib
import difflib
import sys

from ...errors import InputSpecError, ModelLoadError

PREFIX = "mindone:"
#: the sequence length a model is traced with when neither ``seq`` nor the config's own limit says
DEFAULT_SEQ = 4096
INSTALL = "pip install 'strategist[mindone]' (mindone==0.5.0, transformers==4.57.1)"
#: strategist's own model options (every other key is a config key)
OPTIONS = ("layers", "seq", "batch", "addmm")


def is_mindone_ref(target: str) -> bool:
    """``mindone:<model_type>`` or ``mindone:<ClassName>``."""
    return isinstance(target, str) and target.startswith(PREFIX)


def import_mindone():
    """``mindone.transformers``, imported with what it and ``transformers`` print kept off stdout."""
    if "mindone.transformers" in sys.modules:
        return sys.modules["mindone.transformers"]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import mindone.transformers as mt
    except ImportError as err:
        raise ModelLoadError(f"mindone.transformers cannot be imported ({err}): {INSTALL}") from None
    return mt


def _mappings():
    from mindone.transformers.models.auto import modeling_auto as auto
    return auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_MAPPING_NAMES


def resolve_class(name: str) -> tuple[str, type]:
    """``llama`` -> ``("llama", LlamaForCausalLM)`` (the causal LM of the model type, else its base model);
    ``BertModel`` -> ``("bert", BertModel)``."""
    mt = import_mindone()
    causal, base = _mappings()
    from mindspore import nn
    cls = getattr(mt, name, None) if name[:1].isupper() else None
    if isinstance(cls, type) and issubclass(cls, nn.Cell):
        model_type = getattr(getattr(cls, "config_class", None), "model_type", "") or ""
        if not model_type:
            raise ModelLoadError(f"mindone:{name} has no config class with a model_type: give its model type "
                                 f"(e.g. mindone:llama)")
        return model_type, cls
    cls_name = causal.get(name) or base.get(name)
    if cls_name is None:
        known = sorted(set(causal) | set(base))
        close = difflib.get_close_matches(name, known, n=3) or \
            difflib.get_close_matches(name, [c for c in dir(mt) if c[:1].isupper()], n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else f" (model types: {', '.join(known[:12])}, ...)"
        raise ModelLoadError(f"mindone.transformers has no model {name!r}: write mindone:<model_type> or "
                             f"mindone:<ClassName>{hint}")
    cls = getattr(mt, cls_name, None)
    if cls is None:
        raise ModelLoadError(f"mindone.transformers names {cls_name} for {name!r} but does not export it")
    return name, cls


def default_attention(cls) -> str:
    """``flash_attention_2`` (``FlashAttentionScore``, as the model trains on Ascend) where the class supports it,
    else ``eager``."""
    fa = getattr(cls, "_supports_flash_attn", False) or getattr(cls, "_supports_flash_attn_2", False)
    return "flash_attention_2" if fa else "eager"


def mindone_config(model_type: str, kwargs: dict, attention: str = "eager"):
    """The ``transformers`` config of ``model_type`` with ``kwargs`` applied: ``layers`` sets
    ``num_hidden_layers``, any other key but ``seq``/``batch`` the config key of that name (unknown keys are an
    error). Caches are off and outputs are tuples (a training forward, no ``ModelOutput`` for graph mode to run in
    Python); attention is ``attention`` unless ``attn_implementation`` is given."""
    import_mindone()
    from transformers import AutoConfig
    with contextlib.redirect_stdout(sys.stderr):
        cfg = AutoConfig.for_model(model_type)
    cfg.return_dict = False
    keys = {k: v for k, v in kwargs.items() if k not in OPTIONS}
    attn = keys.pop("attn_implementation", attention)
    for key, value in keys.items():
        if not hasattr(cfg, key):
            close = difflib.get_close_matches(key, list(cfg.to_dict()), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InputSpecError(f"the {model_type} config has no key {key!r}{hint}: --set KEY=VALUE takes the "
                                 f"config's keys, and layers, seq, batch")
        setattr(cfg, key, value)
    if kwargs.get("layers") is not None:
        cfg.num_hidden_layers = _positive("layers", kwargs["layers"])
    cfg.use_cache = False
    cfg._attn_implementation = attn
    return cfg


def _positive(key: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputSpecError(f"bad --{key} {value!r}: a positive integer")
    return value


def _default_seq(cfg) -> int:
    limit = getattr(cfg, "max_position_embeddings", None)
    return min(int(limit), DEFAULT_SEQ) if isinstance(limit, int) and limit > 0 else DEFAULT_SEQ


def build_mindone(name: str, kwargs: dict | None = None):
    """The mindone model ``name`` (:func:`resolve_class`) built from its config (:func:`mindone_config`; attention
    :func:`default_attention`), weights never allocated, with ``example_inputs`` ``input_ids: int32[batch, seq]`` (``seq`` defaults to the config's
    ``max_position_embeddings`` up to 4096, ``batch`` to 1). An encoder-decoder model is traced by its encoder class
    (``mindone:T5EncoderModel``): strategist's inputs are the leading ones of ``construct``."""
    kwargs = dict(kwargs or {})
    model_type, cls = resolve_class(name)
    cfg = mindone_config(model_type, kwargs, default_attention(cls))
    seq = _positive("seq", kwargs["seq"]) if kwargs.get("seq") is not None else _default_seq(cfg)
    batch = _positive("batch", kwargs["batch"]) if kwargs.get("batch") is not None else 1
    from mindspore.nn.utils import no_init_parameters
    from ..hostinit import host_kernels, kernel_error
    try:
        with contextlib.redirect_stdout(sys.stderr), no_init_parameters(), host_kernels():
            cell = cls(cfg)
    except (InputSpecError, ModelLoadError):
        raise
    except Exception as err:        # mindone's code: report, don't trace back
        known = kernel_error(f"mindone:{name} ({cls.__name__})", err)
        if known is not None:
            raise known from None
        msg = " ".join(str(err).split())[:300]
        raise ModelLoadError(f"building mindone:{name} ({cls.__name__}) failed: {type(err).__name__}: {msg} "
                             f"(check the --set config keys)") from None
    if kwargs.get("addmm") is not None:
        if kwargs["addmm"] != "matmul":
            raise InputSpecError(f"bad addmm={kwargs['addmm']!r}: addmm=matmul (Conv1D as MatMul + Add) or leave it")
        _conv1d_as_matmul(cell)
    cell.example_inputs = {"input_ids": f"int32[{batch},{seq}]"}
    if "attn_implementation" not in kwargs and cfg._attn_implementation != "eager":
        # the default flash attention: where mindone's code for it does not compile, its eager attention
        object.__setattr__(cell, FALLBACK, lambda: build_mindone(name, {**kwargs, "attn_implementation": "eager"}))
    return cell


#: the attribute of a built model holding how to build it again with eager attention (the loader's fallback when
#: the default flash attention does not compile)
FALLBACK = "strategist_eager_fallback"


def _conv1d_as_matmul(cell) -> int:
    """``addmm=matmul``: each of mindone's ``Conv1D`` (GPT-2's projections, ``mint.addmm``: no OperatorInfo in
    MindSpore) computes ``x @ w + b`` with a MatMul and an Add it holds, which MindSpore shards: the rewrite
    :mod:`strategist.frontend.unsharded` suggests, to price the model both ways. Returns how many were changed."""
    from mindspore import ops
    from mindone.transformers.mindspore_utils import Conv1D
    n = 0
    for _, c in cell.cells_and_names():
        if type(c) is Conv1D:
            c.__class__ = _matmul_conv1d()
            c.matmul = ops.MatMul()
            c.add = ops.Add()
            n += 1
    return n


_MATMUL_CONV1D = []


def _matmul_conv1d():
    """``Conv1D`` computing with a held MatMul and Add (made once, on first use: it subclasses mindone's class)."""
    if not _MATMUL_CONV1D:
        from mindone.transformers.mindspore_utils import Conv1D

        class Conv1DMatMul(Conv1D):
            """mindone's Conv1D as MatMul + Add (strategist's ``addmm=matmul``)."""

            def construct(self, x):
                size_out = x.shape[:-1] + (self.nf,)
                x = self.add(self.matmul(x.view(-1, x.shape[-1]), self.weight), self.bias)
                return x.view(size_out)
        _MATMUL_CONV1D.append(Conv1DMatMul)
    return _MATMUL_CONV1D[0]
