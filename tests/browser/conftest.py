"""Fixtures for the browser tests: the built book served on localhost, and Debian's Chromium
driven by Playwright (which never downloads a browser of its own).

The book is the one ``make test`` builds (``_build/test-book/_build/html``); ``--book-html DIR``
points the tests at another build, for example the published one (``_build/html``).
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BOOK = REPO_ROOT / "_build" / "test-book" / "_build" / "html"
SCREENSHOT_DIR = REPO_ROOT / "_build" / "screenshots"
# Chromium inside a closed network: no background connections, no first-run work, no GPU
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def pytest_addoption(parser):
    parser.addoption("--book-html", default=str(DEFAULT_BOOK),
                     help="the built HTML book to test (default: the smoke build of `make test`)")
    parser.addoption("--screenshots", default=str(SCREENSHOT_DIR),
                     help="folder for a full-page screenshot of every page ('' for none)")


@pytest.fixture(scope="session")
def book_root(request) -> Path:
    root = Path(request.config.getoption("--book-html", default=None) or DEFAULT_BOOK).resolve()
    if not (root / "index.html").exists():
        pytest.fail(f"--book-html: no built book at {root} (build it first: `make test` builds the smoke book "
                    f"there, `make book` the published one in _build/html)", pytrace=False)
    return root


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):   # the browser cancelled a request
            pass


@pytest.fixture(scope="session")
def book_url(book_root):
    """The book served over HTTP on a free local port (as a reader's static host would)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(book_root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("no Chromium: install Debian's (`apt-get install chromium`, as .ci/run does) or set "
                    "CHROMIUM to its path; Playwright must not download a browser", pytrace=False)
    return path


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def pages(book_root) -> list[str]:
    """Every page of the book, relative to its root."""
    return sorted(p.relative_to(book_root).as_posix() for p in book_root.rglob("*.html")
                  if not {"_static", "_sources", "_images"} & set(p.parts))


@pytest.fixture(scope="session")
def screenshot_dir(request) -> Path | None:
    folder = request.config.getoption("--screenshots")
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    return Path(folder)
