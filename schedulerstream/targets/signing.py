"""Standard Webhooks headers: ``webhook-id``, ``webhook-timestamp``, ``webhook-signature``."""

from __future__ import annotations

import base64
import hashlib
import hmac

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with 'whsec_'")
    return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``."""
    signed = b"%s.%d.%s" % (msg_id.encode(), timestamp, body)
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def webhook_headers(msg_id: str, timestamp: int, body: bytes, key: bytes | None) -> dict[str, str]:
    """The headers of one attempt; the signature only when there is a key."""
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if key is not None:
        headers["webhook-signature"] = signature(key, msg_id, timestamp, body)
    return headers
