"""The dependency direction of ../shared/DESIGN.md §7, kept by a test rather than remembered.

Every ``import`` in ``schedulerstream/`` (at module level, inside functions and under
``TYPE_CHECKING`` alike) is read with ``ast``. A unit is a top-level module or a subpackage;
each unit belongs to one layer, and a layer may import only the units listed for it. No
cycle between units is allowed, and the core imports no Kafka client, no RocksDB, no HTTP.
A new module or package fails here until it is placed in a layer below.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "schedulerstream"

# The pure core: job model and validation, time/cron engine, ids, partitioner, codecs, limits,
# errors, clock, settings, and the contracts (topic names, policy values, the worker wire format)
# every layer above shares. Imports nothing else of the package and is tested without a broker.
CORE = frozenset(
    {
        "__init__",
        "avro_writer",
        "client_properties",
        "clock",
        "codec",
        "contracts",
        "dispatch_spec",
        "durations",
        "errors",
        "gc_policy",
        "histogram",
        "ids",
        "jsontext",
        "ingest",
        "jobfile",
        "limits",
        "logs",
        "model",
        "notices",
        "partitioner",
        "resources",
        "settings",
        "timing",
    }
)
# Adapters to the outside (Kafka clients and admin, the read model's databases, publishing,
# tenant records, child processes, botocore's SQS regions): the core and Kafka, nothing of the
# runtime or topologies.
ADAPTERS = frozenset(
    {"kafka", "readmodel", "publish", "bulkload", "sqs_regions", "supervisor", "tenants"}
)
TOPOLOGIES = frozenset({"scheduler", "dispatcher", "projector"})
FACES = frozenset({"api", "cli", "__main__"})

# unit -> the units it may import (beside itself)
ALLOWED: dict[str, frozenset[str]] = {
    **{unit: CORE for unit in CORE},
    "kafka": CORE,
    "readmodel": CORE,
    "supervisor": CORE,
    "sqs_regions": CORE,
    "publish": CORE | {"kafka"},
    "bulkload": CORE | {"publish", "sqs_regions"},
    "tenants": CORE | {"kafka"},
    # the processor runtime knows nothing of schedules or targets
    "runtime": CORE | {"kafka"},
    # targets implement one Protocol and know nothing of consumer loops or state stores
    "targets": CORE | {"kafka", "sqs_regions"},
    # the worker SDK runs a pool's jobs (the wire format it shares is contracts/worker.py)
    "worker": CORE | {"kafka"},
    # metrics read the runtime's counters; topologies observe into them
    "observability": CORE | {"kafka", "runtime"},
    # topologies on the runtime; they do not import each other
    "scheduler": CORE | {"kafka", "runtime", "observability"},
    "dispatcher": CORE | {"kafka", "runtime", "observability", "targets", "tenants"},
    "projector": CORE | {"kafka", "runtime", "observability", "readmodel"},
    # faces: nothing below imports them
    "api": CORE | {"kafka", "publish", "readmodel", "sqs_regions", "tenants"},
    "cli": CORE | ADAPTERS | TOPOLOGIES | {"runtime", "targets", "worker", "observability", "api"},
    "__main__": frozenset({"cli"}),
}

KAFKA_CLIENT = ("confluent_kafka",)
STATE_STORE = ("rocksdict",)
HTTP_SERVER = ("fastapi", "starlette", "uvicorn")
HTTP_CLIENT = ("aiohttp", "httpx", "aiobotocore", "botocore")
FACE_LIBS = ("click", *HTTP_SERVER)
# unit -> third-party packages it must not import
FORBIDDEN_EXTERNAL: dict[str, tuple[str, ...]] = {
    **{
        unit: KAFKA_CLIENT + STATE_STORE + HTTP_SERVER + HTTP_CLIENT + ("psycopg", "click")
        for unit in CORE
    },
    "runtime": HTTP_CLIENT + FACE_LIBS + ("psycopg",),
    "targets": STATE_STORE + FACE_LIBS,
    "scheduler": HTTP_CLIENT + FACE_LIBS,
    "dispatcher": FACE_LIBS,
    "projector": HTTP_CLIENT + FACE_LIBS,
}


@dataclass(frozen=True)
class Import:
    source: str  # dotted module
    target: str  # dotted module imported
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT.parent)}:{self.line}"


def unit_of(module: str) -> str:
    """``schedulerstream.dispatcher.limits`` -> ``dispatcher``; the root package -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_unit(name: str) -> bool:
    return (ROOT / f"{name}.py").is_file() or (ROOT / name / "__init__.py").is_file()


def imports() -> Iterator[Import]:
    for path in sorted(ROOT.rglob("*.py")):
        module = module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(module, alias.name, path, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                yield Import(module, target, path, node.lineno)
                for alias in node.names:  # `from schedulerstream import codec`: a unit
                    if target == "schedulerstream" and is_unit(alias.name):
                        yield Import(module, f"schedulerstream.{alias.name}", path, node.lineno)


ALL = list(imports())
INTERNAL = [
    i for i in ALL if i.target.startswith("schedulerstream.") or i.target == "schedulerstream"
]
UNITS = sorted({unit_of(module_name(p)) for p in ROOT.rglob("*.py")})


def test_every_unit_is_placed_in_a_layer() -> None:
    unplaced = [unit for unit in UNITS if unit not in ALLOWED]
    assert not unplaced, f"place {unplaced} in a layer of tests/test_layers.py (DESIGN.md §7)"


@pytest.mark.parametrize("unit", UNITS)
def test_imports_follow_the_layers(unit: str) -> None:
    allowed = ALLOWED.get(unit, frozenset())
    wrong = [
        f"{i.where()}: {i.source} imports {i.target}"
        for i in INTERNAL
        if unit_of(i.source) == unit
        and unit_of(i.target) != unit
        and unit_of(i.target) not in allowed
    ]
    assert not wrong, f"{unit} may import only {sorted(allowed)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("unit", sorted(FORBIDDEN_EXTERNAL))
def test_no_forbidden_third_party_imports(unit: str) -> None:
    banned = FORBIDDEN_EXTERNAL[unit]
    wrong = [
        f"{i.where()}: {i.source} imports {i.target}"
        for i in ALL
        if unit_of(i.source) == unit and i.target.split(".")[0] in banned
    ]
    assert not wrong, f"{unit} must not import {banned}:\n" + "\n".join(wrong)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_cycle_between_units() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for i in INTERNAL:
        if unit_of(i.source) != unit_of(i.target):
            edges[unit_of(i.source)].add(unit_of(i.target))
    found = cycles(edges)
    lines = [
        f"{i.where()}: {i.source} imports {i.target}"
        for component in found
        for i in INTERNAL
        if unit_of(i.source) in component
        and unit_of(i.target) in component
        and unit_of(i.source) != unit_of(i.target)
    ]
    assert not found, f"import cycles between units {found}:\n" + "\n".join(lines)


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_are_read() -> None:
    found = {(i.source, i.target) for i in INTERNAL}
    assert ("schedulerstream.model", "schedulerstream.timing") in found  # inside a validator
    assert ("schedulerstream.settings", "schedulerstream.client_properties") in found
    assert ("schedulerstream.targets.http", "schedulerstream") in found  # __version__: the root
    assert ("schedulerstream.targets.http", "schedulerstream.__version__") not in found
