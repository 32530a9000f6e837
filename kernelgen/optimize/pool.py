"""The judges one operator's rounds use: its own (every check, every final timing), and judges on
other GPUs of the host that only time candidates in searches (kernelgen.optimize.search) — the ones
`kernelgen optimize --gpus` names, then GPUs an idle batch worker lends (kernelgen.lending), claimed
when a search has more candidates than judges and kept until the operator is done.

On one GPU, or under the interpreter (where nothing is searched), there are no others: the pool is
the operator's judge alone.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from kernelgen.devices import PIN_VARS, DeviceInfo
from kernelgen.lending import Loan, claim
from kernelgen.verify.judge.judge import Judge


class JudgePool:
    def __init__(self, home: Judge, others: Sequence[DeviceInfo] = (), *, on_step: Callable[[str], None] = lambda s: None):
        self.home = home
        self._fixed = [home.elsewhere(d) for d in others]
        self._borrowed: list[tuple[Loan, Judge]] = []
        self._on_step = on_step

    def _taken(self) -> set[str]:
        """Ids this operator already runs on: its own device's (by its pin, or the environment that
        pins this process) and every other judge's."""
        dev = self.home.device
        own = {s.strip() for s in os.environ.get(PIN_VARS.get(dev.kind, ""), "").split(",") if s.strip()}
        pins = [dev.pin, *(j.device.pin for j in self._fixed), *(loan.token.device_id for loan, _ in self._borrowed)]
        return own | {p for p in pins if p is not None}

    def spares(self, wanted: int) -> list[Judge]:
        """Up to `wanted` judges besides the operator's own for one search: `--gpus`'s first, then
        borrowed ones, claimed now while there are fewer than `wanted`."""
        have = self._fixed + [j for _, j in self._borrowed]
        dev = self.home.device
        if len(have) < wanted and not dev.interpreter:
            for loan in claim(dev.kind, wanted - len(have), exclude=self._taken()):
                judge = self.home.elsewhere(dev.elsewhere(loan.token.device_id, loan.token.lock))
                self._borrowed.append((loan, judge))
                have.append(judge)
                self._on_step(f"borrowed {judge.device.label}, idle in the batch, for this operator's searches")
        return have[:wanted]

    def close(self) -> None:
        """Every judge closed, every borrowed GPU given back."""
        try:
            for judge in [*self._fixed, *(j for _, j in self._borrowed)]:
                judge.close()
        finally:
            for loan, _ in self._borrowed:
                loan.release()
            self._fixed, self._borrowed = [], []
            self.home.close()
