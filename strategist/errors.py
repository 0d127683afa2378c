"""Typed errors. Every user mistake is one exception class carrying a one-line message
that names the problem and the fix; the CLI prints it and exits with code 2."""


class StrategistError(Exception):
    """Base class: ``str(err)`` is a complete one-line message for the user."""

    exit_code = 2


class ModelLoadError(StrategistError):
    """The model file, its import, or the named Cell/factory cannot be loaded."""


class InputSpecError(StrategistError):
    """An ``--input`` or ``--kwargs`` value is malformed."""


class CompileError(StrategistError):
    """MindSpore rejected the model (inputs the Cell refuses, graph-syntax errors, ...)."""


class StrategyError(StrategistError):
    """A strategy or layout is invalid for its operator (rank, divisibility, device count)."""


class MeshError(StrategistError):
    """A device mesh or hardware profile is malformed."""


class RulesError(StrategistError):
    """A rules or anchors YAML file is malformed."""


class VerifyError(StrategistError):
    """``strategist verify`` could not get MindSpore's own answer: MindSpore rejected the configuration,
    crashed, timed out, or the machine lacks what the CPU-only recipe needs (a C compiler)."""


class PropagationError(StrategistError):
    """MindSpore's own sharding propagation fails on this configuration (it raises during its search:
    an edge no candidate pair can cost, a redistribution it cannot build), so strategist refuses it too."""


class SourceEditError(StrategistError):
    """A file cannot be edited as advised."""
