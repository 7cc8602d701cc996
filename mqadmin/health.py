"""Lag health from a window of samples, as Burrow evaluates Kafka consumers, from a cron line.

Each run of ``consumerProgress --health`` adds one sample per queue (when, the consumer offset,
the max offset, the lag time) to a small state file, and evaluates the last N samples: no lag
threshold to tune. The evaluation is pure functions over samples (``evaluate_queue``,
``evaluate_group``); the state file (``StateFile``) is beside them: one per address under
``$MQADMIN_HOME/state/``, locked against a second run at the same moment, written atomically,
bounded to N samples and T minutes per queue.

Rules per queue, first match wins (Burrow's, with RocketMQ's signals; where ours differ, why):

* ERR: the queue's figures could not be read (its broker did not answer).
* REWIND: the consumer offset went back within the window and is still below where it was
  (a reset, or a client committing old offsets). Burrow checks this too.
* OK: the lag was 0 at some sample of the window (caught up: a group with no traffic is OK, not
  stopped). Burrow's rule 1.
* collecting: fewer than N samples yet; said, not guessed (status OK).
* STOP: messages wait, no client of the group is online, and the offset has not moved for longer
  than it moved before within the window (Burrow: the last commit is older than the window's
  span). RocketMQ tells us whether a client is online (heartbeats), which Kafka's offsets topic does
  not, and its clients commit every 5 s whether or not the offset moved, so a commit time says
  nothing: movement and presence do.
* STALL: messages wait, clients are online (or were not read), and the offset has not moved over
  the whole window. Burrow's rule 2.
* WARN: the offset moves but the lag grows at every sample (falling behind), or the lag time is
  above the soft limit. Burrow warns when the lag merely does not shrink; a busy group at a steady
  lag keeps up, so here it must grow. The lag time (age of the oldest unconsumed message) is ours.
* OK otherwise.

A group's status is its worst queue's. A group without a committed offset on any queue has no
window: ``uncommitted`` decides from its clients and the messages in their subscribed topics.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import gc
import hashlib
import operator
import os
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from mqadmin import errors
from mqadmin.fastjson import collector_paused
from mqadmin.safety import atomic_write
from mqadmin.timeparse import format_duration

#: the state file's first line: this name, the length of the JSON after it and its CRC-32
STATE_FORMAT = "mqadmin-health-state/3"
#: rows only (read, then written in the current form)
STATE_FORMAT_2 = "mqadmin-health-state/2"
#: the earlier form, one JSON document with every value checked on reading (read once, then rewritten)
STATE_FORMAT_1 = "mqadmin-health-state/1"
CAUGHT_UP = "caught up"
#: how long a run waits for another run holding the same state file before it gives up
LOCK_WAIT_S = 30.0


class Status(enum.IntEnum):
    """The statuses in rising severity; the values are the Prometheus gauge's."""

    OK = 0
    WARN = 1
    STALL = 2
    STOP = 3
    REWIND = 4
    ERR = 5


def parse_level(text: str) -> Status:
    try:
        return Status[text.strip().upper()]
    except KeyError:
        levels = ", ".join(s.name for s in Status)
        raise errors.UsageError(f"--fail-on must be one of {levels}, not {text!r}") from None


#: a sample as a plain tuple (at_ms, consumer, broker, lag_ms), which a Sample is too: what a
#: caller with 80,000 queues passes, as making a tuple costs less than making a Sample
SampleRow = tuple[int, int, int, int | None]


class Sample(NamedTuple):
    """One queue at one moment. A tuple: a run makes one per queue and reads back N per queue from
    the state file (400,000 at 10,000 groups), and a tuple is the cheapest object to make."""

    at_ms: int
    consumer: int
    broker: int
    #: age of the oldest unconsumed message (None: could not be read)
    lag_ms: int | None = None

    @property
    def diff(self) -> int:
        d = self.broker - self.consumer
        return d if d > 0 else 0

    def to_row(self) -> list[int | None]:
        return list(self)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Sample:
        return cls(int(row[0]), int(row[1]), int(row[2]), None if row[3] is None else int(row[3]))

    def to_json(self) -> dict[str, Any]:
        return {
            "at_ms": self.at_ms,
            "consumer_offset": self.consumer,
            "broker_offset": self.broker,
            "diff": self.diff,
            "lag_time_ms": self.lag_ms,
        }


@dataclass(frozen=True)
class Rules:
    """The window (N samples, none older than T) and the soft lag-time limit."""

    samples: int = 5
    max_age_ms: int = 60 * 60_000
    warn_lag_ms: int | None = None


