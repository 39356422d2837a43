"""API keys: ``ss_<tenant>_<64 hex>``. The tenant is in the key, so a lookup needs no scan; only
the SHA-256 of the 32-byte random secret is stored."""

from __future__ import annotations

import hashlib
import re
import secrets

_KEY = re.compile(r"^ss_(?P<tenant>[a-z0-9][a-z0-9._-]{0,62})_(?P<secret>[0-9a-f]{64})$")


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key(tenant: str) -> tuple[str, str]:
    """A fresh (api_key, hash of its secret) for ``tenant``."""
    secret = secrets.token_hex(32)
    return f"ss_{tenant}_{secret}", secret_hash(secret)


def parse_key(api_key: str) -> tuple[str, str] | None:
    """(tenant, secret) of a well-formed key, else None."""
    match = _KEY.match(api_key)
    return None if match is None else (match["tenant"], match["secret"])
