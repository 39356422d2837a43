"""Package data, found through ``importlib.resources`` so a built wheel works like a checkout.

``schedulerstream.schemas`` and ``schedulerstream.topologies`` are the repository's top-level
``schemas/`` and ``topologies/`` (setup.py maps them in); the Maven poms sit beside the modules of
``schedulerstream.kafka``.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from schedulerstream.errors import ConfigError


def package_dir(package: str) -> Path:
    """The directory holding ``package``'s files (a real directory: fastavro and mvn read them)."""
    root = files(package)
    if not isinstance(root, Path):
        raise ConfigError(f"{package} is not installed as plain files (zip imports unsupported)")
    return root


def schema_dir() -> Path:
    """The Avro schemas (``schemas/`` of the repository)."""
    return package_dir("schedulerstream.schemas")


def topologies_dir() -> Path:
    """The topic declarations and Connect sink configs (``topologies/`` of the repository)."""
    return package_dir("schedulerstream.topologies")


def pom(name: str) -> Path:
    """A Maven pom shipped with ``schedulerstream.kafka``: ``kafka`` or ``connect``."""
    return package_dir("schedulerstream.kafka") / f"{name}-pom.xml"