class Verdict(NamedTuple):
    """A queue's or group's status and why (a tuple: one is made per queue and run)."""

    status: Status
    #: the sentence, or (with ``facts``) a key of REASONS: 10,000 groups a run are evaluated and
    #: few of their sentences are ever shown, so they are made when asked for
    why: str
    facts: tuple[int, ...] = ()
    #: (samples so far, samples needed) while the window is still filling
    collecting: tuple[int, int] | None = None

    @property
    def reason(self) -> str:
        return REASONS[self.why](*self.facts) if self.facts else self.why


def _stall(offset: int, span: int, waiting: int, online: int) -> str:
    who = "clients not read" if online < 0 else f"{online} client(s) online"
    return f"offset {offset} unmoved for {format_duration(span)}, {waiting} waiting ({who})"


#: each evaluated status's sentence, from the facts the rule saw (offsets, counts, milliseconds)
REASONS: dict[str, Callable[..., str]] = {
    "rewind": lambda high, cur: f"consumer offset went back from {high} to {cur} ({high - cur} messages again)",
    "caught_up_ago": lambda ago: f"caught up {format_duration(ago)} ago",
    "collecting": lambda have, need: f"collecting ({have} of {need} samples)",
    "stop": lambda offset, idle, waiting: (
        f"offset {offset} unmoved for {format_duration(idle)}, {waiting} waiting, no client online"
    ),
    "stall": _stall,
    "falling": lambda first, last, span: (
        f"falling behind: lag grew at every sample, {first} -> {last} over {format_duration(span)}"
    ),
    "lag_time": lambda lag, limit: f"lag time {format_duration(lag)} above --warn-lag-time {format_duration(limit)}",
    "consuming": lambda moved, span, first, last: (
        f"consuming: +{moved} in {format_duration(span)}, {first} -> {last} behind"
    ),
}


@dataclass(frozen=True)
class Clients:
    """What the broker says about the group's clients now: ``online`` None when not read."""

    online: int | None = None


def evaluate_queue(window: Sequence[Sample], rules: Rules, clients: Clients) -> Verdict:
    """One queue's status over its window (oldest first, the current sample last)."""
    return evaluate_row(list(chain.from_iterable(window)), rules, clients)


def evaluate_row(row: Sequence[Any], rules: Rules, clients: Clients) -> Verdict:
    """``evaluate_queue`` over a window as the state file keeps it (flat: at_ms, consumer offset,
    max offset, lag time per sample). Written for 10,000 groups a run: the columns are sliced out
    and compared in C, no sample object is made, and no sentence."""
    if not row:
        return Verdict(Status.ERR, "no figures could be read")
    consumers = row[1::4]
    cur = consumers[-1]
    highest = max(consumers)
    if cur < highest:
        return Verdict(Status.REWIND, "rewind", (highest, cur))
    brokers = row[2::4]
    if brokers[-1] <= cur:
        return _CAUGHT_UP
    diffs = list(map(operator.sub, brokers, consumers))
    ats = row[0::4]
    if min(diffs) <= 0:
        last_zero = max(at for at, d in zip(ats, diffs, strict=True) if d <= 0)
        return Verdict(Status.OK, "caught_up_ago", (ats[-1] - last_zero,))
    if len(ats) < rules.samples:
        have = (len(ats), rules.samples)
        return Verdict(Status.OK, "collecting", have, collecting=have)
    now, since = ats[-1], ats[0]
    span = now - since
    moved_at = ats[consumers.index(cur)]
    idle, active = now - moved_at, moved_at - since
    if clients.online == 0 and idle > active:
        return Verdict(Status.STOP, "stop", (cur, idle, diffs[-1]))
    if cur == consumers[0]:
        online = -1 if clients.online is None else clients.online
        return Verdict(Status.STALL, "stall", (cur, span, diffs[-1], online))
    if all(map(operator.gt, diffs[1:], diffs)):
        return Verdict(Status.WARN, "falling", (diffs[0], diffs[-1], span))
    lag = row[-1]
    if rules.warn_lag_ms is not None and lag is not None and lag > rules.warn_lag_ms:
        return Verdict(Status.WARN, "lag_time", (lag, rules.warn_lag_ms))
    return Verdict(Status.OK, "consuming", (cur - consumers[0], span, diffs[0], diffs[-1]))


_CAUGHT_UP = Verdict(Status.OK, CAUGHT_UP)

#: ``status_code``'s codes, in the order a group's worst queue is chosen by: caught up and other
#: OKs tie, a collecting OK is above them (``worst_queue``), then WARN to REWIND
CODE_CAUGHT_UP, CODE_OK, CODE_COLLECTING, CODE_WARN, CODE_STALL, CODE_STOP, CODE_REWIND = range(7)
#: each code's status
CODE_STATUS = (Status.OK, Status.OK, Status.OK, Status.WARN, Status.STALL, Status.STOP, Status.REWIND)


