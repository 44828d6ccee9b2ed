#!/usr/bin/env python3
"""The documentation site's checks (scripts/docs check runs them; offline, standard library only).

    docs-check.py links SITE            every internal link and anchor of the built site resolves
    docs-check.py fences DOCS           every code block is a doctest, followed by scripts/guide-check,
                                        or marked as a language that is not Rust
    docs-check.py browser SITE CHROMIUM SHOTS
                                        headless Chromium on the site, served on loopback: the start
                                        page, three pages reached through its navigation, a search;
                                        a screenshot of each in SHOTS
"""

import functools
import html.parser
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

# The guides scripts/guide-check follows: their `rust file=...` blocks are compiled and run there.
GUIDES = {"guides/getting-started.md", "guides/testing-your-stage.md"}


class Page(html.parser.HTMLParser):
    """The links, ids and title of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids, self.title, self._in_title = [], set(), "", False
        self.chapters = []  # (href, text) of the sidebar's chapter links
        self._chapter = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("id", "name"):
            if attrs.get(name):
                self.ids.add(attrs[name])
        for name in ("href", "src"):
            if attrs.get(name) is not None:
                self.links.append(attrs[name])
        if tag == "title":
            self._in_title = True
        if tag == "a" and attrs.get("href") and "chapter-item" in (self._li_class or ""):
            self._chapter = [attrs["href"], ""]
        if tag == "li":
            self._li_class = attrs.get("class", "")

    _li_class = ""

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        if tag == "a" and self._chapter is not None:
            self.chapters.append((self._chapter[0], " ".join(self._chapter[1].split())))
            self._chapter = None

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if self._chapter is not None:
            self._chapter[1] += data


def parse(text):
    page = Page()
    page.feed(text)
    return page


def links(site):
    site = Path(site).resolve()
    pages = {p: parse(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")}
    problems, checked = [], 0
    for path, page in sorted(pages.items()):
        # print.html repeats every chapter with its links rewritten to its own anchors; 404.html
        # and toc.html are the theme's (links relative to the site's root, checked from index).
        if path.name in ("print.html", "404.html", "toc.html"):
            continue
        for link in page.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue  # external (http, https, mailto, data): not followed offline
            checked += 1
            if parts.path:
                target = (path.parent / urllib.parse.unquote(parts.path)).resolve()
            else:
                target = path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if site not in target.parents and target != site:
                problems.append(f"{where}: leaves the site")
            elif not target.is_file():
                problems.append(f"{where}: no such file")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target.read_text(encoding="utf-8")).ids
                if urllib.parse.unquote(parts.fragment) not in ids:
                    problems.append(f"{where}: no anchor #{parts.fragment} in {target.relative_to(site)}")
    for problem in problems:
        print(problem)
    print(f"links: {checked} internal links in {len(pages)} pages, {len(problems)} broken")
    return not problems


def fences(docs):
    docs = Path(docs)
    problems, counts = [], {}
    for path in sorted(docs.rglob("*.md")):
        rel = path.relative_to(docs).as_posix()
        opener = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r"^\s*(```+|~~~+)(.*)$", line)
            if not m:
                continue
            if opener is None:
                opener = m.group(1)
                info = m.group(2).strip()
                words = re.split(r"[\s,]+", info) if info else [""]
                language = words[0]
                if language == "":
                    problems.append(f"docs/{rel}:{number}: a code block without a language (mark it `text`)")
                elif language == "rust":
                    if not (rel in GUIDES and any(w.startswith("file=") for w in words)):
                        problems.append(f"docs/{rel}:{number}: a Rust block that no test compiles "
                                        "(give it a file= in a guide scripts/guide-check follows, or mark it `text`)")
                    else:
                        counts["guide-check"] = counts.get("guide-check", 0) + 1
                else:
                    counts[language] = counts.get(language, 0) + 1
            elif line.strip() == opener:
                opener = None
        if opener is not None:
            problems.append(f"docs/{rel}: a code block that never closes")
    for problem in problems:
        print(problem)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"code blocks: {summary}; {len(problems)} unchecked")
    return not problems


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def browser(site, chromium, shots):
    shots = Path(shots)
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):
        old.unlink()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    profile = tempfile.mkdtemp(prefix="docs-chromium-")

    def run(url, *args):
        command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                   "--hide-scrollbars", f"--user-data-dir={profile}", "--window-size=1280,900",
                   "--virtual-time-budget=8000", *args, url]
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        if result.returncode != 0:
            sys.exit(f"chromium {args} {url} failed: {result.returncode}")
        return result.stdout.decode("utf-8", "replace")

    def visit(url, name):
        dom = run(url, "--dump-dom")
        if name is None:
            print(f"browser: {url}")
            return parse(dom), dom
        shot = shots / f"{name}.png"
        run(url, f"--screenshot={shot}")
        if not shot.is_file() or shot.stat().st_size < 10_000:
            sys.exit(f"browser: no screenshot of {url} ({shot})")
        print(f"browser: {url} -> {shot}")
        return parse(dom), dom

    ok = True
    try:
        start, _ = visit(base, "1-start")
        if "flechtwerk" not in start.title:
            sys.exit(f"browser: the start page's title is {start.title!r}")
        chapters = [(h, t) for h, t in start.chapters if not h.startswith(("#", "http"))]
        if len(chapters) < 10:
            sys.exit(f"browser: the start page's navigation has {len(chapters)} chapter links (rendered by its script)")
        # Three pages from the navigation: the first tutorial, an explanation, the last reference.
        picks = [chapters[1], chapters[len(chapters) // 2], chapters[-1]]
        for i, (href, text) in enumerate(picks, 2):
            page, _ = visit(urllib.parse.urljoin(base, href), f"{i}-{Path(href).stem}")
            # A chapter title in the navigation is prefixed by its number ("2.1. Getting started").
            title = re.sub(r"^[\d.]+\s*", "", text)
            if title.split()[0].lower() not in page.title.lower():
                print(f"browser: {href}: the navigation says {text!r}, the page's title is {page.title!r}")
                ok = False
        query = "fencing"
        _, dom = visit(urllib.parse.urljoin(base, f"index.html?search={query}"), "5-search")
        # mdBook 0.5 prefixes its element ids with `mdbook-`; 0.4 did not.
        results = re.search(r'id="(?:mdbook-)?searchresults"[^>]*>(.*?)</ul>', dom, re.S)
        hits = re.findall(r'<li><a href="([^"]+)"[^>]*>(.*?)</a>', results.group(1)) if results else []
        print(f"browser: search for {query!r}: {len(hits)} results, the first {hits[0][1]!r}" if hits
              else f"browser: search for {query!r}: no results")
        if not hits:
            ok = False
        else:
            # The first result, followed: its page and its anchor exist (the links check saw the
            # site's own links; a result's link is made by the search script).
            # Its DOM only: headless Chromium's screenshot of a page scrolled to an anchor comes out
            # blank.
            href = hits[0][0]
            page, _ = visit(urllib.parse.urljoin(base, href), None)
            anchor = urllib.parse.urlsplit(href).fragment
            if anchor and anchor not in page.ids:
                print(f"browser: the search result {href} has no anchor #{anchor}")
                ok = False
    finally:
        server.shutdown()
    return ok


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command = sys.argv[1]
    if command == "links":
        ok = links(sys.argv[2])
    elif command == "fences":
        ok = fences(sys.argv[2])
    elif command == "browser" and len(sys.argv) == 5:
        ok = browser(*sys.argv[2:])
    else:
        sys.exit(__doc__)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
