"""What the dashboard tests share: headless Chromium (Debian's, through Playwright) and its
login, an operator's HTTP session (the login's cookie, as a browser keeps it) and a small
reader of the server-rendered HTML (the standard library's parser; the pages are ours, so a
tree of elements with their attributes and text is enough).

(It holds no tests; its name is the one the dashboard's test files may have.)"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from html.parser import HTMLParser

import httpx
from playwright.async_api import Browser, Page, async_playwright

from tests.support.processes import AgentProcess

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

VOID = frozenset({"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"})


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        """Descendants with this tag, class and attributes (`data_x` is `data-x`), in order."""
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
            if (
                (tag is None or child.tag == tag)
                and (cls is None or cls in child.classes)
                and all(child.attrs.get(k) == v for k, v in wanted.items())
            ):
                found.append(child)
            found += child.all(tag, cls, **attrs)
        return found

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        (found,) = self.all(tag, cls, **attrs)
        return found


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.at = self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_endtag(self, tag: str) -> None:
        open_node: Node | None = self.at
        while open_node is not None and open_node.tag != tag:
            open_node = open_node.parent
        if open_node is not None and open_node.parent is not None:
            self.at = open_node.parent

    def handle_data(self, data: str) -> None:
        self.at.children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


@contextmanager
def operator_session(server: AgentProcess, key: str | None = None) -> Iterator[httpx.Client]:
    """An HTTP client logged in to the dashboard: the key becomes the session cookie."""
    with httpx.Client(base_url=server.url, timeout=30, follow_redirects=False) as http:
        if key is not None:
            response = http.post("/ui/login", json={"key": key})
            assert response.status_code == 200, response.text
            assert http.cookies.get("a2a_agent_key") == key
        yield http


def page(http: httpx.Client, path: str) -> Node:
    response = http.get(path)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    return parse(response.text)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        try:
            yield launched
        finally:
            await launched.close()


async def log_in(page: Page, server: AgentProcess, key: str) -> None:
    await page.goto(f"{server.url}/ui")
    assert page.url.endswith("/ui/login")
    await page.fill("#key", key)
    await page.click("#submit")