def status_code(row: Sequence[Any], need: int, online: int | None, warn_lag_ms: int | None) -> int:
    """``evaluate_row``'s status of a non-empty window, as a code: the same rules in the same order,
    without a verdict, its facts or more columns than the status needs (80,000 queues a run; only
    a group's worst queue gets a verdict). ``need``: the window's samples; ``online``: the clients
    online, None when not read. A window whose offset has not moved (the commonest lagging one:
    stuck, stopped, or a cluster sampled more often than its groups commit) is decided from its
    consumer and max offsets alone."""
    consumers = row[1::4]
    cur = row[-3]
    n = len(consumers)
    if consumers.count(cur) == n:  # unmoved (so not rewound): every lag is the max offset minus ``cur``
        if row[-2] <= cur:
            return CODE_CAUGHT_UP
        if min(row[2::4]) <= cur:
            return CODE_OK
        if n < need:
            return CODE_COLLECTING
        # unmoved since the first sample: idle for the whole span, active for none of it
        return CODE_STOP if online == 0 and row[-4] > row[0] else CODE_STALL
    if cur < max(consumers):
        return CODE_REWIND
    if row[-2] <= cur:
        return CODE_CAUGHT_UP
    diffs = list(map(operator.sub, row[2::4], consumers))
    if min(diffs) <= 0:
        return CODE_OK
    if n < need:
        return CODE_COLLECTING
    moved_at = row[4 * consumers.index(cur)]
    if online == 0 and row[-4] - moved_at > moved_at - row[0]:
        return CODE_STOP
    if cur == consumers[0]:
        return CODE_STALL
    if all(map(operator.gt, diffs[1:], diffs)):
        return CODE_WARN
    lag = row[-1]
    if warn_lag_ms is not None and lag is not None and lag > warn_lag_ms:
        return CODE_WARN
    return CODE_OK


def uncommitted(online: int | None, waiting: Mapping[str, int]) -> Verdict:
    """A group without a committed offset on any queue has no window (a queue's samples begin
    with its first commit): its clients and the messages in the topics they subscribe to decide,
    as read now. A client that consumes commits within seconds (every 5 s), so clients online
    with messages waiting and nothing committed are stuck (STALL); a group set up and never
    started (no client online) is shown, not paged (WARN). ``online`` None: clients not read;
    ``waiting``: messages (max - min offset) in each subscribed topic."""
    if online is None:
        return Verdict(Status.WARN, "no offset committed on any queue (clients not read)")
    if online == 0:
        return Verdict(Status.WARN, "never consumed: no offset committed on any queue, no client online")
    total = sum(waiting.values())
    if total:
        where = ", ".join(t for t, n in sorted(waiting.items()) if n)
        return Verdict(
            Status.STALL, f"{online} client(s) online, no offset committed, {total} message(s) waiting in {where}"
        )
    subscribed = ", ".join(sorted(waiting)) or "no topic subscribed"
    return Verdict(Status.OK, f"{online} client(s) online, no offset committed yet, nothing to consume ({subscribed})")


def evaluate_group(verdicts: Mapping[str, Verdict], first: str | None = None) -> Verdict:
    """The worst queue's status, its reason named by queue, and how many queues share it;
    ``first``: the worst queue when the caller knows it (``worst_queue``)."""
    first = first or worst_queue(verdicts)
    if first is None:
        return Verdict(Status.OK, "no queues")
    worst = verdicts[first]
    return _group_verdict(
        first,
        worst,
        sum(1 for v in verdicts.values() if v.status == worst.status),
        len(verdicts),
        worst.status == Status.OK and all(v.why == CAUGHT_UP for v in verdicts.values()),
    )


def _group_verdict(first: str, worst: Verdict, named: int, total: int, all_caught_up: bool) -> Verdict:
    """A group's verdict from its worst queue's (key ``first``), the number of queues with the same
    status, of all its queues, and whether every one is caught up (needed when the worst is OK)."""
    if worst.status == Status.OK and worst.collecting:
        return worst
    if worst.status == Status.OK:
        if all_caught_up:
            return Verdict(Status.OK, CAUGHT_UP)
        return Verdict(Status.OK, f"{total} queue(s) OK")
    more = f" (and {named - 1} more of {total} queues)" if named > 1 else ""
    where = first.split(" ", 1)[1]  # the queue, without the group the reason is about
    return Verdict(worst.status, f"{where}: {worst.reason}{more}")


