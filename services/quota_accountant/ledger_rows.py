"""The ledger as table rows, and back. Pure: no Kafka, no clock.

The service keeps the ledger in seven tables, each a compacted changelog topic (see
``services.quota_accountant.stream``). A row is JSON (orjson) bytes; a key is a UTF-8 string:

==============  =========================  ==========================================================
table           key                        row
==============  =========================  ==========================================================
``attempts``    ``<job id>/<attempt>``     an open attempt: admission, scale changes, start, end
``settled``     ``<job id>/<attempt>``     the end time of a settled attempt (idempotence, until
                                           the ledger's horizon)
``allocation``  ``<queue>``                GPUs held per ``gpu:<type>`` by unfinished attempts
``decayed``     ``<queue>``                decayed GPU-seconds (as of a time) and plain GPU-seconds
``budgets``     ``<tenant>``               settled GPU-seconds per day / week / month window
``bought``      ``<request name>``         a request for nodes: its queue, price, nodes accruing and
                                           given back (``services.quota_accountant.burst``)
``burst``       ``<queue>``                GPU-seconds and money of given-back nodes per window
==============  =========================  ==========================================================

``allocation`` is derived from ``attempts`` (it is what the queue's report lists); the ledger is
rebuilt from the others. ``TableMirror`` remembers the last row written per key, so only rows that
changed are written, and a repeated input writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

import orjson

from services.quota_accountant.attempts import Admission, Attempt, AttemptKey, Outcome
from services.quota_accountant.burst import BoughtRequest, BurstLedger, Spend
from services.quota_accountant.ledger import Book, Ledger
from services.quota_accountant.windows import WindowKind

TableName = Literal["attempts", "settled", "allocation", "decayed", "budgets", "bought", "burst"]
TABLES: tuple[TableName, ...] = get_args(TableName)

Row = bytes | None
"""A row's bytes, or None for a deleted key (a tombstone in the changelog)."""


@dataclass(frozen=True)
class Change:
    table: TableName
    key: str
    row: Row


def attempt_key(key: AttemptKey) -> str:
    return f"{key[0]}/{key[1]}"


def parse_attempt_key(text: str) -> AttemptKey:
    job, _, attempt = text.rpartition("/")
    return job, int(attempt)


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# ---------------------------------------------------------------------- rows of each table


def attempt_row(record: Attempt) -> bytes:
    admission = record.admission
    return _dumps({
        "admission": None if admission is None else {
            "queue": admission.queue, "tenant": admission.tenant, "gpu_type": admission.gpu_type,
            "gpus_per_pod": admission.gpus_per_pod, "replicas": admission.replicas,
            "admitted_at": admission.admitted_at, "fixed_gpus": admission.fixed_gpus,
        },
        "scales": sorted([at, replicas] for at, replicas in record.scales.items()),
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "outcome": record.outcome,
    })


def attempt_of(key: str, row: bytes) -> Attempt:
    data = orjson.loads(row)
    job_id, attempt = parse_attempt_key(key)
    given = data["admission"]
    admission = None if given is None else Admission(
        queue=given["queue"], tenant=given["tenant"], gpu_type=given["gpu_type"],
        gpus_per_pod=given["gpus_per_pod"], replicas=given["replicas"], admitted_at=given["admitted_at"],
        fixed_gpus=given.get("fixed_gpus", 0.0),  # rows written before roles have none
    )
    return Attempt(
        job_id, attempt, admission,
        scales={float(at): int(replicas) for at, replicas in data["scales"]},
        started_at=data["started_at"], ended_at=data["ended_at"], outcome=cast(Outcome | None, data["outcome"]),
    )


def settled_row(ended_at: float) -> bytes:
    return _dumps({"ended_at": ended_at})


def allocation_row(allocated: Mapping[str, float]) -> bytes | None:
    return _dumps(dict(allocated)) if allocated else None


def book_row(book: Book) -> bytes:
    return _dumps({"decayed": book.decayed, "as_of": book.as_of, "gpu_seconds": book.gpu_seconds})


def book_of(row: bytes) -> Book:
    data = orjson.loads(row)
    return Book(data["decayed"], data["as_of"], data["gpu_seconds"])


def buckets_row(buckets: Mapping[tuple[WindowKind, float], float]) -> bytes | None:
    if not buckets:
        return None
    return _dumps(sorted([kind, start, seconds] for (kind, start), seconds in buckets.items()))


def buckets_of(row: bytes) -> dict[tuple[WindowKind, float], float]:
    return {(cast(WindowKind, kind), float(start)): seconds for kind, start, seconds in orjson.loads(row)}


def request_row(request: BoughtRequest) -> bytes:
    return _dumps({
        "queue": request.queue, "cluster": request.cluster, "group": request.group,
        "gpus_per_node": request.gpus_per_node, "price": request.price_per_gpu_hour, "nodes": request.nodes,
        "provisioned_at": request.provisioned_at, "failed": request.failed, "held": request.held,
        "closed": request.closed, "last": request.last,
    })


def request_of(row: bytes) -> BoughtRequest:
    data = orjson.loads(row)
    return BoughtRequest(
        queue=data["queue"], cluster=data["cluster"], group=data["group"], gpus_per_node=data["gpus_per_node"],
        price_per_gpu_hour=data["price"], nodes=data["nodes"], provisioned_at=data["provisioned_at"],
        failed=data["failed"], held=dict(data["held"]), closed=dict(data["closed"]), last=data["last"],
    )


def spend_row(spend: Spend) -> bytes | None:
    if not spend:
        return None
    return _dumps(sorted([kind, start, seconds, money] for (kind, start), (seconds, money) in spend.items()))


