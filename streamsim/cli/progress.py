"""A progress line for a long ``check`` or ``run`` on a terminal: the phase it is in, with tqdm.

The command calls the :class:`Progress` with each phase's name as it starts (parse, simulate,
analyse, cost fixes, report). Nothing is shown for a command that ends within ``delay`` seconds,
nor when stderr is not a terminal (a pipe or a file gets no control characters); after that a
thread redraws the line every ``interval`` seconds, so the elapsed time moves during a long phase
(the phases run inside the engine and the analysis, which have no hooks to call back from).
"""
from __future__ import annotations

import sys
import threading
from typing import Sequence, TextIO


class Progress:
    """Shows ``phases`` on ``stream`` (default stderr) once the command has run ``delay`` s."""

    def __init__(self, phases: Sequence[str], stream: TextIO | None = None, *,
                 delay: float = 1.0, interval: float = 0.25):
        self.phases = list(phases)
        self._width = max(map(len, self.phases), default=0)
        self.done = 0
        self.current: str | None = None
        self._stream = sys.stderr if stream is None else stream
        self._delay, self._interval = delay, interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bar = None
        self._thread = threading.Thread(target=self._draw, name="progress", daemon=True)
        self._thread.start()

    def __call__(self, phase: str) -> None:
        """The command starts ``phase`` (the previous one is done)."""
        with self._lock:
            if self.current is not None:
                self.done += 1
            self.current = phase

    def close(self) -> None:
        """Stop drawing and clear the line (before the report is written to the terminal)."""
        self._stop.set()
        self._thread.join()
        if self._bar is not None:
            self._bar.close()

    def _draw(self) -> None:
        if self._stop.wait(self._delay):
            return
        from tqdm import tqdm  # (only for a command that runs long enough to show it)
        with self._lock:
            self._bar = tqdm(total=len(self.phases), file=self._stream, leave=False,
                             initial=self.done, desc=(self.current or "").ljust(self._width),
                             bar_format="streamsim: {desc} {bar:20} {n}/{total} phases done, "
                                        "{elapsed} elapsed")
        while True:
            with self._lock:
                self._bar.n = self.done
                self._bar.set_description_str((self.current or "").ljust(self._width),
                                              refresh=False)  # (the bar stays in one column)
                self._bar.refresh()
            if self._stop.wait(self._interval):
                return


class _Quiet:
    """No progress line (stderr is not a terminal)."""

    def __call__(self, phase: str) -> None:
        pass

    def close(self) -> None:
        pass


def progress(phases: Sequence[str]) -> Progress | _Quiet:
    """A progress line on stderr when it is a terminal, else nothing."""
    isatty = getattr(sys.stderr, "isatty", None)
    return Progress(phases) if isatty is not None and isatty() else _Quiet()
