"""One FastAPI app per test process, handed each test's own services.

FastAPI (0.165) works out a route's dependencies and models on an app's first requests to it:
60-150 ms of CPU for every new app, which each of the hundreds of in-process API and page tests
paid again. A server builds its app once; so does a test process now. Everything that serves a
request reads the app's services, settings and caches from `app.state` (see almanac.web.app), so
a test gets a fresh state on the same routes: no services, tokens or throttles of another test.
"""

from __future__ import annotations

from typing import Any

from almanac.web.app import create_app
from almanac.web.token_cache import TokenCache

# Keyed by what create_app builds into the app itself rather than into app.state: the cookie's
# `secure` flag (the session middleware's https_only) and the trusted proxies (a middleware).
_apps: dict[tuple[bool, str], Any] = {}


def app_for(services: Any) -> Any:
    settings = services.settings
    key = (bool(settings.secure_cookies), settings.trusted_proxies)
    app = _apps.get(key)
    if app is None:
        app = _apps[key] = create_app(settings, services=services)
        return app
    app.state._state.clear()  # the sign-in throttle and anything else a test left behind
    app.state.services = services
    app.state.settings = settings
    app.state.token_cache = TokenCache(settings.token_cache_s)
    return app
