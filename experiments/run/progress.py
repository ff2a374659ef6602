"""A progress line: elapsed and remaining time of the batch and of the current run.

On a terminal it is one line rewritten in place every second; otherwise (a log file, CI) a
plain line every `every_s` seconds. The remaining time is the runs still to come at their
duration plus the bring-up/tear-down overhead measured so far.
"""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, durations_s: list[float], overhead_s: float, stream=None, every_s: float = 15.0):
        self.durations = list(durations_s)
        self.overhead_s = overhead_s
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self.started = time.monotonic()
        self.index = 0
        self.label = ""
        self.run_elapsed = 0.0
        self.overheads: list[float] = []
        self._last_print = 0.0
        self._dirty = False

    @staticmethod
    def fmt(seconds: float) -> str:
        seconds = max(0, int(round(seconds)))
        h, rest = divmod(seconds, 3600)
        return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"

    def _overhead(self) -> float:
        return sum(self.overheads) / len(self.overheads) if self.overheads else self.overhead_s

    def remaining_s(self) -> float:
        later = self.durations[self.index + 1:] if self.label else self.durations[self.index:]
        current = max(0.0, self.durations[self.index] - self.run_elapsed) if self.label else 0.0
        return current + sum(later) + self._overhead() * (len(later) + (1 if self.label else 0))

    def begin_run(self, index: int, label: str) -> None:
        self.index, self.label, self.run_elapsed = index, label, 0.0
        self._last_print = 0.0

    def end_run(self, wall_s: float) -> None:
        self.overheads.append(max(0.0, wall_s - self.durations[self.index]))
        self.label = ""
        self.index += 1
        self._clear()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        return (f"[{self.index + 1}/{len(self.durations)}] {self.label}: {self.run_elapsed:.0f}/"
                f"{self.durations[self.index]:.0f} s | elapsed {self.fmt(elapsed)}, "
                f"remaining ~{self.fmt(self.remaining_s())}")

    def tick(self, run_elapsed_s: float) -> None:
        self.run_elapsed = run_elapsed_s
        now = time.monotonic()
        if self.tty:
            if now - self._last_print >= 1.0:
                self.stream.write("\r\033[K" + self.line())
                self.stream.flush()
                self._dirty = True
                self._last_print = now
        elif now - self._last_print >= self.every_s:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last_print = now

    def _clear(self) -> None:
        if self.tty and self._dirty:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._dirty = False

    def close(self) -> None:
        self._clear()
