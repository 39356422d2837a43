"""The SQS target: ``SendMessage`` with aiobotocore, one client per region.

Credentials and endpoints come from the standard AWS SDK sources (``AWS_ACCESS_KEY_ID`` ...,
``AWS_ENDPOINT_URL_SQS`` or ``AWS_ENDPOINT_URL``); ``endpoint_url`` overrides them. FIFO queues
(``.fifo``) get a ``MessageGroupId`` (the job's, else the job key) and the run id as
``MessageDeduplicationId``, so a retry of an attempt that did land is dropped by SQS.

A client takes 40-70 ms of the delivery loop to make, and every tenant's attempts wait for
it. So a region must be one botocore knows for SQS (``sqs_regions``: any, with an endpoint
set), and at most ``max_clients`` are kept, the least recently used idle
one closed first: one tenant naming region after region cannot stall the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
)

from schedulerstream.clock import Clock, SystemClock
from schedulerstream.ids import job_key
from schedulerstream.model import SqsTarget as SqsTargetConfig
from schedulerstream.sqs_regions import region_refusal
from schedulerstream.targets.base import Delivery, Outcome, OutcomeKind
from schedulerstream.targets.envelope import envelope_bytes

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

MAX_CLIENTS = 64  # botocore knows 46 SQS regions: every one of them stays open
_DEDUP_ID = re.compile(r"^[!-~]{1,128}$")  # SQS: printable ASCII, at most 128
_RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "KmsThrottled",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
        "RequestTimeoutException",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)


def deduplication_id(run_id: str) -> str:
    """The run id if SQS accepts it as a deduplication id, else its SHA-256 in hex.

    A hash never contains '@', so it cannot equal another run's id used verbatim.
    """
    if _DEDUP_ID.match(run_id):
        return run_id
    return hashlib.sha256(run_id.encode()).hexdigest()


def is_fifo(queue_url: str) -> bool:
    return queue_url.rstrip("/").endswith(".fifo")


def send_message_args(
    delivery: Delivery, target: SqsTargetConfig, timestamp: int
) -> dict[str, Any]:
    """The ``SendMessage`` parameters of one attempt."""
    args: dict[str, Any] = {
        "QueueUrl": target.queue_url,
        "MessageBody": envelope_bytes(delivery).decode("ascii"),
        "MessageAttributes": {
            "webhook-id": {"DataType": "String", "StringValue": delivery.run_id},
            "webhook-timestamp": {"DataType": "Number", "StringValue": str(timestamp)},
        },
    }
    if is_fifo(target.queue_url):
        args["MessageGroupId"] = target.message_group_id or job_key(
            delivery.tenant, delivery.job_id
        )
        args["MessageDeduplicationId"] = deduplication_id(delivery.run_id)
    elif target.message_group_id:
        args["MessageGroupId"] = target.message_group_id
    return args


class SqsSender:
    """Delivers runs to SQS queues. One instance per dispatcher process, on one event loop."""

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        session: AioSession | None = None,
        clock: Clock | None = None,
        connect_timeout: float = 10.0,
        max_pool_connections: int = 50,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        config = AioConfig(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=connect_timeout,
            max_pool_connections=max_pool_connections,
        )
        self._clients = _Clients(session or get_session(), config, endpoint_url, max_clients)

    async def deliver(self, delivery: Delivery, target_config: SqsTargetConfig) -> Outcome:
        """One ``SendMessage``; classify the answer."""
        started = self._clock.monotonic()

        def done(
            kind: OutcomeKind, reason: str, retryable: bool, status: int | None = None
        ) -> Outcome:
            duration = round((self._clock.monotonic() - started) * 1e6)
            return Outcome(kind, reason, retryable, duration, status)

        timestamp = self._clock.now_us() // 1_000_000
        args = send_message_args(delivery, target_config, timestamp)
        region = target_config.region
        try:
            async with asyncio.timeout(delivery.deadline):
                refused = self._clients.refusal(region)
                if refused is not None:
                    return done("refused", refused, False)
                async with self._clients.use(region) as client:
                    answer = await client.send_message(**args)
        except TimeoutError:
            return done("timed_out", f"no answer within {delivery.deadline:g} s", True)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("Code", "?")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            retryable = code in _RETRYABLE_CODES or (status is not None and status >= 500)
            message = error.get("Message", "")
            reason = f"SQS {code} for {target_config.queue_url}: {message}".rstrip(": ")
            return done("failed", reason, retryable, status)
        except NoCredentialsError as exc:
            return done("refused", f"no AWS credentials: {exc}", False)
        except ParamValidationError as exc:
            return done("refused", f"invalid SendMessage request: {exc}", False)
        except (ConnectTimeoutError, ReadTimeoutError) as exc:
            return done("timed_out", str(exc), True)
        except (BotoCoreError, OSError) as exc:
            return done("failed", f"{type(exc).__name__}: {exc}", True)
        status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return done("succeeded", f"SQS MessageId {answer.get('MessageId')}", False, status)

    async def close(self) -> None:
        await self._clients.close()


class _Clients:
    """SQS clients by region: made on first use, the least recently used idle one closed
    when there are more than ``limit``."""

    def __init__(self, session: AioSession, config: AioConfig, endpoint_url: str | None,
                 limit: int) -> None:  # fmt: skip
        self._session = session
        self._config = config
        self._endpoint_url = endpoint_url
        self._limit = limit
        self._open: OrderedDict[str, tuple[Any, SQSClient]] = OrderedDict()  # region → (cm, client)
        self._using: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def refusal(self, region: str) -> str | None:
        """Why ``region`` may not get a client (None: it may; any may with an endpoint)."""
        if self._endpoint_url:
            return None
        return region_refusal(region, self._session)

    @contextlib.asynccontextmanager
    async def use(self, region: str) -> AsyncIterator[SQSClient]:
        """The region's client, not closed while it is used."""
        self._using[region] = self._using.get(region, 0) + 1
        try:
            yield await self._client(region)
        finally:
            self._using[region] -= 1
            if not self._using[region]:
                del self._using[region]

    async def _client(self, region: str) -> SQSClient:
        found = self._open.get(region)
        if found is None:
            async with self._lock:
                found = self._open.get(region)
                if found is None:
                    found = await self._make(region)
                    await self._trim()
        self._open.move_to_end(region)
        return found[1]

    async def _make(self, region: str) -> tuple[Any, SQSClient]:
        made = self._session.create_client(
            "sqs", region_name=region, endpoint_url=self._endpoint_url, config=self._config
        )
        client = await made.__aenter__()
        self._open[region] = (made, client)
        return made, client

    async def _trim(self) -> None:
        idle = [region for region in self._open if region not in self._using]
        # taken out before the first close awaits: meanwhile a send may take up any of them
        closing = [self._open.pop(r)[0] for r in idle[: max(0, len(self._open) - self._limit)]]
        for made in closing:
            with contextlib.suppress(Exception):
                await made.__aexit__(None, None, None)

    async def close(self) -> None:
        while self._open:
            made, _ = self._open.popitem()[1]
            with contextlib.suppress(Exception):
                await made.__aexit__(None, None, None)
