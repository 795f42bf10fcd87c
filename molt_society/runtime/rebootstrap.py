"""A Kafka client that goes back to its bootstrap servers when no broker it knows answers (KIP-899).

aiokafka asks for cluster metadata only from the brokers named in the last metadata it received. When
every one of those is unreachable (a cluster that lost the broker it last heard of, metadata taken while
the cluster changed) the client asks them again forever: "Unable to update metadata from [3]" every
100 ms, its consumer group's coordinator never found, an offset reset never done. A consumer stuck so
held a society's agent workers for ten minutes on a three-broker cluster that had lost one broker
(``tests/integration/test_kafka_cluster.py``). The Java client recovers by asking the configured
bootstrap servers again (``metadata.recovery.strategy=rebootstrap``, KIP-899, the default since Kafka
4.0); this client does the same: when a metadata update fails (every known broker unreachable, or an
answer naming no broker) it reads the metadata from the bootstrap list (at most every
``REBOOTSTRAP_EVERY_S``), logged as ``kafka.rebootstrapped``.

``runtime.kafka`` makes every producer and consumer with it (``use_rebootstrap``).
"""

from __future__ import annotations

import time
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.cluster import ClusterMetadata
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaError
from aiokafka.protocol.metadata import MetadataRequest

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

REBOOTSTRAP_EVERY_S = 5.0


class RebootstrapClient(AIOKafkaClient):  # type: ignore[misc]
    """``AIOKafkaClient`` whose failed metadata update falls back to the bootstrap servers."""

    _rebootstrapped_at = float("-inf")  # per instance once set (monotonic seconds)

    async def _metadata_update(self, cluster_metadata: ClusterMetadata, topics: Any) -> bool:
        if await super()._metadata_update(cluster_metadata, topics):
            return True
        now = time.monotonic()
        if now - self._rebootstrapped_at < REBOOTSTRAP_EVERY_S:
            return False
        self._rebootstrapped_at = now
        known = sorted(b.nodeId for b in self.cluster.brokers())
        request = MetadataRequest(list(topics) if topics else None)
        for host, port, _ in self.hosts:
            metadata = await self._ask(host, port, request)
            if metadata is None or not metadata.brokers:
                continue
            cluster_metadata.update_metadata(metadata)
            log.warning(
                "kafka.rebootstrapped",
                client_id=self._client_id,
                unreachable=known,
                via=f"{host}:{port}",
                brokers=sorted(b.nodeId for b in cluster_metadata.brokers()),
            )
            return True
        return False

    async def _ask(self, host: str, port: int, request: Any) -> Any:
        """The metadata one bootstrap server answers, or None (unreachable, no answer in time)."""
        try:
            conn = await create_conn(
                host,
                port,
                client_id=self._client_id,
                request_timeout_ms=self._request_timeout_ms,
                ssl_context=self._ssl_context,
                security_protocol=self._security_protocol,
                max_idle_ms=self._connections_max_idle_ms,
                sasl_mechanism=self._sasl_mechanism,
                sasl_plain_username=self._sasl_plain_username,
                sasl_plain_password=self._sasl_plain_password,
                sasl_kerberos_service_name=self._sasl_kerberos_service_name,
                sasl_kerberos_domain_name=self._sasl_kerberos_domain_name,
                sasl_oauth_token_provider=self._sasl_oauth_token_provider,
            )
        except (TimeoutError, OSError, KafkaError):
            return None
        try:
            return await conn.send(request)
        except (TimeoutError, KafkaError):
            return None
        finally:
            conn.close()


def use_rebootstrap(client: Any) -> None:
    """Make a not yet started producer's or consumer's client a ``RebootstrapClient`` (same state, one
    method more: aiokafka builds its client inside the producer or consumer and offers no other hook)."""
    inner = client._client if hasattr(client, "_client") else client.client  # consumer / producer
    if type(inner) is not AIOKafkaClient:
        raise TypeError(f"expected aiokafka's own client, got {type(inner).__name__}")
    inner.__class__ = RebootstrapClient
