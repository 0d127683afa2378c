"""Reading YAML with positions, so a bad file is reported by line."""
from __future__ import annotations

import yaml

from ..errors import RulesError


def compose_file(path: str, what: str):
    """The YAML node tree of ``path`` (None if empty); RulesError naming the file and line otherwise."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise RulesError(f"cannot read {what} {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise RulesError(f"{path}: not UTF-8 text (byte {err.start}); save the {what} as UTF-8") from None
    try:
        return yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        why = " ".join(str(getattr(err, "problem", None) or err).split())   # one line, whatever yaml says
        raise RulesError(f"{path}{line}: not valid YAML ({why})") from None
