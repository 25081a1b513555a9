"""One log format for every igniter process: `igniter` and `igniter-agent` share it.

Text (the default) is one line per record, `TIME LEVEL LOGGER: message`, the level written once.
JSON (`--log-format json`) is one object per line for a log shipper (Loki, CloudWatch, Elastic):
time (RFC 3339, UTC), level, logger, message, fleet and tick, plus `exc` with a traceback. The
fleet is the process's (one fleet per process), the tick a context variable the controller sets
around each tick, so a line logged from a helper deep in the tick still carries its number.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries that log at INFO on every tick or request; their warnings still come through.
NOISY = ("apscheduler", "botocore", "boto3", "urllib3", "paramiko", "httpx", "httpcore")

TICK: contextvars.ContextVar[int | None] = contextvars.ContextVar("igniter_tick", default=None)
_fleet: str | None = None
_format = "text"


def set_fleet(name: str | None) -> None:
    """The fleet every record of this process names (a reload may not change it: it needs a restart)."""
    global _fleet
    _fleet = name


@contextlib.contextmanager
def tick_context(tick: int) -> Iterator[None]:
    """Records logged inside carry `tick` (the thread's context: APScheduler runs each tick in one)."""
    token = TICK.set(tick)
    try:
        yield
    finally:
        TICK.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in a message are escaped by json)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "fleet": _fleet,
            "tick": TICK.get(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def current_format() -> str:
    """The format `configure` set: the agent starts its inference servers with the same one."""
    return _format


def message_of(line: str) -> str:
    """A log line's message: the `message` of a JSON line, else the line (the last line of a
    server's log is what the agent reports as its last error, in either format)."""
    if line.startswith("{"):
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and isinstance(entry.get("message"), str):
                return entry["message"]
    return line


def configure(fmt: str = "text", level: int | str = logging.INFO) -> None:
    """Replace the root handlers with one on stderr in `fmt`; quiet the per-tick library chatter."""
    global _format
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    _format = fmt
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
