"""Value types: the queue order every table is printed in."""

from __future__ import annotations

import random

from mqadmin.model import MessageQueue, in_queue_order


def test_in_queue_order_is_the_dataclass_order() -> None:
    rng = random.Random(7)
    queues = [
        MessageQueue(rng.choice(["T", "T2", "%RETRY%g"]), rng.choice(["broker-a", "broker-b"]), rng.randrange(20))
        for _ in range(300)
    ]
    table = {mq: i for i, mq in enumerate(queues)}
    ordered = in_queue_order(table)
    assert list(ordered) == sorted(table)  # the order the Java tool prints rows in
    assert ordered == table  # same rows, same values
