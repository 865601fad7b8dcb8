"""The upstream client: httpx (streaming, timeouts, the environment's proxies and the system CA
bundle, one connection pool per attempt), adding the worker's key to each request."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from git_genjob.worker.gateway.dialects import Upstream

# What the gateway forwards of the generator's headers; its auth and hop-by-hop ones never.
FORWARDED = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent")


class Client:
    def __init__(self, connect_s: float = 10.0, read_s: float = 120.0):
        ctx = ssl.create_default_context()  # the system CA bundle
        timeout = httpx.Timeout(read_s, connect=connect_s)
        self.http = httpx.Client(timeout=timeout, verify=ctx, trust_env=True, follow_redirects=False)
        # A loopback upstream is reached directly: a proxy from the environment would carry its
        # plain-http request, key and all, across the network.
        self.local = httpx.Client(timeout=timeout, verify=ctx, trust_env=False, follow_redirects=False)

    def close(self) -> None:
        self.http.close()
        self.local.close()

    @contextmanager
    def send(
        self, up: Upstream, key: str, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> Iterator[httpx.Response]:
        """The upstream's answer, its body still to read (`iter_bytes`)."""
        out = {k: v for k, v in headers.items() if k.lower() in FORWARDED}
        out["accept-encoding"] = "identity"
        out.update(up.key_headers(key))
        client = self.local if is_loopback(up.url) else self.http
        request = client.build_request(method, up.url + path, headers=out, content=body)
        response = client.send(request, stream=True)
        try:
            yield response
        finally:
            response.close()


def is_loopback(url: str) -> bool:
    host = httpx.URL(url).host
    return host in ("localhost", "::1") or host.startswith("127.")
