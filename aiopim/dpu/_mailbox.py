"""Mailboxes of UPMEM's early run-time configuration: one system mailbox and one per tasklet.

The 2017 runtime configured them in a script (``tasklet add 0..15 medium main 1`` gives each of
16 tasklets a one-word mailbox, ``sysmbox 2`` a two-word system mailbox); a program declares the
same with :meth:`MailboxConfig.mailboxes`. Both live in emulated WRAM as two runtime variables,
``__sys_mbox`` (the system words) and ``__mbox`` (every tasklet's words, tasklet after tasklet),
which are not in the program's symbol table. Tasklets read them with ``sys_mbox_recv()`` /
``mbox_recv()`` and post with ``mbox_send()``; the host reaches them only through the Kelonia
interfaces (:mod:`aiopim.kelonia`), which get their addresses from :meth:`mailbox_symbols`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import timing
from .._machine._program import Symbol
from ._base import TaskletBase
from ._runner import DpuFault

if TYPE_CHECKING:
    from ._program import Var

#: WRAM symbol of the system mailbox
SYS_MBOX_SYMBOL = "__sys_mbox"
#: WRAM symbol of the tasklet mailboxes (tasklet 0's words first)
MBOX_SYMBOL = "__mbox"
WORD = timing.MBOX_WORD_BYTES


@dataclass(frozen=True)
class MailboxLayout:
    """Mailbox word counts of a program: the system mailbox and each tasklet's."""

    sysmbox_words: int
    mbox_words: tuple[int, ...]

    @property
    def nr_tasklets(self) -> int:
        """Tasklets the configuration covers."""
        return len(self.mbox_words)

    def mbox_offset(self, tasklet: int) -> int:
        """Byte offset of ``tasklet``'s mailbox inside ``__mbox``."""
        return WORD * sum(self.mbox_words[:tasklet])

    @property
    def mbox_bytes(self) -> int:
        """Size of ``__mbox``."""
        return WORD * sum(self.mbox_words)


class MailboxConfig:
    """``Program.mailboxes``: the ``sysmbox`` and per-tasklet mailbox lines of the script."""

    mailbox_layout: MailboxLayout | None = None

    if TYPE_CHECKING:  # provided by Program

        @property
        def nr_tasklets(self) -> int: ...

        def wram(self, name: str, dtype: Any = ..., count: int = 1, init: Any = None) -> Var: ...

        def address_of(self, var: Var | str) -> int: ...

    def mailboxes(self, sysmbox: int = 0, mbox: int | Sequence[int] = 0) -> MailboxLayout:
        """Declare a ``sysmbox``-word system mailbox and ``mbox`` words per tasklet (one count
        for every tasklet, or one per tasklet), like ``sysmbox N`` / ``tasklet add a..b … N``."""
        if self.mailbox_layout is not None:
            raise ValueError("the mailboxes are already declared")
        words = [mbox] * self.nr_tasklets if isinstance(mbox, int) else list(mbox)
        if len(words) != self.nr_tasklets:
            raise ValueError(f"give one mailbox size per tasklet ({self.nr_tasklets})")
        for what, n in [("sysmbox", sysmbox), *(("mbox", w) for w in words)]:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"{what} word counts must be integers >= 0, not {n!r}")
        layout = MailboxLayout(sysmbox, tuple(words))
        if sysmbox:
            self.wram(SYS_MBOX_SYMBOL, np.uint32, sysmbox)
        if layout.mbox_bytes:
            self.wram(MBOX_SYMBOL, np.uint32, layout.mbox_bytes // WORD)
        self.mailbox_layout = layout
        return layout

    def mailbox_symbols(self) -> tuple[Symbol | None, Symbol | None]:
        """Where the system mailbox and the tasklet mailboxes are in WRAM (None: no words)."""
        layout = self.mailbox_layout
        if layout is None:
            return None, None
        sys_sym = mbox_sym = None
        if layout.sysmbox_words:
            at = self.address_of(SYS_MBOX_SYMBOL)
            sys_sym = Symbol(SYS_MBOX_SYMBOL, at, WORD * layout.sysmbox_words)
        if layout.mbox_bytes:
            mbox_sym = Symbol(MBOX_SYMBOL, self.address_of(MBOX_SYMBOL), layout.mbox_bytes)
        return sys_sym, mbox_sym


class MailboxOps(TaskletBase):
    """``sys_mbox_recv``, ``mbox_recv`` and ``mbox_send``, mixed into ``Tasklet``."""

    def _mailbox_layout(self) -> MailboxLayout:
        layout = getattr(self.program, "mailbox_layout", None)
        if not isinstance(layout, MailboxLayout):
            raise DpuFault("mailbox access, but the program declares no mailboxes")
        return layout

    def sys_mbox_recv(self) -> np.ndarray:
        """The system mailbox: a ``uint32`` WRAM view of its words (what the host posted)."""
        layout = self._mailbox_layout()
        self._pending += timing.SYS_MBOX_RECV_INSTRUCTIONS
        if not layout.sysmbox_words:
            raise DpuFault("sys_mbox_recv: the system mailbox has no words (sysmbox 0)")
        return self.view(self.program.address_of(SYS_MBOX_SYMBOL), np.uint32, layout.sysmbox_words)

    def _own_mailbox(self, layout: MailboxLayout, what: str) -> np.ndarray:
        n = layout.mbox_words[self._id] if self._id < layout.nr_tasklets else 0
        if not n:
            raise DpuFault(f"{what}: tasklet {self._id} has no mailbox words")
        at = self.program.address_of(MBOX_SYMBOL) + layout.mbox_offset(self._id)
        return self.view(at, np.uint32, n)

    def mbox_recv(self) -> np.ndarray:
        """This tasklet's mailbox: a ``uint32`` WRAM view of its words."""
        layout = self._mailbox_layout()
        self._pending += timing.MBOX_RECV_INSTRUCTIONS
        return self._own_mailbox(layout, "mbox_recv")

    def mbox_send(self, data: Any) -> None:
        """``mbox_send(&x, sizeof x)``: copy ``data`` (an int as one ``uint32`` word, or any
        bytes-like / NumPy value, a multiple of 4 bytes) to the start of this tasklet's mailbox.
        A message larger than the mailbox faults the DPU."""
        layout = self._mailbox_layout()
        if isinstance(data, int | np.integer) and not isinstance(data, bool):
            raw = np.array([int(data) & 0xFFFFFFFF], dtype=np.uint32).view(np.uint8)
        else:
            raw = np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8)
        box = self._own_mailbox(layout, "mbox_send").view(np.uint8)
        if raw.size % WORD or raw.size > box.size:
            raise DpuFault(
                f"mbox_send: {raw.size} bytes do not fit tasklet {self._id}'s mailbox of "
                f"{box.size} bytes in whole words"
            )
        self._pending += timing.MBOX_SEND_INSTRUCTIONS + timing.memcpy_instructions(raw.size)
        box[: raw.size] = raw
