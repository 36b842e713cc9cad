"""Who may talk to ``vally serve``: the check of the ``Host`` header, and the access token.

**Host.** A web page the user opens elsewhere can reach a server on the user's machine by
DNS rebinding: its own name (``evil.example``) is made to resolve to ``127.0.0.1``, and the
page then reads the dashboard as if it were its own site. The browser still sends the
page's name in the ``Host`` header, so every request whose ``Host`` is not one this server
answers to is refused (421 Misdirected Request): loopback names and addresses, the
address it was bound to, and the names given with ``--allowed-host`` (a proxy in front of
it). A server bound to every interface (``0.0.0.0``, ``::``) also answers to any IP
address and to this machine's host name: an address cannot be rebound, only a name can.

**Token.** With an access token (``--token``, ``VALLY_SERVE_TOKEN``), every request must
carry it: ``Authorization: Bearer <token>``, the cookie the dashboard gets, or
``?token=<token>``. Opening ``/?token=<token>`` sets the cookie (HttpOnly, SameSite=Strict)
and redirects to ``/``, so the token leaves the address bar and the dashboard's own
requests carry it. Anything else is a 401. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_ENV = "VALLY_SERVE_TOKEN"
"""The environment variable ``vally serve`` reads its access token from."""
TOKEN_COOKIE = "vally_token"
"""The cookie that carries the token for the dashboard's requests."""
LOOPBACK_NAMES = frozenset({"localhost"})
"""Host names that always mean this machine."""
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
"""What ``--host`` says to bind every interface."""
_SHOWN_HOST = 80
"""At most this much of a refused Host is repeated in the error message."""


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """True when ``host`` (a bound address or a name) is reachable from this machine only."""
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    address = _address(host.strip("[]"))
    return address is not None and address.is_loopback


def host_of(header: str) -> str:
    """The host of a ``Host`` header value, lower case, without port, brackets or a final
    dot (``[::1]:3200`` -> ``::1``)."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


@dataclass(frozen=True)
class AccessPolicy:
    """What the server answers to, and the token it requires.

    Attributes:
        names: Host names accepted (lower case, no port).
        addresses: IP addresses accepted.
        any_address: Accept every IP address (a server bound to every interface).
        token: The access token every request must carry, or None.
    """

    names: frozenset[str] = LOOPBACK_NAMES
    addresses: frozenset[str] = frozenset({"127.0.0.1", "::1"})
    any_address: bool = False
    token: str | None = None

    @classmethod
    def for_bind(
        cls, host: str, *, allowed_hosts: Iterable[str] = (), token: str | None = None
    ) -> AccessPolicy:
        """The policy of a server bound to ``host`` (what ``--host`` said).

        Args:
            host: The address or name the server listens on.
            allowed_hosts: More host names (or addresses) to answer to (a proxy's name).
            token: The access token to require, or None.
        """
        names = set(LOOPBACK_NAMES)
        addresses = {"127.0.0.1", "::1"}
        wildcard = host.strip("[]") in _WILDCARDS
        for value in (host, *allowed_hosts):
            bare = host_of(value) if value.strip("[]") not in _WILDCARDS else ""
            if not bare:
                continue
            address = _address(bare)
            if address is not None:
                addresses.add(str(address))
            else:
                names.add(bare)
        if wildcard:
            names.add(socket.gethostname().lower())
        return cls(frozenset(names), frozenset(addresses), wildcard, token or None)

    def accepts_host(self, header: str | None) -> bool:
        """True when a request with this ``Host`` header is for this server."""
        if not header:
            return False
        host = host_of(header)
        address = _address(host)
        if address is None:
            return host in self.names
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return self.any_address or str(address) in self.addresses

    def accepts_token(self, given: str | None) -> bool:
        """True when no token is required, or ``given`` is it."""
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _error(status: int, code: str, message: str, **headers: str) -> Response:
    return JSONResponse(
        {"error": {"code": code, "message": message}},
        status_code=status,
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", **headers},
    )


class HostCheck:
    """ASGI middleware: refuse requests whose ``Host`` the policy does not accept (421)."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 421."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"host")
        if self.policy.accepts_host(header):
            await self.app(scope, receive, send)
            return
        shown = (header or "")[:_SHOWN_HOST]
        response = _error(
            421,
            "misdirected_request",
            f"this server does not answer to the host {shown!r}: open the address vally "
            "serve printed, or start it with --allowed-host NAME for a proxy's name",
        )
        await response(scope, receive, send)


class TokenCheck:
    """ASGI middleware: require the policy's access token on every request (401)."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, set the dashboard's cookie, or answer 401."""
        if scope["type"] != "http" or self.policy.token is None:
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        from_query = next((value for key, value in query if key == "token"), None)
        if from_query is not None and self.policy.accepts_token(from_query):
            if scope["path"] == "/":  # the dashboard: keep the token in a cookie instead
                rest = urlencode([(k, v) for k, v in query if k != "token"])
                await self._enter(rest)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if self.policy.accepts_token(_bearer(scope)) or self.policy.accepts_token(_cookie(scope)):
            await self.app(scope, receive, send)
            return
        response = _error(
            401,
            "unauthorized",
            "this server needs its access token: open /?token=<token> for the dashboard, "
            "or send the header 'Authorization: Bearer <token>'",
            **{"WWW-Authenticate": 'Bearer realm="vally"'},
        )
        await response(scope, receive, send)

    def _enter(self, rest: str) -> Response:
        response = RedirectResponse("/" + (f"?{rest}" if rest else ""), status_code=303)
        assert self.policy.token is not None
        response.set_cookie(
            TOKEN_COOKIE, self.policy.token, httponly=True, samesite="strict", path="/"
        )
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


def _bearer(scope: Scope) -> str | None:
    header = _header(scope, b"authorization")
    if header is None:
        return None
    kind, _, value = header.partition(" ")
    return value.strip() if kind.lower() == "bearer" else None


def _cookie(scope: Scope) -> str | None:
    header = _header(scope, b"cookie")
    if header is None:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed cookie header is no token
        return None
    morsel: Any = jar.get(TOKEN_COOKIE)
    return None if morsel is None else str(morsel.value)
