"""Every AWS request moto's server receives, in arrival order, attributed to the access key that
signed it: a count of each process's calls made at the server, independent of the code under test.

It uses moto's own request recorder (moto.moto_api.recorder), which runs in this test process
with the server (tests/kit/backends.py); a lock keeps its lines whole when requests arrive at once.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

READ_PREFIXES = ("Describe", "Get", "List")


@dataclass(frozen=True)
class AwsCall:
    key: str  # the access key id that signed it
    service: str  # ec2, dynamodb, ...
    action: str  # RunInstances, DynamoDB_20120810.UpdateItem -> UpdateItem

    @property
    def mutating(self) -> bool:
        return not self.action.startswith(READ_PREFIXES)


class AwsCalls:
    def __init__(self, path: Path) -> None:
        from moto.moto_api import recorder

        self.recorder = recorder
        self._saved = recorder._location
        recorder._location = str(path)
        original = type(recorder)._record_request.__get__(recorder)
        lock = threading.Lock()

        def record(*args: Any, **kwargs: Any) -> None:
            with lock:
                original(*args, **kwargs)

        recorder._record_request = record  # type: ignore[method-assign]
        recorder.reset_recording()
        recorder.start_recording()

    def calls(self) -> list[AwsCall]:
        text = Path(self.recorder._location).read_text()
        return [_parse(json.loads(line)) for line in text.splitlines() if line.strip()]

    def by(self, key: str, service: str = "ec2") -> list[AwsCall]:
        return [c for c in self.calls() if c.key == key and c.service == service]

    def close(self) -> None:
        self.recorder.stop_recording()
        del self.recorder._record_request
        self.recorder._location = self._saved


def _parse(entry: dict[str, Any]) -> AwsCall:
    headers = {k.lower(): v for k, v in entry["headers"].items()}
    credential = headers.get("authorization", "").split("Credential=", 1)[-1].split(",", 1)[0]
    parts = credential.split("/")
    key, service = (parts[0], parts[3]) if len(parts) >= 5 else ("", "")
    target = headers.get("x-amz-target")
    if target:
        return AwsCall(key, service, target.rsplit(".", 1)[-1])
    body = entry.get("body") or ""
    if entry.get("body_encoded"):
        body = base64.b64decode(body).decode(errors="replace")
    action = parse_qs(body).get("Action", [""])[0]
    return AwsCall(key, service, action)
