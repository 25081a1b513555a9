"""EC2 calls that take many instance ids (TerminateInstances, StopInstances, StartInstances,
CreateTags): up to BATCH_IDS ids a request, each id's failure returned as data.

EC2 refuses such a request as a whole when one of its ids cannot be acted on (gone:
InvalidInstanceID.NotFound; in the wrong state: IncorrectInstanceState; protected:
OperationNotPermitted), and its message names the ids at fault. So one bad id must not fail a
thousand: the ids the message names get the error and the rest is sent again without them; an
error that names none of them is narrowed down by halves. An error that says back off
(throttled, refused credentials) names no id at fault and is every id's: the next tick tries
again, without a request per id in between.

CreateTags takes one tag set for all its resources, so ids are grouped by identical tag sets: a
set shared by many ids costs one request per BATCH_IDS of them, a set of its own one request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.fleet.base import ProviderError, Retry

BATCH_IDS = 1000  # instance ids per request (EC2's limit for these calls)
INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")

Call = Callable[[list[str]], object]
Classify = Callable[[Exception], ProviderError]


def each_id(call: Call, ids: Sequence[str], classify: Classify, size: int = BATCH_IDS) -> dict[str, ProviderError]:
    """`call` with the ids, BATCH_IDS a request; the error of each id the calls failed for."""
    todo = list(dict.fromkeys(ids))
    failed: dict[str, ProviderError] = {}
    for n in range(0, len(todo), size):
        failed.update(_request(call, todo[n : n + size], classify))
    return failed


def tag_many(
    call: Callable[[list[str], list[dict[str, str]]], object],
    tags_by_id: Mapping[str, Mapping[str, str]],
    classify: Classify,
) -> dict[str, ProviderError]:
    """CreateTags for each id's tags: one request per distinct tag set (and per BATCH_IDS ids)."""
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for iid, tags in tags_by_id.items():
        groups.setdefault(tuple(sorted(tags.items())), []).append(iid)
    failed: dict[str, ProviderError] = {}
    for key, ids in groups.items():
        pairs = [{"Key": k, "Value": v} for k, v in key]
        failed.update(each_id(partial(_with_tags, call, pairs), ids, classify))
    return failed


def _with_tags(
    call: Callable[[list[str], list[dict[str, str]]], object], tags: list[dict[str, str]], ids: list[str]
) -> object:
    return call(ids, tags)


def _request(call: Call, chunk: list[str], classify: Classify) -> dict[str, ProviderError]:
    """One request for the chunk, sent again without the ids a refusal names (see the module)."""
    failed: dict[str, ProviderError] = {}
    todo = chunk
    while todo:
        try:
            call(todo)
            return failed
        except (ClientError, BotoCoreError) as exc:
            err = classify(exc)
            if err.decision.retry is Retry.BACKOFF:
                failed.update(dict.fromkeys(todo, err))
                return failed
            named = _named(exc, todo)
            if named:
                failed.update(dict.fromkeys(named, err))
                todo = [i for i in todo if i not in named]
            elif len(todo) == 1:
                failed[todo[0]] = err
                return failed
            else:  # the culprit unnamed: each half on its own
                half = len(todo) // 2
                failed.update(_request(call, todo[:half], classify))
                failed.update(_request(call, todo[half:], classify))
                return failed
    return failed


def _named(exc: Exception, ids: list[str]) -> set[str]:
    """The ids of `ids` an EC2 error message names (`The instance IDs 'i-1, i-2' do not exist`)."""
    if not isinstance(exc, ClientError):
        return set()
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return set(INSTANCE_ID.findall(message)) & set(ids)