def worst_queue(verdicts: Mapping[str, Verdict]) -> str | None:
    """The key of the queue a group's status comes from: the worst status (a collecting OK above
    a settled one), the first by name among equals."""
    if not verdicts:
        return None
    top = max(v.status for v in verdicts.values())
    worst = [k for k, v in verdicts.items() if v.status == top]
    collecting = [k for k in worst if verdicts[k].collecting is not None]
    return min(collecting or worst)


def fails(status: Status, fail_on: Status) -> bool:
    return status != Status.OK and status >= fail_on


def state_path(home: str | os.PathLike[str], address: str) -> Path:
    """One state file per address: a readable slug plus a hash, so two addresses never share one."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", address)[-60:].strip("_.") or "default"
    digest = hashlib.sha256(address.encode()).hexdigest()[:10]
    return Path(home) / "state" / f"health-{slug}-{digest}.json"


@dataclass
class Block:
    """The windows of queues sampled at the same runs, as columns: the runs' times once, and per
    run one list of every queue's consumer offsets, one of max offsets, one of lag times. An
    all-groups run samples every queue at once (80,000 at 10,000 groups): it moves their windows
    on by dropping a column and appending one, and decides the commonest statuses a column at a
    time, where rows cost a list per queue to read, move, evaluate and write back."""

    ats: list[int]
    #: a queue taken out as a row (``take``) leaves None in its place until the block is rebuilt
    keys: list[str | None]
    consumers: list[list[int]]
    brokers: list[list[int]]
    lags: list[list[int | None]]
    _index: dict[str, int] | None = None

    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self.keys) if k is not None}
        return self._index

    def row(self, i: int) -> list[Any]:
        """Queue ``i``'s window as a row (``Windows``)."""
        out: list[Any] = []
        for at, c, b, lag in zip(self.ats, self.consumers, self.brokers, self.lags, strict=True):
            out += (at, c[i], b[i], lag[i])
        return out

    def take(self, key: str) -> list[Any] | None:
        """A queue's window out of the block, as a row (a run that samples it alone: -g)."""
        i = self.index().pop(key, None)
        if i is None:
            return None
        self.keys[i] = None
        return self.row(i)

    def rows(self) -> dict[str, list[Any]]:
        return {k: self.row(i) for i, k in enumerate(self.keys) if k is not None}

    def to_json(self) -> list[Any]:
        keep = [k is not None for k in self.keys]
        if all(keep):
            return [self.ats, self.keys, self.consumers, self.brokers, self.lags]
        cols = [[list(compress(c, keep)) for c in cs] for cs in (self.consumers, self.brokers, self.lags)]
        return [self.ats, list(compress(self.keys, keep)), *cols]

    @classmethod
    def from_json(cls, doc: Any) -> Block:
        """``to_json``'s list, its shape checked (the numbers the state file's checksum vouches for)."""
        if not isinstance(doc, list) or len(doc) != 5 or not {list}.issuperset(map(type, doc)):
            raise ValueError("not a health state file")
        ats, keys, *cols = doc
        if not ats or not {int}.issuperset(map(type, ats)) or not {str}.issuperset(map(type, keys)):
            raise ValueError("not a health state file")
        for cs in cols:
            if len(cs) != len(ats) or not {list}.issuperset(map(type, cs)) or {len(keys)} != set(map(len, cs)):
                raise ValueError("not a health state file")
        return cls(ats, keys, *cols)


