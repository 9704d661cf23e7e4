"""A claim on once-per-study work, so that of several workers starting one study only one does it.

The reference sample of a combined objective is scored once per study, before the first trial. Two
workers started together on a new study would both score it (minutes on a decoder space). A
:class:`StudyClaim` is a lease held in a study user attribute: a worker writes its claim, waits a
moment and reads it back; whoever's claim is read back does the work, refreshing the claim as it
goes, and the others wait for the result. Optuna's storages offer no compare-and-set, so the
moment of waiting is what settles a race (two workers whose write and read-back straddle each other
for longer than ``settle`` seconds could both win; they would only repeat the work). A claim not
refreshed for ``stale_after`` seconds belongs to a worker that died, and may be taken over.

Example:
    >>> import optuna
    >>> study = optuna.create_study()
    >>> claim = StudyClaim(study, "doc.claim", settle=0.0)
    >>> claim.acquire(), claim.holder() == claim.owner
    (True, True)
    >>> claim.release(); claim.holder() is None
    True
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import optuna


class StudyClaim:
    """A lease on one piece of work of ``study``, kept in the study user attribute ``key``.

    Args:
        study: The study the work belongs to.
        key: The user attribute holding the claim (``{"owner", "time", "done", "total"}``).
        settle: Seconds between writing a claim and reading it back.
        stale_after: Seconds after which an unrefreshed claim counts as abandoned.
    """

    def __init__(self, study: optuna.Study, key: str, *, settle: float = 1.0, stale_after: float = 120.0) -> None:
        self.study, self.key = study, key
        self.settle, self.stale_after = settle, stale_after
        self.owner = uuid.uuid4().hex

    def _read(self) -> dict[str, Any] | None:
        value = self.study.user_attrs.get(self.key)
        return value if isinstance(value, dict) and value.get("owner") else None

    def holder(self) -> str | None:
        """The owner of the live claim, ``None`` when nobody holds one (or it went stale)."""
        claim = self._read()
        if claim is None or time.time() - float(claim.get("time", 0)) > self.stale_after:
            return None
        return claim["owner"]

    def progress(self) -> tuple[int, int] | None:
        """``(done, total)`` of the live claim's work, as its holder last reported."""
        claim = self._read()
        if claim is None:
            return None
        return int(claim.get("done", 0)), int(claim.get("total", 0))

    def acquire(self, total: int = 0) -> bool:
        """Claim the work unless another live claim holds it; whether this claim won."""
        holder = self.holder()
        if holder is not None and holder != self.owner:
            return False
        self.refresh(0, total)
        if self.settle:
            time.sleep(self.settle)
        return self.holder() == self.owner

    def refresh(self, done: int, total: int = 0) -> None:
        """Say the work goes on (``done`` of ``total``), so that waiting workers keep waiting."""
        self.study.set_user_attr(self.key, {"owner": self.owner, "time": time.time(), "done": done, "total": total})

    def release(self) -> None:
        """Give the claim up (the work is done, or was abandoned by this worker)."""
        if self.holder() == self.owner:
            self.study.set_user_attr(self.key, None)
