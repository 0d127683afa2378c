"""mindone.transformers models (MindSpore ports of Hugging Face architectures) as strategist models.

``mindone:<model_type>`` (``mindone:llama``, ``mindone:qwen2``: the architecture's causal language model, else its
base model) or ``mindone:<ClassName>`` (``mindone:BertModel``) builds that class from the ``transformers`` config of
the model type, with strategist's model options: ``layers=N`` (``num_hidden_layers``), ``seq=S`` and ``batch=B``
(the ``input_ids[B, S]`` it is traced with) and any config key (``hidden_size=4096``). The model's weights are never
allocated, its init-time computations the CPU backend has no kernels for run on the host
(:mod:`strategist.frontend.hostinit`), and what ``transformers`` and mindone print goes to stderr.

:mod:`.build` holds the build; what other modules use is imported from here.
"""
from __future__ import annotations

from .build import PREFIX, build_mindone, is_mindone_ref, mindone_config, resolve_class

__all__ = ["PREFIX", "build_mindone", "is_mindone_ref", "mindone_config", "resolve_class"]
