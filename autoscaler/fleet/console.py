"""SSH host keys from an instance's console output, where cloud-init prints them at first boot.

Why the console: a new node's host key is generated on the node, so the network cannot be trusted
to tell us what it is (that is what an attacker in the middle would answer). The console is written
by the instance itself and read through the cloud API, with the autoscaler's own credentials, so
it is the channel mature tools use to learn a fresh host's key before the first connection.

cloud-init's keys-to-console module (the `write-ssh-key-fingerprints` helper) prints each host
public key between `BEGIN_MARKER` and `END_MARKER` through `logger -t ec2`, so a line may carry a
prefix (`ec2: `, a syslog header) and kernel messages may interleave with the block.

Pure: text in, candidate keys out. The check here is structural (a key's base64 blob must decode
and begin with its own type name, as every SSH public key blob does), so a line the console
mangled is reported as rejected instead of being pinned; the transport loads the rest with paramiko.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass

BEGIN_MARKER = "-----BEGIN SSH HOST KEY KEYS-----"
END_MARKER = "-----END SSH HOST KEY KEYS-----"

# A key type token (ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, sk-...@openssh.com) and its blob;
# every blob starts with "AAAA" (the big-endian length of the type name).
_KEY = re.compile(r"(?:^|[\s:])((?:ssh|ecdsa|sk)-[A-Za-z0-9@.+-]+)\s+(AAAA[A-Za-z0-9+/]+={0,3})(?=\s|$)")


@dataclass(frozen=True, slots=True)
class ConsoleKeys:
    """The host key block of a console: valid keys ("type base64"), and the lines that were not."""

    keys: tuple[str, ...]
    rejected: tuple[str, ...]


def console_text(output: str | bytes | None) -> str:
    """The console as text. EC2 sends it base64-encoded; boto3 normally decodes it already (an
    after-call handler), but a client without that handler hands over the raw base64: accept both."""
    if not output:
        return ""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    if BEGIN_MARKER in text:
        return text
    try:
        return base64.b64decode("".join(text.split()), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return text


def parse_console(text: str) -> ConsoleKeys | None:
    """The last complete host key block of `text`, or None when there is none yet (cloud-init has
    not reached that stage, or the END marker is not written yet: never pin half a block)."""
    block = _last_block(text.splitlines())
    if block is None:
        return None
    keys: list[str] = []
    rejected: list[str] = []
    for line in block:
        key = _key(line)
        if key is not None:
            keys += [] if key in keys else [key]
        elif line.strip():
            rejected.append(line.strip())
    return ConsoleKeys(tuple(keys), tuple(rejected))


def _last_block(lines: list[str]) -> list[str] | None:
    complete: list[str] | None = None
    current: list[str] | None = None
    for line in lines:
        if BEGIN_MARKER in line:
            current = []
        elif END_MARKER in line and current is not None:
            complete, current = current, None
        elif current is not None:
            current.append(line)
    return complete


def _key(line: str) -> str | None:
    match = _KEY.search(line.replace("\r", ""))
    if match is None or not _wire_name_matches(match.group(1), match.group(2)):
        return None
    return f"{match.group(1)} {match.group(2)}"


def _wire_name_matches(key_type: str, blob: str) -> bool:
    """An SSH public key blob is a run of length-prefixed fields, the first its type name: the
    name must be the line's type, and the fields must end exactly at the end of the blob (a line
    the console cut short fails here rather than being pinned as a different key)."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return False
    fields: list[bytes] = []
    at = 0
    while at + 4 <= len(raw):
        (length,) = struct.unpack(">I", raw[at : at + 4])
        fields.append(raw[at + 4 : at + 4 + length])
        at += 4 + length
    return at == len(raw) and len(fields) >= 2 and fields[0] == key_type.encode()
