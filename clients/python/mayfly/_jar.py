"""The cookie jar of one inbox (one jar per inbox, never shared: a jar is a
security boundary), and its cookies in the saved state's format."""

from __future__ import annotations

import http.cookiejar
import urllib.request
from datetime import datetime, timezone
from typing import Any, Dict, List

from .models import parse_time


def new_jar() -> http.cookiejar.CookieJar:
    """The cookie jar of one inbox. The API's cookies are host-only (no
    Domain); http.cookiejar's default policy would send such a cookie to
    the host's subdomains as well: DomainStrictNonDomain keeps it to its
    host. Secure cookies go over https only (the default policy)."""
    strict = http.cookiejar.DefaultCookiePolicy.DomainStrictNonDomain
    policy = http.cookiejar.DefaultCookiePolicy(strict_ns_domain=strict)
    return http.cookiejar.CookieJar(policy)


def rfc3339(t: datetime) -> str:
    """t in UTC as RFC 3339 with a Z (the fraction without trailing zeros)."""
    t = t.astimezone(timezone.utc)
    frac = f"{t.microsecond:06d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def dump(jar: http.cookiejar.CookieJar) -> List[Dict[str, Any]]:
    """The jar's cookies as the state's ``cookies``: name, value, path,
    ``expires`` unless a session cookie, ``secure`` when set."""
    cookies: List[Dict[str, Any]] = []
    for c in jar:
        d: Dict[str, Any] = {"name": c.name, "value": c.value, "path": c.path}
        if c.expires is not None:
            d["expires"] = rfc3339(datetime.fromtimestamp(c.expires, timezone.utc))
        if c.secure:
            d["secure"] = True
        cookies.append(d)
    return cookies


def load(base_url: str, cookies: List[Dict[str, Any]]) -> http.cookiejar.CookieJar:
    """A new jar holding a state's ``cookies``, host-only cookies of the
    base URL's host."""
    jar = new_jar()
    host = http.cookiejar.eff_request_host(urllib.request.Request(base_url))[1]
    for c in cookies:
        exp = parse_time(c.get("expires"))
        jar.set_cookie(http.cookiejar.Cookie(
            version=0, name=str(c["name"]), value=str(c["value"]), port=None, port_specified=False,
            domain=host, domain_specified=False, domain_initial_dot=False,
            path=str(c.get("path") or "/"), path_specified=True, secure=bool(c.get("secure", False)),
            expires=None if exp is None else int(exp.timestamp()), discard=exp is None,
            comment=None, comment_url=None, rest={"HttpOnly": None}, rfc2109=False,
        ))
    return jar
