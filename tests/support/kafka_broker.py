"""A Kafka-protocol broker on loopback for the Kafka ingress tests: librdkafka's mock
cluster, in its own process.

No Apache Kafka or Redpanda can be installed from the package registries here, but
``confluent-kafka`` (a dependency) ships librdkafka, whose mock cluster
(``test.mock.num.brokers``) answers the Kafka protocol over TCP: produce, fetch,
consumer groups with rebalances, committed offsets. It is not Apache Kafka
(docs/kafka.md says what that leaves untested). Topics are created on first use with
four partitions.

``python -m tests.support.kafka_broker`` starts it and prints ``BOOTSTRAP host:port``;
it serves until killed. :func:`mock_kafka` runs it for a test module.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

PARTITIONS = 4
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def mock_kafka() -> Iterator[str]:
    """Start the broker process; yield its bootstrap address; kill it afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.kafka_broker"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("BOOTSTRAP "):
            raise RuntimeError(f"kafka mock broker did not start: {line!r} rc={process.poll()}")
        yield line.split()[1]
    finally:
        process.kill()
        process.wait(timeout=10)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Write ``values`` to ``topic``, keyed by index (spread over the partitions)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=str(i).encode())
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} records not delivered to {topic}")


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log end: the offset the next record would get."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        c.close()


def committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The group's committed offsets (absent where none was committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in parts if tp.offset >= 0}
    finally:
        c.close()


def main() -> None:
    handle = Producer(
        {"test.mock.num.brokers": 1, "bootstrap.servers": "", "log_level": 0}
    )  # the mock cluster lives as long as this client
    brokers = handle.list_topics(timeout=10).brokers
    broker = next(iter(brokers.values()))
    print(f"BOOTSTRAP {broker.host}:{broker.port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
