"""The tests' one-off HTTP requests: httpx.get and friends with one TLS context for all of them.

Why: each httpx.get builds a client, and with it a TLS context that loads the whole CA bundle
(about 30 ms of CPU), even for the http:// URLs every test here asks (127.0.0.1 only); some 120
requests were 3.6 s of `make check`'s CPU. Otherwise these are httpx's own functions: a fresh
client per request, no connection kept, no cookie carried to the next.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

_TLS = ssl.create_default_context()  # what httpx builds per client, built once


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, url, verify=_TLS, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return request("GET", url, **kwargs)


def head(url: str, **kwargs: Any) -> httpx.Response:
    return request("HEAD", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return request("POST", url, **kwargs)


def client(**kwargs: Any) -> httpx.Client:
    """An httpx.Client on the one TLS context (each of a load's threads opens one)."""
    return httpx.Client(verify=_TLS, **kwargs)
