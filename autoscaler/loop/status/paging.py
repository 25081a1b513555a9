"""`GET /v1/fleet?limit=N&after=CURSOR`: the fleet view a page at a time.

At 2,000 instances the whole view is about a megabyte of JSON; a dashboard or `curl | jq` that
wants a few rows should not pay for all of them, nor hold the state's lock while they are
written. Instances come in their records' order (slot, then attempt); `after` is the cursor of
the last one seen (`SLOT#ATTEMPT`, as `page.next_after` gives it), so a page never repeats or
skips a record when others come and go between requests. Without `limit` and `after` the answer
is the whole view, as before.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

MAX_LIMIT = 5000


class BadPage(ValueError):
    """A `limit` or `after` the view cannot take (answered 400, naming the parameter)."""


def cursor(instance: Mapping[str, Any]) -> str:
    return f"{instance['slot']}#{instance['attempt']}"


def parse(params: Mapping[str, str]) -> tuple[int | None, tuple[str, int] | None]:
    """The page asked for: (limit or None, the (slot, attempt) to start after, or None)."""
    limit = params.get("limit")
    after = params.get("after")
    n = None
    if limit is not None:
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
            raise BadPage(f"limit: {limit!r} is not a whole number from 1 to {MAX_LIMIT}")
        n = int(limit)
    if after is None:
        return n, None
    slot, sep, attempt = after.rpartition("#")
    if not sep or not slot or not attempt.isdigit():
        raise BadPage(f"after: {after!r} is not a cursor SLOT#ATTEMPT (page.next_after)")
    return n, (slot, int(attempt))


def page(view: Mapping[str, Any], limit: int | None, after: tuple[str, int] | None) -> Mapping[str, Any]:
    """The view with the instances of one page and `page` (limit, after, next_after, total); the
    view itself where no page was asked for, or where it has no instance list of records (a
    placeholder before the first tick, or a standby's)."""
    if (limit is None and after is None) or "cost_per_hour" not in view:
        return view
    rows = view["instances"]  # in (slot, attempt) order: store.open_records
    keys = [(r["slot"], r["attempt"]) for r in rows]
    start = bisect_right(keys, after) if after is not None else 0
    end = len(rows) if limit is None else min(len(rows), start + limit)
    shown = rows[start:end]
    more = end < len(rows)
    info = {
        "limit": limit,
        "after": None if after is None else f"{after[0]}#{after[1]}",
        "next_after": cursor(shown[-1]) if more and shown else None,
        "total": len(rows),
    }
    return {**view, "instances": shown, "page": info}
