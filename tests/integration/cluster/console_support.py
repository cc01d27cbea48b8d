"""What the console's browser tests share: Debian's Chromium driven by Playwright (no
browser download), a page that refuses and records any request to a host other than
loopback, and the console's JSON API over urllib.  The fixtures are in ``conftest``."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cluster_support import WAIT
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from millrace.launcher.console_process import ConsoleProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
TOKEN = "console-test-token-5b1f"
EXPECT_MS = 30_000


def playwright_fixture() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


def browser_fixture(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():   # the test command installs it: its absence is a broken setup
        raise RuntimeError("the console tests need Debian's chromium: "
                           "bash scripts/system-deps.sh chromium")
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=CHROMIUM_ARGS)
    yield browser
    browser.close()


def shots_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("MILLRACE_CONSOLE_SCREENSHOTS")
    directory = Path(wanted) if wanted else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class Guarded:
    """A page whose requests to anything but loopback are refused and recorded."""

    def __init__(self, browser: Browser) -> None:
        self.foreign: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page: Page = self.context.new_page()
        self.page.route("**/*", self._route)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route: Any) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in ("127.0.0.1", "localhost", "::1"):
            route.continue_()
        else:
            self.foreign.append(route.request.url)
            route.abort()

    def close(self) -> None:
        self.context.close()
        assert self.foreign == [], f"the page asked hosts other than loopback: {self.foreign}"
        assert self.errors == [], f"the page raised: {self.errors}"


def guarded_fixture(browser: Browser) -> Iterator[Guarded]:
    g = Guarded(browser)
    yield g
    g.close()


def api(console: ConsoleProcess, path: str, body: Any = None, *, method: str | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        console.url + path.lstrip("/"), data=data, method=method,
        headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def state(console: ConsoleProcess) -> dict[str, Any]:
    status, body = api(console, "api/state")
    assert status == 200
    return body


