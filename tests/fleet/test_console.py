"""Host keys from cloud-init's console block (autoscaler/fleet/console.py): pure parsing."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from autoscaler.fleet.console import BEGIN_MARKER, END_MARKER, console_text, parse_console
from tests.kit.control import cloud_init_console


def keygen(directory: Path, kind: str, *extra: str, name: str = "") -> str:
    """A fresh public key line ("type base64") made by OpenSSH's ssh-keygen."""
    path = directory / f"host_{name or kind}"
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("console-keys")
    return {
        "ed25519": keygen(d, "ed25519"),
        "ecdsa": keygen(d, "ecdsa", "-b", "256"),
        "rsa": keygen(d, "rsa", "-b", "2048"),
    }


@pytest.mark.e2e
def test_every_key_type_in_the_block_is_found_in_order(keys: dict[str, str]) -> None:
    lines = [keys["ecdsa"], keys["ed25519"], keys["rsa"]]
    parsed = parse_console(cloud_init_console(lines))
    assert parsed is not None and parsed.keys == tuple(lines) and parsed.rejected == ()
    assert [k.split()[0] for k in parsed.keys] == ["ecdsa-sha2-nistp256", "ssh-ed25519", "ssh-rsa"]


@pytest.mark.unit
def test_logger_prefixes_and_crlf_are_tolerated(keys: dict[str, str]) -> None:
    text = f"{BEGIN_MARKER}\r\nec2: {keys['ed25519']} root@node\r\n<14>Mar  3 10:00:00 ec2: {keys['rsa']}\r\n{END_MARKER}\r\n"
    parsed = parse_console(text)
    assert parsed is not None and parsed.keys == (keys["ed25519"], keys["rsa"])


@pytest.mark.unit
def test_garbage_lines_are_rejected_not_pinned(keys: dict[str, str]) -> None:
    ed_type, ed_blob = keys["ed25519"].split()
    truncated = f"{ed_type} {ed_blob[:30]}"  # cut off by the console
    wrong_type = f"ssh-rsa {ed_blob}"  # the blob names another type
    not_base64 = "ssh-ed25519 AAAA!!!!not-base64"
    short = f"{ed_type} {ed_blob[:-8]}"  # decodes, but its key field is cut short
    lines = [truncated, "[  14.2] random kernel message", keys["ecdsa"], wrong_type, not_base64, short]
    parsed = parse_console(cloud_init_console(lines))
    assert parsed is not None and parsed.keys == (keys["ecdsa"],)
    assert len(parsed.rejected) == 5 and any("kernel message" in r for r in parsed.rejected)


@pytest.mark.unit
def test_no_block_or_a_block_without_its_end_marker_is_not_yet(keys: dict[str, str]) -> None:
    assert parse_console("") is None
    assert parse_console("[    0.000000] Linux version 6.8.0-1015-aws\nCloud-init v. 24.1.3 running 'init'\n") is None
    assert parse_console(cloud_init_console([keys["ed25519"]], end=False)) is None
    assert parse_console(f"{keys['ed25519']}\n{END_MARKER}\n") is None  # END without BEGIN: truncated head


@pytest.mark.unit
def test_the_last_complete_block_wins_and_duplicates_collapse(keys: dict[str, str]) -> None:
    first = cloud_init_console([keys["rsa"]])
    second = cloud_init_console([keys["ed25519"], keys["ed25519"]])
    parsed = parse_console(first + second + f"{BEGIN_MARKER}\n{keys['ecdsa']}\n")  # the third is unfinished
    assert parsed is not None and parsed.keys == (keys["ed25519"],)


@pytest.mark.unit
def test_an_empty_block_is_a_final_answer_with_no_keys() -> None:
    parsed = parse_console(f"{BEGIN_MARKER}\n{END_MARKER}\n")
    assert parsed is not None and parsed.keys == () and parsed.rejected == ()


@pytest.mark.unit
def test_console_text_accepts_decoded_and_raw_base64_output(keys: dict[str, str]) -> None:
    text = cloud_init_console([keys["ed25519"]])
    encoded = base64.b64encode(text.encode()).decode()
    assert console_text(text) == text  # boto3 already decoded it
    assert console_text(encoded) == text  # the API's base64, undecoded
    assert console_text(encoded.encode()) == text
    assert console_text(None) == "" and console_text("") == ""
    plain = "Linux version 6.8.0 (no keys yet)"
    assert console_text(plain) == plain  # not base64: kept as it is