@dataclass
class Windows:
    """Every queue's samples, keyed by a queue name (``group topic broker qid``): the queues an
    all-groups run sampled together in ``block``, the others as flat rows of ``at_ms, consumer,
    broker, lag_ms`` per sample, oldest first (no object per sample: a run reads, evaluates and
    writes back 400,000 samples at 10,000 groups). A key is in one of them, never both."""

    rules: Rules
    #: rows of ints, but the lag time of a sample may be null
    queues: dict[str, list[Any]] = field(default_factory=dict)
    block: Block | None = None

    def add(self, key: str, sample: Sample) -> list[Sample]:
        """``add_row`` as samples."""
        return samples_of(self.add_row(key, sample))

    def add_row(self, key: str, sample: SampleRow) -> list[Any]:
        """Append (a sample at the same instant as the last replaces it) and trim to the window;
        the queue's row, a new list each time (a result printed earlier keeps its own)."""
        row = self.queues.get(key)
        if row is None and self.block is not None:
            row = self.block.take(key)
        if not row:
            row = []
        if row and row[-4] >= sample[0]:
            row = row[:-4]
        kept = 4 * (self.rules.samples - 1)  # the samples before this one
        row = [*row[-kept:], *sample] if row and kept > 0 else list(sample)
        oldest = sample[0] - self.rules.max_age_ms
        if row[0] < oldest:
            row = _since(row, oldest)
        self.queues[key] = row
        return row

    def rows(self) -> dict[str, list[Any]]:
        """Every queue's window as a row, the block's too."""
        return {**self.queues, **(self.block.rows() if self.block is not None else {})}

    def prune(self, now_ms: int) -> None:
        """Queues not seen for longer than the window (a deleted group) leave the state."""
        oldest = now_ms - self.rules.max_age_ms
        if self.block is not None and self.block.ats[-1] < oldest:
            self.block = None
        with contextlib.suppress(IndexError):  # an empty row: looked at one by one below
            if min(map(_LAST_AT, self.queues.values()), default=oldest) >= oldest:
                return  # the commonest run: every queue seen within the window (checked in C)
        for key in [k for k, row in self.queues.items() if len(row) < 4 or row[-4] < oldest]:
            del self.queues[key]

    def to_bytes(self) -> bytes:
        """The state file: a first line naming the format, the length and CRC-32 of the JSON after
        it. The checksum is what makes reading cheap: a file this module wrote, whole, needs none
        of its 1.2 million numbers (10,000 groups) checked one by one."""
        block = self.block.to_json() if self.block is not None else None
        body = orjson.dumps({"rows": self.queues, "block": block})
        return f"{STATE_FORMAT} {len(body)} {zlib.crc32(body):08x}\n".encode() + body

    @classmethod
    def from_bytes(cls, data: bytes, rules: Rules) -> Windows:
        """``to_bytes``'s file, or one of the earlier forms (``from_json``, rows only); ValueError
        for anything else: another program's file, or one cut short or changed since written."""
        if data[:1] == b"{":
            return cls.from_json(orjson.loads(data), rules)
        end = data.find(b"\n", 0, 200)
        fields = data[:end].split(b" ")
        if end < 0 or len(fields) != 3 or fields[0] not in (STATE_FORMAT.encode(), STATE_FORMAT_2.encode()):
            raise ValueError("not a health state file")
        body = memoryview(data)[end + 1 :]  # 10 MB at 10,000 groups: not copied
        if int(fields[1]) != len(body) or int(fields[2], 16) != zlib.crc32(body):
            raise ValueError("a health state file cut short or changed since written")
        doc = orjson.loads(body)
        if fields[0] == STATE_FORMAT_2.encode():
            doc = {"rows": doc, "block": None}
        if not isinstance(doc, dict) or set(doc) != {"rows", "block"}:
            raise ValueError("not a health state file")
        rows, block = doc["rows"], doc["block"]
        # the shape, in C over the rows (milliseconds); their numbers the checksum vouches for
        if not isinstance(rows, dict) or not {list}.issuperset(map(type, rows.values())):
            raise ValueError("not a health state file")
        if any(n % 4 or not n for n in set(map(len, rows.values()))):
            raise ValueError("not a health state file")
        return cls(rules, rows, None if block is None else Block.from_json(block))

    @classmethod
    def from_json(cls, doc: Any, rules: Rules) -> Windows:
        """The earlier state file (one JSON document, no checksum): every value checked."""
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT_1 or not isinstance(doc.get("queues"), dict):
            raise ValueError("not a health state file")
        # one pass checks they are whole-number rows still, over all rows at once: every row a
        # list of samples, every value an int or null, and the nulls only where lag times are
        rows = doc["queues"]
        if not {list}.issuperset(map(type, rows.values())) or any(n % 4 for n in set(map(len, rows.values()))):
            raise ValueError("not a health state file")
        types = set(map(type, chain.from_iterable(rows.values())))
        if not _INT_OR_NULL.issuperset(types):
            raise ValueError("not a health state file")
        if _NONE_TYPE in types:
            values = list(chain.from_iterable(rows.values()))
            if None in values[0::4] or None in values[1::4] or None in values[2::4]:
                raise ValueError("not a health state file")
        return cls(rules, rows)


def _since(row: list[Any], oldest: int) -> list[Any]:
    """``row`` without its samples older than ``oldest`` (its last sample is not)."""
    ats = row[0::4]
    return row[4 * next(i for i, at in enumerate(ats) if at >= oldest) :]


#: a row's last sample's time
_LAST_AT = operator.itemgetter(-4)
#: the types a state file's rows may hold (bool is not int here: ``type(True) is bool``)
_NONE_TYPE = type(None)
_INT_OR_NULL = frozenset((int, _NONE_TYPE))


