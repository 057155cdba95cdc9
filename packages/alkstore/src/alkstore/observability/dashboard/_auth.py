"""Who may see and change what through the dashboard (O-4).

- **Where it listens.** 127.0.0.1 by default. Bound to any other address it
  is *public*: every page needs the token, not only the changes.
- **The token.** Given by the operator (``$ALKSTORE_DASHBOARD_TOKEN``) or
  made at start and printed once. Opening any page with ``?token=...``, or
  the login form, starts a session: a random id in a cookie that is
  ``HttpOnly`` and ``SameSite=Strict``, kept in memory only, so a restart
  ends every session. The token never lands in a page or the browser's
  history (the login redirects to the same page without it).
- **Changes** (redrive, purge, logout) are ``POST`` only, need a session
  that presented the token, and a per-session CSRF token in a hidden field;
  a request whose ``Origin`` is another site, or that the browser marks
  ``Sec-Fetch-Site: cross-site``, is refused. ``--read-only`` removes the
  forms and refuses every change.
- **The Host header** must name the address the dashboard listens on
  (``localhost``, ``127.0.0.1`` and ``[::1]`` for a loopback bind, with the
  port), or one the operator allowed: a page that a DNS-rebinding attack
  loads under another name is refused before anything is read. Bound to a
  wildcard address with no allowed names, the Host is not checked (the token
  guards everything then).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie

from alkstore.observability._http import WSGIEnviron, is_loopback

__all__ = ["Guard", "Session"]

#: Most sessions kept; the oldest goes first.
_MAX_SESSIONS = 512
#: A session ends after this long, used or not.
_SESSION_TTL_S = 12 * 3600.0
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


@dataclass
class Session:
    """One browser that presented the token."""

    sid: str
    csrf: str
    started: float
    flash: list[tuple[str, bool]] = field(default_factory=list)


class Guard:
    """The dashboard's access rules; :attr:`port` is set once the server is
    bound (it may have asked for port 0)."""

    def __init__(
        self,
        *,
        host: str,
        token: str | None,
        read_only: bool,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.host = host
        self.public = not is_loopback(host)
        self.token = token or secrets.token_urlsafe(24)
        self.read_only = read_only
        self.port = 0
        self._extra_hosts = tuple(h.strip().lower() for h in allowed_hosts if h.strip())
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def cookie_name(self) -> str:
        # Cookies ignore ports: two dashboards on one host need two names.
        return f"alkstore_dashboard_{self.port}"

    # ------------------------------------------------------------- the Host

    def allowed_hosts(self) -> frozenset[str] | None:
        """The ``Host`` values accepted, or ``None`` for any."""
        names: list[str] = list(self._extra_hosts)
        if is_loopback(self.host):
            names += _LOOPBACK_NAMES
        elif self.host not in ("0.0.0.0", "::", ""):
            names.append(f"[{self.host}]" if ":" in self.host else self.host.lower())
        elif not names:
            return None
        with_port = {n if _has_port(n) else f"{n}:{self.port}" for n in names}
        if self.port == 80:
            with_port |= {n for n in names if not _has_port(n)}
        return frozenset(with_port)

    def host_ok(self, environ: WSGIEnviron) -> bool:
        allowed = self.allowed_hosts()
        if allowed is None:
            return True
        host = str(environ.get("HTTP_HOST", "")).strip().lower()
        return host in allowed

    # -------------------------------------------------------------- sessions

    def check_token(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.token.encode())

    def new_session(self) -> Session:
        session = Session(secrets.token_urlsafe(24), secrets.token_urlsafe(24), time.monotonic())
        with self._lock:
            self._sessions[session.sid] = session
            while len(self._sessions) > _MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def end_session(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.sid, None)

    def session(self, environ: WSGIEnviron) -> Session | None:
        """The session named by the request's cookie, if it is live."""
        raw = environ.get("HTTP_COOKIE")
        if not raw:
            return None
        try:
            cookie = SimpleCookie(str(raw))
        except CookieError:
            return None
        morsel = cookie.get(self.cookie_name)
        if morsel is None:
            return None
        with self._lock:
            session = self._sessions.get(morsel.value)
            if session is None:
                return None
            if time.monotonic() - session.started > _SESSION_TTL_S:
                del self._sessions[session.sid]
                return None
            return session

    def set_cookie(self, session: Session) -> tuple[str, str]:
        return (
            "Set-Cookie",
            f"{self.cookie_name}={session.sid}; Path=/; HttpOnly; SameSite=Strict",
        )

    def clear_cookie(self) -> tuple[str, str]:
        return ("Set-Cookie", f"{self.cookie_name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")

    # ------------------------------------------------------------- requests

    def may_read(self, session: Session | None) -> bool:
        return session is not None or not self.public

    def same_origin(self, environ: WSGIEnviron) -> bool:
        """False for a request the browser says came from another site."""
        if str(environ.get("HTTP_SEC_FETCH_SITE", "")).lower() == "cross-site":
            return False
        origin = environ.get("HTTP_ORIGIN")
        if origin is None:
            return True
        return str(origin).lower() == f"http://{str(environ.get('HTTP_HOST', '')).lower()}"

    def csrf_ok(self, session: Session, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), session.csrf.encode())


def _has_port(name: str) -> bool:
    if name.startswith("["):
        return "]:" in name
    return ":" in name