def spend_of(row: bytes) -> dict[tuple[WindowKind, float], tuple[float, float]]:
    return {(cast(WindowKind, kind), float(start)): (seconds, money)
            for kind, start, seconds, money in orjson.loads(row)}


# ---------------------------------------------------------------------- ledger <-> tables


def ledger_of(half_life_s: float, horizon_s: float, rows: Mapping[TableName, Mapping[str, bytes]]) -> Ledger:
    """The ledger the tables hold (``allocation`` is derived and not read)."""
    return Ledger.load(
        half_life_s, horizon_s,
        attempts=[attempt_of(k, v) for k, v in rows.get("attempts", {}).items()],
        settled={parse_attempt_key(k): orjson.loads(v)["ended_at"] for k, v in rows.get("settled", {}).items()},
        books={q: book_of(v) for q, v in rows.get("decayed", {}).items()},
        buckets={t: buckets_of(v) for t, v in rows.get("budgets", {}).items()},
        burst=BurstLedger(horizon_s, requests={k: request_of(v) for k, v in rows.get("bought", {}).items()},
                          spend={q: spend_of(v) for q, v in rows.get("burst", {}).items()}),
    )


def rows_of(ledger: Ledger) -> dict[TableName, dict[str, bytes]]:
    """Every row the ledger's state is written as."""
    rows: dict[TableName, dict[str, bytes]] = {name: {} for name in TABLES}
    rows["attempts"] = {attempt_key(k): attempt_row(a) for k, a in ledger.attempts.items()}
    rows["settled"] = {attempt_key(k): settled_row(t) for k, t in ledger.settled.items()}
    for queue in ledger.queue_names():
        allocation = allocation_row(ledger.allocation(queue))
        if allocation is not None:
            rows["allocation"][queue] = allocation
    for queue in ledger.booked_queues():
        book = ledger.book(queue)
        if book is not None:
            rows["decayed"][queue] = book_row(book)
    for tenant in ledger.tenant_names():
        buckets = buckets_row(ledger.buckets(tenant))
        if buckets is not None:
            rows["budgets"][tenant] = buckets
    rows["bought"] = {name: request_row(r) for name, r in ledger.burst.requests.items()}
    for queue, spend in ledger.burst.spend.items():
        row = spend_row(spend)
        if row is not None:
            rows["burst"][queue] = row
    return rows


@dataclass
class TableMirror:
    """The rows last written per table and key: what the tables hold, without asking them."""

    rows: dict[TableName, dict[str, bytes]] = field(default_factory=lambda: {name: {} for name in TABLES})

    @classmethod
    def of(cls, rows: Mapping[TableName, Mapping[str, bytes]]) -> TableMirror:
        return cls({name: dict(rows.get(name, {})) for name in TABLES})

    def _put(self, table: TableName, key: str, row: Row, out: list[Change]) -> None:
        held = self.rows[table]
        if row is None:
            if key in held:
                del held[key]
                out.append(Change(table, key, None))
        elif held.get(key) != row:
            held[key] = row
            out.append(Change(table, key, row))

    def after_fact(self, ledger: Ledger, keys: Iterable[AttemptKey], queues: Iterable[str],
                   tenants: Iterable[str], burst: Iterable[str] = ()) -> list[Change]:
        """The rows a fact changed: the attempts it touched, the queues and tenants of its effect, and the
        requests for nodes and spend of the queues whose burst spend it changed."""
        out: list[Change] = []
        self._burst(ledger, set(burst), out)
        for key in keys:
            record = ledger.attempts.get(key)
            self._put("attempts", attempt_key(key), None if record is None else attempt_row(record), out)
            ended = ledger.settled.get(key)
            self._put("settled", attempt_key(key), None if ended is None else settled_row(ended), out)
        for queue in sorted(set(queues)):
            self._put("allocation", queue, allocation_row(ledger.allocation(queue)), out)
            book = ledger.book(queue)
            self._put("decayed", queue, None if book is None else book_row(book), out)
        for tenant in sorted(set(tenants)):
            self._put("budgets", tenant, buckets_row(ledger.buckets(tenant)), out)
        return out

    def after_prune(self, ledger: Ledger) -> list[Change]:
        """The rows ``Ledger.prune`` changed: forgotten settled keys and attempts, and trimmed budgets."""
        out: list[Change] = []
        for key in sorted(set(self.rows["settled"]) - {attempt_key(k) for k in ledger.settled}):
            self._put("settled", key, None, out)
        for key in sorted(set(self.rows["attempts"]) - {attempt_key(k) for k in ledger.attempts}):
            self._put("attempts", key, None, out)
        for queue in sorted(set(self.rows["allocation"])):
            self._put("allocation", queue, allocation_row(ledger.allocation(queue)), out)
        for tenant in sorted(set(self.rows["budgets"]) | ledger.tenant_names()):
            self._put("budgets", tenant, buckets_row(ledger.buckets(tenant)), out)
        for name in sorted(set(self.rows["bought"]) - set(ledger.burst.requests)):
            self._put("bought", name, None, out)
        self._burst(ledger, set(self.rows["burst"]) | set(ledger.burst.spend), out)
        return out

    def _burst(self, ledger: Ledger, queues: set[str], out: list[Change]) -> None:
        if not queues:
            return
        for name, request in sorted(ledger.burst.requests.items()):
            if request.queue in queues:
                self._put("bought", name, request_row(request), out)
        for queue in sorted(queues):
            self._put("burst", queue, spend_row(ledger.burst.spend.get(queue, {})), out)