def queue_key(group: str, topic: str, broker: str, queue_id: int, client: str | None = None) -> str:
    """``group [client] topic broker qid``: names never hold spaces (the broker's name rule)."""
    if client:
        return f"{group} {client} {topic} {broker} {queue_id}"
    return f"{group} {topic} {broker} {queue_id}"


class StateFile:
    """The samples of earlier runs against one address: read under an exclusive lock, written
    back atomically (temp + rename) before the lock is released, so two cron runs at once take
    turns instead of losing each other's samples or leaving half a file."""

    def __init__(self, path: Path, rules: Rules, warn: Any = None) -> None:
        self.path = path
        self.rules = rules
        self._warn = warn

    @contextlib.contextmanager
    def open(self, now_ms: int) -> Iterator[Windows]:
        """The windows to add this run's samples to; saved when the block ends without error."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock(fd, lock_path)
            with collector_paused():  # many small acyclic lists: the cyclic collector only costs time
                windows = self._load()
                yield windows
                windows.prune(now_ms)
                atomic_write(self.path, windows.to_bytes())
                # the windows stay alive until the output is printed: collections after this one
                # need not scan their million objects again and again
                gc.freeze()
        finally:
            os.close(fd)  # releases the lock

    def _load(self) -> Windows:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return Windows(self.rules)
        try:
            return Windows.from_bytes(data, self.rules)
        except (ValueError, KeyError, TypeError, IndexError):
            if self._warn is not None:
                self._warn(f"health state {self.path} could not be read; starting a new window")
            return Windows(self.rules)


def _lock(fd: int, path: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() > deadline:
                raise errors.MqadminError(
                    f"health state {path} is held by another run for over {LOCK_WAIT_S:.0f} s; try again later"
                ) from None
            time.sleep(0.05)


def samples_json(window: Iterable[Sample]) -> list[dict[str, Any]]:
    return [s.to_json() for s in window]


def window_brief(row: Sequence[Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    """A window in brief, from its flat row: how many samples, since when, the consumer offsets
    and the lags (``Sample.diff``); added to ``into`` when given (one per group: no dict merged)."""
    consumers = row[1::4]
    doc = {} if into is None else into
    doc["samples"] = len(consumers)
    doc["since_ms"] = row[0]
    doc["consumer_offsets"] = consumers
    diffs = list(map(operator.sub, row[2::4], consumers))
    doc["diffs"] = diffs if min(diffs) >= 0 else [d if d > 0 else 0 for d in diffs]
    return doc


def samples_of(row: Sequence[Any]) -> list[Sample]:
    """A flat row of the state file as samples."""
    it = iter(row)
    return list(map(Sample._make, zip(it, it, it, it, strict=True)))


@dataclass(slots=True)
class QueueHealth:
    verdict: Verdict
    #: the window as a flat row (``Windows``)
    row: list[Any]

    @property
    def window(self) -> list[Sample]:
        return samples_of(self.row)

    def to_json(self) -> dict[str, Any]:
        return {**verdict_json(self.verdict), "samples": samples_json(self.window)}


@dataclass
class GroupHealth:
    """A group's status and each of its queues' (keyed by ``queue_key``)."""

    verdict: Verdict
    #: every queue (``assess``), or only the worst one when ``counts`` is given (``assess_brief``)
    queues: dict[str, QueueHealth] = field(default_factory=dict)
    #: the key of the queue the status comes from (``worst_queue``), None without queues
    worst: str | None = None
    #: how many queues have each status, in the order of the queues that first have it
    counts: dict[str, int] | None = None

    def status_counts(self) -> dict[str, int]:
        if self.counts is not None:
            return self.counts
        names = [STATUS_NAMES[q.verdict.status] for q in self.queues.values()]
        return {name: names.count(name) for name in dict.fromkeys(names)}


def verdict_json(v: Verdict) -> dict[str, Any]:
    # int(): a list indexed by the IntEnum itself takes a slower path (10,000 groups a run)
    return {"status": STATUS_NAMES[int(v.status)], "reason": v.reason, "collecting": v.collecting is not None}


#: each status's name by its value (``Status.name`` is a property: slow for 80,000 queues)
STATUS_NAMES = [s.name for s in Status]


def status_cell(v: Verdict) -> str:
    """The table's Status: the status, or how far the window is ("3/5") while collecting."""
    if v.collecting:
        return f"collecting {v.collecting[0]}/{v.collecting[1]}"
    return v.status.name


class MemoryState:
    """--watch: the samples live as long as the run, and no other run shares them."""

    def __init__(self, rules: Rules) -> None:
        self.windows = Windows(rules)

    @contextlib.contextmanager
    def open(self, now_ms: int) -> Iterator[Windows]:
        yield self.windows
        self.windows.prune(now_ms)


