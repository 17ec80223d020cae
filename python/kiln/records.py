"""kiln.records: query a tuning records database (kiln tune's sqlite file),
like `kiln records` and `kiln tasks`."""

import dataclasses
import json
import os
from typing import List, Optional

from . import _kiln
from ._args import flag, text


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured config (the fields of `kiln records export`'s JSON lines)."""
    workload: str
    target: str
    config: dict
    times_ms: List[float]
    error: str           # "ok", "compile_error", "runtime_error", "timeout", ...
    error_message: str
    timestamp: int
    kiln_version: str
    gflops: float
    mean_ms: float       # what the best record is ranked by

    @staticmethod
    def _of(d):
        return Record(**dict(d, config=json.loads(d["config"])))


def target_key(target: Optional[str] = None) -> str:
    """The key records are stored and looked up by for `target` (default: this
    machine) with the runtime's thread count, as kiln build and tune use it."""
    return _kiln.target_key(text("target", target))


class Database:
    """A records database; open() it. Methods default to this machine's target key."""

    def __init__(self, path, create: bool = False):
        self._db = _kiln.RecordDB(os.fspath(path), flag("create", create))

    @property
    def path(self) -> str:
        return self._db.path

    def __len__(self) -> int:
        return self._db.count()

    def targets(self) -> List[str]:
        """Target keys with at least one record."""
        return self._db.targets()

    def workloads(self, target: Optional[str] = None) -> List[str]:
        """Workload keys with records on `target` (a target key; default: this machine's)."""
        return self._db.workloads(text("target", target) or target_key())

    def records(self, workload: str, target: Optional[str] = None) -> List[Record]:
        """Every record of a workload on a target, oldest first."""
        return [Record._of(r) for r in self._db.records(text("workload", workload, False),
                                                        text("target", target) or target_key())]

    def best(self, workload: str, target: Optional[str] = None) -> Optional[Record]:
        """The fastest verified record of a workload on a target, or None."""
        r = self._db.best(text("workload", workload, False), text("target", target) or target_key())
        return Record._of(r) if r is not None else None

    def best_records(self) -> List[Record]:
        """Per workload and target, the record a build would pick (and the
        fastest, when it differs): what `kiln records export --best` writes."""
        return [Record._of(r) for r in self._db.best_records()]

    def export(self, path, workload: Optional[str] = None, best: bool = False) -> int:
        """Writes records as JSON lines (kiln records export [--best]), whole
        or not at all; returns how many."""
        path = os.fspath(path)
        workload = text("workload", workload)
        if not flag("best", best):
            return self._db.export_jsonl(path, workload)
        return self._db.export_best_jsonl(path, workload)

    def import_(self, path) -> int:
        """Adds the records of a JSON-lines file, skipping those held already;
        a bad line imports nothing (KilnError naming it). Returns how many were added."""
        return self._db.import_jsonl(os.fspath(path))

    def __repr__(self):
        return f"<kiln.records.Database {self.path!r}: {len(self)} records>"


def open(path, create: bool = False) -> Database:  # noqa: A001 (kiln.records.open)
    """Opens a database; it must exist unless create=True."""
    return Database(path, create)
