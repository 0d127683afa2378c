"""Lines the edits made longer than the file's limit, wrapped at their top-level commas (the file's own long lines
are left as they are)."""
from __future__ import annotations


#: the longest line the diff writes: MindFormers' own lint limit (its .pylintrc max-line-length)
LINE_LIMIT = 120


def wrap_long_lines(code: str, original: str, limit: int = LINE_LIMIT) -> str:
    r"""Each ``shard(...)`` line the edit wrote (one not in ``original``) longer than ``limit``, broken after
    ``shard(`` with a hanging indent, and if that is not enough, one argument a line; a line no break brings
    under the limit is left whole.

    >>> print(wrap_long_lines("    self.mm.shard(((config.data_parallel_size * config.tensor_model_parallel_size,"
    ...                       " 1), (1, 1)))\n", "", limit=90))
        self.mm.shard(
            ((config.data_parallel_size * config.tensor_model_parallel_size, 1), (1, 1)))
    <BLANKLINE>
    """
    old = set(original.splitlines())
    out = []
    for line in code.splitlines(keepends=True):
        body = line.rstrip("\n")
        if len(body) > limit and body not in old:
            body = _wrapped(body, limit) or body
            line = body + line[len(line.rstrip("\n")):]
        out.append(line)
    return "".join(out)


def _wrapped(line: str, limit: int) -> str | None:
    """``line`` (one ``x.shard(ARGS)`` statement) broken to fit ``limit``, or None."""
    indent = line[:len(line) - len(line.lstrip())]
    head, sep, rest = line.partition(".shard(")
    if not sep or not rest.endswith(")") or not _balanced(rest[:-1]):
        return None
    args, pad = rest[:-1], indent + "    "
    hanging = f"{head}.shard(\n{pad}{args})"
    if all(len(x) <= limit for x in hanging.splitlines()):
        return hanging
    parts = _top_level_split(args)
    lines = [f"{head}.shard("] + [f"{pad}{p}," for p in parts[:-1]] + [f"{pad}{parts[-1]})"]
    return "\n".join(lines) if len(parts) > 1 and all(len(x) <= limit for x in lines) else None


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _top_level_split(args: str) -> list[str]:
    """``a, b=(1, 2)`` -> [``a``, ``b=(1, 2)``]: the commas outside any bracket (no strings hold one here)."""
    parts, depth, cur = [], 0, ""
    for ch in args:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()] if cur.strip() else parts