def assess(
    windows: Windows, rules: Rules, samples: Iterable[tuple[str, SampleRow]], clients: Clients, error: str | None = None
) -> GroupHealth:
    """A group's health: each queue's sample added to its window and evaluated; ``error``: the
    group's figures are incomplete (a broker did not answer), which makes it ERR whatever its
    queues say."""
    queues: dict[str, QueueHealth] = {}
    verdicts: dict[str, Verdict] = {}
    add = windows.add_row
    for key, sample in samples:
        row = add(key, sample)
        verdicts[key] = v = evaluate_row(row, rules, clients)
        queues[key] = QueueHealth(v, row)
    worst = worst_queue(verdicts)
    verdict = evaluate_group(verdicts, worst)
    if error is not None:
        verdict = Verdict(Status.ERR, error)
    return GroupHealth(verdict, queues, worst)


def assess_all(
    windows: Windows,
    rules: Rules,
    now: int,
    keys: list[str],
    consumers: list[int],
    brokers: list[int],
    lags: list[int | None],
    groups: Sequence[tuple[str, int, Clients, str | None]],
) -> dict[str, GroupHealth]:
    """Every group of a cluster in one pass (its output shows each group's status, its queues
    counted by status and its worst queue): the windows and statuses ``assess`` gives, but the
    queues of the block move on and are decided a column at a time, and only each group's worst
    queue gets a verdict. The samples, all taken at ``now``, come as columns over every group's
    queues (the block keeps them: not to be changed after); ``groups``: each group's name, number
    of queues, clients and error (its figures are incomplete: ERR), in the columns' order."""
    n = len(keys)
    block = windows.block
    # each queue's place in the block (None: the block holds these keys in this order), -1: not there
    idx: list[int] | None = None
    fresh: list[int] = []
    if block is None or block.keys != keys:
        where = block.index() if block is not None else {}
        idx = [where.get(k, -1) for k in keys]
        fresh = [i for i, j in enumerate(idx) if j < 0]
        if block is not None and len(where) > n - len(fresh):  # queues this run did not read: as they were
            seen = set(idx)
            windows.queues.update((k, block.row(j)) for k, j in where.items() if j not in seen)
    onl: list[int | None] = []
    for _, count, clients, _ in groups:
        onl += [clients.online] * count
    need, warn = rules.samples, rules.warn_lag_ms
    ats: list[int] = []
    cols: list[list[list[Any]]] = [[], [], []]  # per run: consumer offsets, max offsets, lag times
    codes = [0] * n
    if block is not None and len(fresh) < n:
        start, end = _kept_runs(block.ats, now, rules)
        ats = [*block.ats[start:end], now]
        olds: tuple[list[list[Any]], ...] = (block.consumers, block.brokers, block.lags)
        for cs, old in zip(cols, olds, strict=True):
            # a queue not in the block (-1) gets a stand-in, replaced below
            cs += old[start:end] if idx is None else [[col[j] for j in idx] for col in old[start:end]]
        news: tuple[list[Any], ...] = (consumers, brokers, lags)
        for cs, new in zip(cols, news, strict=True):
            cs.append(new)
        codes = _column_codes(ats, cols[0], cols[1], need, onl)
    for i in fresh:
        row = windows.add_row(keys[i], (now, consumers[i], brokers[i], lags[i]))
        codes[i] = status_code(row, need, onl[i], warn)

    runs = list(zip(ats, *cols, strict=True))  # per run: its time and its three columns

    def row_at(i: int) -> list[Any]:
        if idx is not None and idx[i] < 0:
            return list(windows.queues[keys[i]])
        out: list[Any] = []
        for at, c, b, lag in runs:
            out += (at, c[i], b[i], lag[i])
        return out

    for i in [i for i, c in enumerate(codes) if c < 0]:  # moved, behind, not rewound: row by row
        codes[i] = status_code(row_at(i), need, onl[i], warn)
    healths: dict[str, GroupHealth] = {}
    s = 0
    for name, count, clients, error in groups:
        healths[name] = _group_brief(keys, codes, s, s + count, row_at, rules, clients, error)
        s += count
    windows.block = _next_block(windows, keys, fresh, ats, cols)
    return healths


def _kept_runs(ats: list[int], now: int, rules: Rules) -> tuple[int, int]:
    """The runs of ``ats`` a window keeps when a sample at ``now`` is added, as ``add_row`` keeps
    a row's samples: ``ats[start:end]``."""
    end = len(ats) - 1 if ats and ats[-1] >= now else len(ats)
    start = max(end - (rules.samples - 1), 0) if rules.samples > 1 else end
    oldest = now - rules.max_age_ms
    while start < end and ats[start] < oldest:
        start += 1
    return start, end


