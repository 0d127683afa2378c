"""Anchors -- the operators a propagation starts from, configured by a strategy tuple or ``mindspore.Layout`` --
with where each comes from (:class:`Origin`), and how a searched operator got its strategy (:class:`Direction`).
Both enums are strings (``StrEnum``): they print, compare and serialise as their values."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .graph import ShardLayout

#: the dataset's name as a provenance root and an edge source (MindSpore's VirtualDataset)
DATASET = "<dataset>"


class Origin(StrEnum):
    """Where an anchor comes from."""

    USER = "user"                        # an anchors file, or a hand-made plan
    ADVISOR = "advisor"                  # strategist's advice
    MODEL = "model"                      # a shard() in the model's source
    MINDFORMERS = "mindformers"          # a MindFormers sharding_propagation() anchor
    #: a MindFormers shard() read in semi_auto_parallel mode, where every operator is configured and MindSpore
    #: takes a Layout on operators whose Layout its propagation refuses (their refusal is SetCostUnderLayout's)
    SEMI_AUTO = "mindformers semi_auto"
    #: an operator the model's own code sets in every parallel build (MindFormers' CrossEntropyLoss: its
    #: ``logits + 0`` / ``labels + 0``, which only a parallel build has, its softmax, NLL and reductions): part of
    #: the model, in every plan, never an advice anchor
    PARALLEL_ONLY = "model, parallel build"
    CAST = "cast"                        # a Cast's strategy as MindSpore's parallel graph keeps it
    SEMI = "semi"                        # a strategy semi_auto_parallel's own rules give
    SEMI_AUTO_BATCH = "semi_auto batch parallel"          # semi_auto's batch strategy for an unconfigured op
    SEMI_AUTO_FOLLOW = "semi_auto cast follows its input"  # ... and an unconfigured Cast's, its input's


class Direction(StrEnum):
    """How an operator got its strategy (:class:`strategist.engine.plan.Provenance`)."""

    SEED = "seed"                        # an anchor, or a seed of MindSpore's BFS
    INPUTS = "inputs"                    # from its inputs' layouts once every one arrived
    FORWARD = "forward"                  # from its producer's output, forward along an edge
    BACKWARD = "backward"                # from its consumer's input, backward along an edge
    PARAMETER = "parameter"              # from a shared Parameter's other reader
    DEFAULT = "default"                  # no search reached it: MindSpore's default strategy
    #: a Cast in MindSpore's parallel graph: its searched strategy dropped, it passes the layout its input
    #: arrives in on (:func:`strategist.cost.pricing.cast_overlay`)
    CAST_PASS = "passes its input on"
    SEMI_AUTO_BATCH = "semi_auto batch parallel"          # semi_auto_parallel: no search decided it
    SEMI_AUTO_FOLLOW = "semi_auto cast follows its input"


@dataclass(frozen=True)
class Anchor:
    """A configured operator: a strategy tuple or ``mindspore.Layout`` per input (and optionally output)."""

    op: str
    strategy: tuple | None = None
    layouts: tuple[ShardLayout, ...] | None = None
    out_strategy: tuple | None = None
    out_layouts: tuple[ShardLayout, ...] | None = None
    origin: Origin = Origin.USER

    def __post_init__(self):
        object.__setattr__(self, "origin", Origin(self.origin))

    def describe(self) -> str:
        if self.layouts is not None:
            return "(" + ", ".join(f"layout({l})" for l in self.layouts) + ")"
        return str(self.strategy)
