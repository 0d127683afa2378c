"""Front ends: model code (a Cell, a factory, a MindFormers YAML) -> OpGraph. Only these import MindSpore or MindFormers."""