def _column_codes(
    ats: list[int], consumers: list[list[int]], brokers: list[list[int]], need: int, onl: list[int | None]
) -> list[int]:
    """``status_code`` of queues sampled at the same runs ``ats``, from their columns; -1 for a
    queue whose offset moved and is behind, not rewound (``status_code`` decides it from its row).
    A window whose offset has not moved is the commonest lagging one: min and max per queue over
    the columns, in C, decide it."""
    if len(ats) > 1:
        lo, hi, lowest = list(map(min, *consumers)), list(map(max, *consumers)), list(map(min, *brokers))
    else:
        lo = hi = consumers[0]
        lowest = brokers[0]

    def code(
        lo: int,
        hi: int,
        cur: int,
        last: int,
        lowest: int,
        online: int | None,
        collecting: bool = len(ats) < need,
        spread: bool = ats[-1] > ats[0],
    ) -> int:
        if lo == hi:
            if last <= cur:
                return CODE_CAUGHT_UP
            if lowest <= cur:
                return CODE_OK
            if collecting:
                return CODE_COLLECTING
            return CODE_STOP if online == 0 and spread else CODE_STALL
        if cur < hi:
            return CODE_REWIND
        return CODE_CAUGHT_UP if last <= cur else -1

    return list(map(code, lo, hi, consumers[-1], brokers[-1], lowest, onl))


def _next_block(
    windows: Windows, keys: list[str], fresh: list[int], ats: list[int], cols: list[list[list[Any]]]
) -> Block | None:
    """The block after an all-groups run: its queues, and the rows whose samples are now at
    exactly its runs (a new group's once its window fills; every queue, the first run after a
    state file of rows only). ``fresh``: the places in ``keys`` of the queues kept as rows."""
    rows = windows.queues
    if not ats:  # no queue was in the block: the first row's runs are the block's
        if not fresh:
            return None
        ats = rows[keys[fresh[0]]][0::4]
        cols = [[[0] * len(keys) for _ in ats] for _ in range(3)]
    joining = [i for i in fresh if rows[keys[i]][0::4] == ats]
    for i in joining:
        row = rows.pop(keys[i])
        for j in range(len(ats)):
            cols[0][j][i], cols[1][j][i], cols[2][j][i] = row[4 * j + 1 : 4 * j + 4]
    if len(joining) < len(fresh):
        keep = [True] * len(keys)
        for i in set(fresh).difference(joining):
            keep[i] = False
        cols = [[list(compress(c, keep)) for c in cs] for cs in cols]
        keys = list(compress(keys, keep))
    return Block(ats, list(keys), cols[0], cols[1], cols[2]) if keys else None


def _group_brief(
    keys: list[str],
    codes: list[int],
    s: int,
    e: int,
    row_at: Callable[[int], list[Any]],
    rules: Rules,
    clients: Clients,
    error: str | None,
) -> GroupHealth:
    """One group's health from its queues' codes (``keys[s:e]``): the worst queue's verdict, the
    group's, and the queues counted by status."""
    counts: dict[str, int] = {}
    if s == e:
        verdict, worst, found = Verdict(Status.OK, "no queues"), None, {}
    else:
        ks, cs = keys[s:e], codes[s:e]
        top = max(cs)
        named = cs.count(top)
        # worst_queue's choice: a collecting OK above a settled one, the first by name among equals
        if top <= CODE_OK or named == len(cs):
            worst = min(ks)
        else:
            worst = min([k for k, c in zip(ks, cs, strict=True) if c == top])
        row = row_at(s + ks.index(worst))
        if top == CODE_CAUGHT_UP:
            v = _CAUGHT_UP
        else:
            v = evaluate_row(row, rules, clients)
            v = Verdict(v.status, v.reason, (), v.collecting)  # its sentence made once, shown twice
        verdict = _group_verdict(worst, v, named, len(cs), top == CODE_CAUGHT_UP)
        found = {worst: QueueHealth(v, row)}
        if named == len(cs):  # the commonest group: every queue alike
            counts[STATUS_NAMES[CODE_STATUS[top]]] = named
        else:
            for code in dict.fromkeys(cs):
                name = STATUS_NAMES[CODE_STATUS[code]]
                counts[name] = counts.get(name, 0) + cs.count(code)
    if error is not None:
        verdict = Verdict(Status.ERR, error)
    return GroupHealth(verdict, found, worst, counts)
