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


def test_in_queue_order_remembering_runs_sorts_every_table() -> None:
    """Tables over the same queue objects, in order and out of it, some runs repeated: each one
    comes back sorted, whatever an earlier table of the same queues looked like."""
    rng = random.Random(11)
    queues = [MessageQueue(t, b, q) for t in ("T", "%RETRY%g") for b in ("broker-b", "broker-a") for q in (10, 2, 0)]
    runs = [sorted(queues), sorted(queues)[:5], list(queues), sorted(queues, reverse=True)]
    runs += [rng.sample(queues, rng.randrange(1, len(queues) + 1)) for _ in range(40)]
    seen: dict[tuple[int, ...], bool] = {}
    for run in runs + runs[::-1]:
        table = {mq: str(mq) for mq in run}
        ordered = in_queue_order(table, seen)
        assert list(ordered) == sorted(table) and ordered == table
        assert ordered is not table  # a new dict, as without ``seen``
    assert len(seen) < 2 * len(runs)  # repeated runs were looked up, not checked again
