"""Avro binary writers compiled from a parsed schema: the same bytes as fastavro's
``schemaless_writer``, from code built once per schema instead of a schema walk per record (a
record's fields are written by one generated function, other types by closures).

Supports what our schemas use: records, unions (a named branch as fastavro's ``(name, value)``
tuple), arrays, maps, enums and the primitive types. ``compile_writer`` returns None for a
schema with anything else (fixed, logical types), and a writer raises ``TypeError``,
``ValueError`` or ``KeyError`` on a value it cannot write: callers then use ``Codec.encode``,
which says what is wrong. Callers check a writer against ``Codec.encode`` on samples.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from schedulerstream.codec import long_bytes, string_bytes
from schedulerstream.errors import CodecError

Write = Callable[[Any, list[bytes]], None]  # appends the value's encoding to the list
_MISSING = object()
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


class Unsupported(CodecError):
    """The schema uses a feature these writers do not compile."""


def compile_writer(schema: Any) -> Callable[[Any], bytes] | None:
    """A function that encodes a value of ``schema`` (parsed by fastavro), or None."""
    try:
        write = _compile(schema, {})
    except Unsupported:
        return None

    def encode(value: Any) -> bytes:
        out: list[bytes] = []
        write(value, out)
        return b"".join(out)

    return encode


def _compile(schema: Any, named: dict[str, Write]) -> Write:
    if isinstance(schema, str):
        primitive = _PRIMITIVES.get(schema)
        if primitive is not None:
            return primitive
        if schema in named:
            return named[schema]
        raise Unsupported(f"unknown type {schema}")
    if isinstance(schema, list):
        return _union(schema, named)
    if not isinstance(schema, dict) or "logicalType" in schema:
        raise Unsupported(str(schema)[:80])
    kind = schema["type"]
    if kind == "record":
        return _record(schema, named)
    if kind == "enum":
        return _enum(schema, named)
    if kind == "array":
        return _array(_compile(schema["items"], named))
    if kind == "map":
        return _map(_compile(schema["values"], named))
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    raise Unsupported(f"type {kind}")


def _record(schema: dict[str, Any], named: dict[str, Write]) -> Write:
    trampoline: list[Write] = []
    named[schema["name"]] = lambda value, out: trampoline[0](value, out)  # for recursion
    write = _generate(schema, named)
    trampoline.append(write)
    named[schema["name"]] = write
    return write


def _generate(schema: dict[str, Any], named: dict[str, Write]) -> Write:
    """A record's writer as one generated function: its fields, and those of the records
    nested in it, written in line; the other types through their compiled writers."""
    source = _RecordSource(named)
    lines = ["def write(v0, out):", "    a = out.append"]
    source.fields(schema, "v0", lines, "    ")
    namespace: dict[str, Any] = dict(source.env)
    exec("\n".join(lines), namespace)
    write: Write = namespace["write"]
    return write


class _RecordSource:
    """Python source that writes a record's fields (``fields``), and what it refers to."""

    def __init__(self, named: dict[str, Write]) -> None:
        self.named = named
        self.env: dict[str, Any] = {
            "L": _remembered_long, "S": string_bytes, "LMIN": _LONG_MIN, "LMAX": _LONG_MAX,
            "_over": _over,
        }  # fmt: skip
        self._count = 0

    def _name(self, prefix: str, value: Any) -> str:
        self._count += 1
        name = f"{prefix}{self._count}"
        self.env[name] = value
        return name

    def fields(self, schema: dict[str, Any], var: str, lines: list[str], pad: str) -> None:
        for field in schema["fields"]:
            name = field["name"]
            if "default" in field:
                default = self._name("d", field["default"])
                lines.append(f"{pad}x = {var}.get({name!r}, {default})")
            else:
                lines.append(f"{pad}x = {var}[{name!r}]")
            self.value(field["type"], lines, pad)

    def value(self, kind: Any, lines: list[str], pad: str) -> None:
        """Write ``x`` of type ``kind``."""
        if kind == "string":
            lines.append(f"{pad}a(S(x))")
        elif kind == "long":
            lines.append(f"{pad}a(L(x) if LMIN <= x <= LMAX else _over(x))")
        elif kind == "boolean":
            lines.append(f'{pad}a(b"\\x01" if x else b"\\x00")')
        elif isinstance(kind, dict) and kind.get("type") == "record" and "logicalType" not in kind:
            self.nested(kind, lines, pad)
        elif isinstance(kind, list) and len(kind) == 2 and kind[0] == "null":
            other = kind[1]
            named = other.get("name") if isinstance(other, dict) else other
            lines.append(f"{pad}if x is None:")
            lines.append(f'{pad}    a(b"\\x00")')
            lines.append(f"{pad}else:")
            if isinstance(other, dict) and other.get("type") == "record":
                lines.append(f"{pad}    if type(x) is tuple and len(x) == 2 and x[0] == {named!r}:")
                lines.append(f"{pad}        x = x[1]")
            lines.append(f'{pad}    a(b"\\x02")')
            self.value(other, lines, pad + "    ")
        else:
            write = self._name("w", _compile(kind, self.named))
            lines.append(f"{pad}{write}(x, out)")

    def nested(self, schema: dict[str, Any], lines: list[str], pad: str) -> None:
        var = f"v{self._count + 1}"
        self._count += 1
        lines.append(f"{pad}{var} = x")
        self.named[schema["name"]] = _generate(schema, self.named)  # for later references
        self.fields(schema, var, lines, pad)


_LONGS: dict[int, bytes] = {}  # the longs past long_bytes' table written lately


