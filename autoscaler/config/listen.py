"""`HOST:PORT` listen addresses: an IP address (never a name, which could resolve anywhere) that
is loopback or private, so a status endpoint is never bound to a public address by mistake."""

from __future__ import annotations

import ipaddress


def parse_listen(value: str) -> tuple[str, int]:
    """`127.0.0.1:9464`, `10.0.1.5:9464`, `[::1]:9464` -> (host, port); ValueError says what is wrong."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address (give the address to bind, e.g. 127.0.0.1)") from None
    if not (address.is_loopback or address.is_private or address.is_unspecified or address.is_link_local):
        raise ValueError(f"{host} is a public address: bind 127.0.0.1 or a private address (the host's VPC address)")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"port {port_text!r} is not a TCP port (0-65535; 0 picks a free one)")
    return str(address), int(port_text)
