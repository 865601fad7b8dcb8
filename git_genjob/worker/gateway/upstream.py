"""The upstream client: httpx (streaming, timeouts, the environment's proxies and the system CA
bundle, one connection pool per attempt), adding the worker's key to each request."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from git_genjob.worker.gateway.dialects import Upstream

# Failures before the request could leave the worker's side: the upstream's (or the proxy's) TCP
# connect or TLS handshake, a proxy refusing the tunnel (CONNECT answered non-2xx). Such a call
# was never sent (SPEC §12.1: 502, nothing cached, safe to send again); any other transport
# error may come after the request's bytes left, and its call is `unknown`.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError)

# What the gateway forwards of the generator's headers; its auth and hop-by-hop ones never.
FORWARDED = ("content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta", "user-agent")


class Client:
    def __init__(self, connect_s: float = 10.0, read_s: float = 120.0, reuse: bool = True):
        ctx = ssl.create_default_context()  # the system CA bundle
        timeout = httpx.Timeout(read_s, connect=connect_s)
        # reuse=False: a connection per request, so `send(on_socket=…)` sees each one's socket
        limits = httpx.Limits() if reuse else httpx.Limits(max_keepalive_connections=0)
        self.http = httpx.Client(timeout=timeout, verify=ctx, trust_env=True, follow_redirects=False, limits=limits)
        # A loopback upstream is reached directly: a proxy from the environment would carry its
        # plain-http request, key and all, across the network.
        self.local = httpx.Client(timeout=timeout, verify=ctx, trust_env=False, follow_redirects=False, limits=limits)

    def close(self) -> None:
        self.http.close()
        self.local.close()

    @contextmanager
    def send(
        self,
        up: Upstream,
        key: str,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        on_socket: Callable[[socket.socket], None] | None = None,
    ) -> Iterator[httpx.Response]:
        """The upstream's answer, its body still to read (`iter_bytes`). `on_socket` is handed
        the socket of each new connection as it opens (a watchdog's hold on a whole call)."""
        out = {k: v for k, v in headers.items() if k.lower() in FORWARDED}
        out["accept-encoding"] = "identity"
        out.update(up.key_headers(key))
        client = self.local if is_loopback(up.url) else self.http
        request = client.build_request(method, up.url + path, headers=out, content=body)
        if on_socket is not None:

            def trace(event: str, info: dict[str, Any]) -> None:
                if event in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete"):
                    sock = info["return_value"].get_extra_info("socket")
                    if isinstance(sock, socket.socket):
                        on_socket(sock)

            request.extensions["trace"] = trace
        response = client.send(request, stream=True)
        try:
            yield response
        finally:
            response.close()


def is_loopback(url: str) -> bool:
    host = httpx.URL(url).host
    return host in ("localhost", "::1") or host.startswith("127.")