def _remembered_long(n: int) -> bytes:
    """``long_bytes``, remembered: durations and limits repeat from one record to the next
    (a long past 8,192 takes a Python loop of up to ten steps)."""
    found = _LONGS.get(n)
    if found is None:
        if len(_LONGS) >= 4096:
            _LONGS.clear()
        found = _LONGS[n] = long_bytes(n)
    return found


def _over(value: int) -> bytes:
    raise ValueError(f"{value} does not fit a long")


def _enum(schema: dict[str, Any], named: dict[str, Write]) -> Write:
    index = {symbol: long_bytes(i) for i, symbol in enumerate(schema["symbols"])}

    def write(value: Any, out: list[bytes]) -> None:
        out.append(index[value])

    named[schema["name"]] = write
    return write


def _array(items: Write) -> Write:
    def write(value: Any, out: list[bytes]) -> None:
        if not isinstance(value, list):
            raise TypeError(f"an array needs a list, not {type(value).__name__}")
        if value:
            out.append(long_bytes(len(value)))
            for item in value:
                items(item, out)
        out.append(b"\x00")

    return write


def _map(values: Write) -> Write:
    def write(value: Any, out: list[bytes]) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"a map needs a dict, not {type(value).__name__}")
        if value:
            out.append(long_bytes(len(value)))
            for key, item in value.items():
                out.append(string_bytes(key))
                values(item, out)
        out.append(b"\x00")

    return write


def _union(branches: list[Any], named: dict[str, Write]) -> Write:
    if len(branches) == 2 and branches[0] == "null":
        other = branches[1]
        name = other.get("name") if isinstance(other, dict) else other
        return _optional(_compile(other, named), name)
    compiled: list[tuple[Callable[[Any], bool], bytes, Write]] = []
    by_name: dict[str, tuple[bytes, Write]] = {}
    for i, branch in enumerate(branches):
        write = _compile(branch, named)
        if isinstance(branch, dict) and branch.get("type") in ("record", "enum"):
            by_name[branch["name"]] = (long_bytes(i), write)
        elif isinstance(branch, str) and branch not in _PRIMITIVES:
            by_name[branch] = (long_bytes(i), write)  # a named type defined before
        compiled.append((_accepts(branch, branches), long_bytes(i), write))

    def union(value: Any, out: list[bytes]) -> None:
        if type(value) is tuple and len(value) == 2 and value[0] in by_name:
            index, write = by_name[value[0]]
            out.append(index)
            write(value[1], out)
            return
        for accepts, index, write in compiled:
            if accepts(value):
                out.append(index)
                write(value, out)
                return
        raise TypeError(f"no branch of the union takes a {type(value).__name__}")

    return union


def _accepts(branch: Any, branches: list[Any]) -> Callable[[Any], bool]:
    """Which values fastavro writes with ``branch`` (the first branch that accepts wins)."""
    kind = branch if isinstance(branch, str) else branch.get("type")
    if kind == "null":
        return lambda v: v is None
    if kind == "boolean":
        return lambda v: isinstance(v, bool)
    if kind in ("int", "long"):
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if kind in ("float", "double"):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind == "string":
        return lambda v: isinstance(v, str)
    if kind == "bytes":
        return lambda v: isinstance(v, bytes)
    if kind == "array":
        return lambda v: isinstance(v, list)
    if kind == "map" and not any(_is_record(b) for b in branches):
        return lambda v: isinstance(v, dict)
    if kind == "record" and sum(_is_record(b) or _is_map(b) for b in branches) == 1:
        return lambda v: isinstance(v, dict)
    return lambda v: False  # only as a (name, value) tuple, or not at all: left to the codec


def _is_record(branch: Any) -> bool:
    return isinstance(branch, dict) and branch.get("type") == "record"


def _is_map(branch: Any) -> bool:
    return isinstance(branch, dict) and branch.get("type") == "map"


def _optional(write: Write, name: str | None) -> Write:
    """["null", X]; a named X may come as fastavro's (name, value) tuple."""

    def optional(value: Any, out: list[bytes]) -> None:
        if value is None:
            out.append(b"\x00")
            return
        if type(value) is tuple and len(value) == 2 and value[0] == name:
            value = value[1]
        out.append(b"\x02")
        write(value, out)

    return optional


def _null(value: Any, out: list[bytes]) -> None:
    if value is not None:
        raise TypeError(f"null takes None, not {type(value).__name__}")
    return


def _boolean(value: Any, out: list[bytes]) -> None:
    out.append(b"\x01" if value else b"\x00")


def _long(value: Any, out: list[bytes]) -> None:
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError(f"{value} does not fit a long")
    out.append(long_bytes(value))


def _int(value: Any, out: list[bytes]) -> None:
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"{value} does not fit an int")
    out.append(long_bytes(value))


def _double(value: Any, out: list[bytes]) -> None:
    out.append(struct.pack("<d", value))


def _float(value: Any, out: list[bytes]) -> None:
    out.append(struct.pack("<f", value))


def _string(value: Any, out: list[bytes]) -> None:
    out.append(string_bytes(value))


def _bytes(value: Any, out: list[bytes]) -> None:
    if not isinstance(value, bytes):
        raise TypeError(f"bytes takes bytes, not {type(value).__name__}")
    out.append(long_bytes(len(value)))
    out.append(value)


_PRIMITIVES: dict[str, Write] = {
    "null": _null, "boolean": _boolean, "int": _int, "long": _long, "float": _float,
    "double": _double, "string": _string, "bytes": _bytes,
}  # fmt: skip
