"""What a user sees while `--compare` runs: a progress bar per strategy on a terminal, a line per
strategy as it starts elsewhere (a log, a pipe), nothing with --json. All of it on stderr, so the
table or the JSON on stdout stays as it was."""

from __future__ import annotations

from typing import IO, Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn


class Watcher(Protocol):
    """Hears how a compare's runs advance; `index` is a run's place in the table."""

    def begin(self, labels: list[str]) -> None: ...

    def started(self, index: int, label: str) -> None: ...

    def advanced(self, index: int, fraction: float) -> None: ...

    def finished(self, index: int) -> None: ...


class Lines:
    """`simulating LABEL ...` as each run starts: what a log or a pipe can show."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def begin(self, labels: list[str]) -> None:
        pass

    def started(self, index: int, label: str) -> None:
        print(f"simulating {label} ...", file=self.stream, flush=True)

    def advanced(self, index: int, fraction: float) -> None:
        pass

    def finished(self, index: int) -> None:
        pass


class Bars:
    """A rich progress bar per run: waiting, the share of the trace replayed, and the time it
    took. A context manager: the bars draw (from rich's refresh thread) while it is open."""

    def __init__(self, stream: IO[str]) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=Console(file=stream),
        )
        self.tasks: list[TaskID] = []

    def __enter__(self) -> Bars:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def begin(self, labels: list[str]) -> None:
        self.tasks = [self.progress.add_task(label, total=1.0, start=False) for label in labels]

    def started(self, index: int, label: str) -> None:
        self.progress.start_task(self.tasks[index])

    def advanced(self, index: int, fraction: float) -> None:
        self.progress.update(self.tasks[index], completed=fraction)

    def finished(self, index: int) -> None:
        self.progress.update(self.tasks[index], completed=1.0)


def watcher_for(stream: IO[str], quiet: bool) -> Lines | Bars | None:
    """Bars on a terminal, lines elsewhere, nothing when `quiet` (--json: stderr stays clean for
    scripts that read it)."""
    if quiet:
        return None
    return Bars(stream) if stream.isatty() else Lines(stream)
