"""A lean protobuf decoder, driven by a message's own descriptor.

MindSpore forces the pure-Python protobuf runtime (its generated ``*_pb2`` modules require it), which
spends most of its time creating message objects: decoding the ANF graph of an 80-layer model takes
~0.5 s. This decoder reads the same wire format into light objects with the same attribute names,
``HasField`` and proto3 defaults, for what strategist reads; it is checked field by field against
``ParseFromString`` in the tests.
"""
from __future__ import annotations

import os
import struct

# MindSpore's generated *_pb2 modules need protobuf's Python runtime, and MindSpore sets it only if it
# is imported before protobuf is: importing this module first must not pick another runtime.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

from google.protobuf.descriptor import FieldDescriptor as F  # noqa: E402

from ..memo import table

_FLOAT = struct.Struct("<f").unpack_from
_DOUBLE = struct.Struct("<d").unpack_from
_FIXED = {5: (4, _FLOAT), 1: (8, _DOUBLE)}     # wire type -> (bytes, decoder): fixed32 float, fixed64 double
_VARINT_TYPES = {F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_BOOL, F.TYPE_ENUM}
_TABLES = table("front end: proto field tables", 1024)


class Msg:
    """A decoded message: attributes as in the generated class; absent fields give proto defaults."""

    __slots__ = ("_d", "_desc")

    def __init__(self, d: dict, desc):
        self._d = d
        self._desc = desc

    def __getattr__(self, name):
        d = object.__getattribute__(self, "_d")
        if name in d:
            return d[name]
        f = object.__getattribute__(self, "_desc").fields_by_name[name]
        if _repeated(f):
            return []
        if f.type == F.TYPE_MESSAGE:
            return Msg({}, f.message_type)
        return f.default_value

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's spelling)
        return name in self._d


def _repeated(f) -> bool:
    rep = getattr(f, "is_repeated", None)          # protobuf >= 5
    if rep is not None:
        return rep() if callable(rep) else bool(rep)
    return f.label == F.LABEL_REPEATED


def _table(desc):
    t = _TABLES.get(desc)
    if t is None:
        t = _TABLES[desc] = {f.number: (f.name, f.type, _repeated(f), f.message_type) for f in desc.fields}
    return t


def _varint(buf, i):
    b = buf[i]
    if b < 0x80:
        return b, i + 1
    result, shift = b & 0x7F, 7
    i += 1
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _scalar(ftype, v):
    if ftype in (F.TYPE_INT64, F.TYPE_INT32):
        return v - (1 << 64) if v >= (1 << 63) else v
    if ftype == F.TYPE_BOOL:
        return bool(v)
    return v


def decode(data: bytes, desc) -> Msg:
    """Decode ``data`` as message type ``desc`` (a protobuf Descriptor)."""
    return Msg(_decode(memoryview(data), desc, 0, len(data)), desc)


def _decode(buf, desc, i, end) -> dict:
    table = _table(desc)
    d: dict = {}
    while i < end:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, i = _varint(buf, i)
            f = table.get(num)
            if f is None:
                continue
            name, ftype, rep, _ = f
            val = _scalar(ftype, val)
        elif wt == 2:
            ln, i = _varint(buf, i)
            s0, i = i, i + ln
            f = table.get(num)
            if f is None:
                continue
            name, ftype, rep, sub = f
            if ftype == F.TYPE_MESSAGE:
                val = Msg(_decode(buf, sub, s0, i), sub)
            elif ftype == F.TYPE_STRING:
                val = bytes(buf[s0:i]).decode("utf-8")
            elif ftype == F.TYPE_BYTES:
                val = bytes(buf[s0:i])
            else:  # packed repeated scalars
                vals, j = [], s0
                if ftype == F.TYPE_FLOAT:
                    vals = [_FLOAT(buf, k)[0] for k in range(s0, i, 4)]
                elif ftype == F.TYPE_DOUBLE:
                    vals = [_DOUBLE(buf, k)[0] for k in range(s0, i, 8)]
                else:
                    while j < i:
                        v, j = _varint(buf, j)
                        vals.append(_scalar(ftype, v))
                d.setdefault(name, []).extend(vals)
                continue
        elif wt in _FIXED:
            size, unpack = _FIXED[wt]
            val = unpack(buf, i)[0]
            i += size
            f = table.get(num)
            if f is None:
                continue
            name, ftype, rep, _ = f
        else:
            raise ValueError(f"unsupported protobuf wire type {wt}")
        if rep:
            d.setdefault(name, []).append(val)
        else:
            d[name] = val
    return d
