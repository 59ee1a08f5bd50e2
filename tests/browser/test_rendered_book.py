"""The built book as a reader meets it, in headless Chromium: pages load cleanly, formulas are
typeset, images and links resolve, nothing overflows the content column, search works offline
and each chapter's download button gives its executed notebook. A screenshot of every page goes
to ``_build/screenshots/`` for a maintainer to look at.

Every page is loaded once (the ``readings`` fixture), and each test judges one aspect of what was read there,
reporting all its failures at once, not just the first.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

WIDTHS = (1280, 800)        # the content column must hold every table, figure and formula
PHONE_WIDTHS = (1280, 800, 390)  # no page may scroll sideways, a phone's included (a wide table scrolls in its box)
REFERENCE_DIR = Path(__file__).resolve().parents[1] / "references"

# Text that MathJax should have replaced: $...$ or $$...$$ left in prose, \( \) or \[ \] left in
# Sphinx's math spans, and MathJax's own error nodes. Code, where a $ is Python, is skipped.
MATH_LEFT_RAW = r"""() => {
  const out = [];
  const skip = 'pre, code, script, style, mjx-container, .cell_input, .highlight, textarea';
  const walker = document.createTreeWalker(document.querySelector('article') || document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    if (node.parentElement.closest(skip)) continue;
    const m = node.textContent.match(/\$[^$\s][^$]{0,80}\$|\\\(|\\\[/);
    if (m) out.push(m[0].slice(0, 60));
  }
  for (const el of document.querySelectorAll('mjx-merror, .MathJax_Error')) out.push('MathJax error: ' + el.textContent.slice(0, 60));
  for (const el of document.querySelectorAll('span.math, div.math')) {
    if (!el.querySelector('mjx-container')) out.push('untypeset: ' + el.textContent.slice(0, 60));
  }
  return out;
}"""

# Tables, images, figures, display maths and printed output wider than the article column (scrolling inside a
# wrapper is still overflow: the reader has to scroll sideways to read a row).
OVERFLOW = r"""() => {
  const column = document.querySelector('article.bd-article') || document.querySelector('main');
  const edge = column.getBoundingClientRect().right + 1;
  const out = [];
  for (const el of column.querySelectorAll('table, img, figure, mjx-container[display="true"]')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > edge) {
      const near = el.closest('section[id]');
      const first = el.tagName === 'TABLE' ? (el.querySelector('tbody tr, tr')?.innerText || '').slice(0, 50) : (el.getAttribute('alt') || el.getAttribute('src') || '').slice(0, 50);
      out.push(`${el.tagName} ${Math.round(r.right - edge + 1)} px past the column in #${near ? near.id : '?'}: ${first.replace(/\s+/g, ' ')}`);
    }
  }
  // a formula's typeset box can run past its own container while the container stays inside the column:
  // MathJax lets a display formula scroll and a box clips inline maths, so the end of the formula is hidden
  for (const el of column.querySelectorAll('mjx-container')) {
    const math = el.querySelector('mjx-math');
    if (!math || el.closest('table')) continue;                   // tables are checked whole, above
    const block = el.getAttribute('display') === 'true' ? el : el.parentElement.closest('p, li, dd, div');
    const limit = Math.min(edge, block.getBoundingClientRect().right + 1);
    const r = math.getBoundingClientRect();
    if (r.width > 0 && r.right > limit) {
      const near = el.closest('section[id]');
      out.push(`formula ${Math.round(r.right - limit)} px past its box in #${near ? near.id : '?'}: ` +
               (el.getAttribute('aria-label') || el.textContent || '').replace(/\s+/g, ' ').slice(0, 50));
    }
  }
  // a printed line wider than its output box scrolls sideways, and the reader misses its end
  for (const el of column.querySelectorAll('.cell_output pre')) {
    if (el.scrollWidth > el.clientWidth + 1) {
      const near = el.closest('section[id]');
      out.push(`printed output ${el.scrollWidth - el.clientWidth} px wider than its box in #${near ? near.id : '?'}: ` +
               el.textContent.replace(/\s+/g, ' ').slice(0, 50));
    }
  }
  return out;
}"""

# Where a reader meets the page at 1280 x 900: its height, the top of the results table (the paragraph that opens
# it) and of the first figure, in px from the top of the document (null where the page has none)
PAGE_MEASURES = r"""() => {
  const top = el => el ? Math.round(el.getBoundingClientRect().top + window.scrollY) : null;
  const opener = [...document.querySelectorAll('article p')].find(p => p.textContent.trim().startsWith('Results.'));
  let table = opener;
  while (table && table.tagName !== 'TABLE' && !table.querySelector?.('table')) table = table.nextElementSibling;
  return {height: document.documentElement.scrollHeight, results_table: top(opener),
          results_table_end: table ? Math.round((table.tagName === 'TABLE' ? table : table.querySelector('table'))
                                                 .getBoundingClientRect().bottom + window.scrollY) : null,
          first_figure: top(document.querySelector('article figure img, article .cell_output img'))};
}"""
SCREEN_HEIGHT = 900

# What makes the page wider than the window, and by how much (none: the page does not scroll sideways). Text
# inside a box that scrolls on its own (a wide table's wrapper, a code cell) does not count.
SIDEWAYS = r"""() => {
  const excess = document.documentElement.scrollWidth - window.innerWidth;
  if (excess <= 0) return [];
  const scrolls = el => { for (let a = el.parentElement; a; a = a.parentElement) {
    const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
    return false; };
  const wide = [...document.querySelectorAll('article *')].filter(el => el.getBoundingClientRect().right
    > window.innerWidth + 1 && el.checkVisibility() && !scrolls(el)).slice(0, 3);
  return [`${excess} px wider than the window`, ...wide.map(el => `${el.tagName}: ${el.textContent.slice(0, 50)}`)];
}"""

MATHJAX_DONE = "() => window.MathJax && MathJax.startup ? MathJax.startup.promise.then(() => true) : true"


def visit(browser, url, width=1280):
    """A fresh page at ``width`` with the console errors and failed requests it produced."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda err: problems.append(f"script error: {err}"))
    page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}"))
    page.on("response", lambda res: problems.append(f"HTTP {res.status}: {res.url}") if res.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")      # index.html redirects to the first page
    page.evaluate(MATHJAX_DONE)
    return page, problems


def report(failures: dict) -> str:
    return "\n".join(f"{where}:\n  " + "\n  ".join(what) for where, what in failures.items())


@dataclass
class Reading:
    """What one visit of a page found: its problems, the maths left raw, its images, links, download links,
    figures, and what overflows the content column at each width of WIDTHS."""
    problems: list
    raw_maths: list
    images: list
    links: list
    notebooks: list
    figures: int
    bare_figures: int
    measures: dict = field(default_factory=dict)
    overflow: dict = field(default_factory=dict)
    sideways: dict = field(default_factory=dict)


NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


@pytest.fixture(scope="session")
def readings(browser, book_url, pages, screenshot_dir) -> dict:
    """Every page visited once: loaded at the widest width (with a full-page screenshot), read, then narrowed to
    each other width of WIDTHS to measure the overflow there. Each test below judges one aspect of these readings,
    so a page is loaded once however many tests read it."""
    found = {}
    for rel in pages:
        page, problems = visit(browser, book_url + rel, max(WIDTHS))
        if screenshot_dir is not None:
            page.screenshot(path=str(screenshot_dir / (rel.replace("/", "__").removesuffix(".html") + ".png")),
                            full_page=True)
        reading = Reading(
            problems=problems, raw_maths=page.evaluate(MATH_LEFT_RAW),
            images=[src for src in page.eval_on_selector_all("article img", "els => els.map(e => e.src)")
                    if not src.startswith("data:")],
            links=page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"),
            notebooks=page.eval_on_selector_all("a[href$='.ipynb']", "els => els.map(e => e.href)"),
            figures=page.eval_on_selector_all(".cell_output img", "els => els.length"),
            bare_figures=page.eval_on_selector_all(
                ".cell_output img", "els => els.filter(e => !e.closest('figure')?.querySelector('figcaption')).length"),
            measures=page.evaluate(PAGE_MEASURES))
        for width in sorted(PHONE_WIDTHS, reverse=True):
            page.set_viewport_size({"width": width, "height": 900})
            page.evaluate(NEXT_FRAME)
            if width in WIDTHS:
                reading.overflow[width] = page.evaluate(OVERFLOW)
            reading.sideways[width] = page.evaluate(SIDEWAYS)
        page.close()
        found[rel] = reading
    if screenshot_dir is not None:  # for a maintainer: each chapter's length in screens and what it shows first
        (screenshot_dir / "page-measures.json").write_text(json.dumps(
            {rel: dict(r.measures, screens=round(r.measures["height"] / SCREEN_HEIGHT, 1)) for rel, r in found.items()},
            indent=1) + "\n")
    return found


def test_every_page_loads_without_errors_and_typesets_its_maths(readings):
    failures = {rel: r.problems + r.raw_maths for rel, r in readings.items() if r.problems or r.raw_maths}
    assert not failures, "\n" + report(failures)


def test_the_root_redirect_finds_the_book_icon(book_root):
    # the redirect names no icon, so a browser asks for /favicon.ico, sometimes before it redirects
    assert (book_root / "favicon.ico").read_bytes() == (book_root / "_static" / "favicon.png").read_bytes()


def test_every_image_loads(browser, readings):
    failures = {}
    request = browser.new_context().request
    for rel, reading in readings.items():
        broken = []
        for src in reading.images:
            response = request.get(src)
            if not response.ok or not response.headers.get("content-type", "").startswith("image/"):
                broken.append(f"{src} ({response.status}, {response.headers.get('content-type')})")
        if broken:
            failures[rel] = broken
    assert not failures, "\n" + report(failures)


def element_ids(path: Path) -> set[str]:
    return set(re.findall(r"""\bid=["']([^"']+)["']""", path.read_text(encoding="utf-8")))


def test_every_internal_link_and_anchor_resolves(book_url, book_root, readings):
    failures, ids = {}, {}
    for rel, reading in readings.items():
        dead = []
        for href in sorted(set(reading.links)):
            if not href.startswith(book_url):
                continue                                      # external: the book is read offline
            target, fragment = urldefrag(href)
            path = book_root / unquote(urlparse(target).path).lstrip("/")
            if path.is_dir():
                path = path / "index.html"
            if not path.exists():
                dead.append(f"{href}: no such file")
            elif fragment and path.suffix == ".html":
                if path not in ids:
                    ids[path] = element_ids(path)
                if unquote(fragment) not in ids[path]:
                    dead.append(f"{href}: no element with id {fragment!r}")
        if dead:
            failures[rel] = dead
    assert not failures, "\n" + report(failures)


@pytest.mark.parametrize("width", WIDTHS)
def test_no_table_figure_or_formula_overflows_the_content_column(readings, width):
    failures = {rel: r.overflow[width] for rel, r in readings.items() if r.overflow[width]}
    assert not failures, f"\nat {width} px:\n" + report(failures)


@pytest.mark.parametrize("width", PHONE_WIDTHS)
def test_no_page_scrolls_sideways(readings, width):
    failures = {rel: r.sideways[width] for rel, r in readings.items() if r.sideways[width]}
    assert not failures, f"\nat {width} px:\n" + report(failures)


def chapter_pages(pages):
    return [rel for rel in pages if rel.startswith("book/chapters/")]


def test_the_search_page_finds_a_claim_id_offline(browser, book_url, pages):
    """For each chapter, its first claim's id (as in its committed smoke reference; ids do not
    depend on the preset) typed into the book's search finds the chapter."""
    failures = {}
    for rel in chapter_pages(pages):
        paper = Path(rel).stem
        claim_id = json.loads((REFERENCE_DIR / f"{paper}.json").read_text())["claims"][0]["id"]
        page, problems = visit(browser, f"{book_url}search.html?q={claim_id}")
        page.wait_for_function("() => document.querySelector('#search-results p.search-summary, .search-summary')",
                               timeout=20_000)
        found = page.eval_on_selector_all("#search-results a, ul.search a", "els => els.map(e => e.href)")
        page.close()
        if not any(f"chapters/{paper}.html" in href for href in found):
            failures[f"search for {claim_id!r}"] = [f"results {found[:5]} do not include {rel}"] + problems
    assert not failures, "\n" + report(failures)


def test_each_chapter_download_button_returns_its_executed_notebook(browser, readings, pages):
    failures = {}
    chapters = chapter_pages(pages)
    assert chapters, "the book has no chapter pages"
    request = browser.new_context().request
    for rel in chapters:
        links = readings[rel].notebooks
        if not links:
            failures[rel] = ["no .ipynb download link"]
            continue
        response = request.get(links[0])
        if not response.ok:
            failures[rel] = [f"{links[0]}: HTTP {response.status}"]
            continue
        notebook = json.loads(response.body())
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        executed = [c for c in code if c.get("execution_count") and c.get("outputs")]
        if Path(urlparse(links[0]).path).stem != Path(rel).stem or not executed:
            failures[rel] = [f"{links[0]}: {len(executed)} of {len(code)} code cells executed with outputs"]
    assert not failures, "\n" + report(failures)


def test_every_chapter_figure_has_a_caption(readings, pages):
    """Each figure a chapter draws is a <figure> with a caption saying what to see and what theory predicts."""
    failures = {rel: [f"{readings[rel].bare_figures} of {readings[rel].figures} figures without a caption"]
                for rel in chapter_pages(pages) if readings[rel].bare_figures}
    assert not failures, "\n" + report(failures)


def test_each_chapter_shows_its_results_table_in_its_first_two_screens(readings, pages):
    """A reader who stops after two screens (1280 x 900) has seen what reproduced, what did not and why."""
    failures = {}
    for rel in chapter_pages(pages):
        m = readings[rel].measures
        if m["results_table"] is None or m["results_table_end"] is None:
            failures[rel] = ["no results table"]
        elif m["results_table"] >= 2 * SCREEN_HEIGHT:
            failures[rel] = [f"results table at {m['results_table']} px, below the first two screens"]
    assert not failures, "\n" + report(failures)


def test_the_claims_page_filters_and_links_every_claim_to_its_row(browser, book_url):
    page, problems = visit(browser, book_url + "book/claims.html")
    rows = page.locator("table.claims-filter tbody tr[data-chapter]")
    total = rows.count()
    assert total > 0 and not problems, problems
    chapters = page.eval_on_selector_all("table.claims-filter tbody tr[data-chapter]",
                                         "rs => [...new Set(rs.map(r => r.dataset.chapter))]")
    page.select_option("select[data-filter=chapter]", chapters[0])
    page.select_option("select[data-filter=kind]", "prediction")
    visible = page.eval_on_selector_all("table.claims-filter tbody tr[data-chapter]",
                                        "rs => rs.filter(r => !r.hidden).map(r => [r.dataset.chapter, r.dataset.kind])")
    assert visible and all(v == [chapters[0], "prediction"] for v in visible)
    heads = page.eval_on_selector_all("tr[data-chapter-head]", "rs => rs.filter(r => !r.hidden).map(r => r.dataset.chapterHead)")
    assert heads == [chapters[0]], f"the title rows shown are {heads}, not the chosen chapter's"
    assert f"{len(visible)} of {total} claims" in page.inner_text(".claims-filter-count")
    # every row links to an anchor on its chapter page (the link test checks that the anchors exist)
    links = page.eval_on_selector_all("table.claims-filter tbody tr[data-chapter] td:first-child a",
                                      "as => as.map(a => a.getAttribute('href'))")
    assert len(links) == total and all(re.fullmatch(r"chapters/[a-z-]+\.html#claim-[A-Za-z0-9_.-]+", h) for h in links)
    assert page.locator(".verdict-bar").count() >= len(chapters)
    downloads = page.eval_on_selector_all("a[href$='claims.json'], a[href$='claims.csv']", "as => as.map(a => a.href)")
    page.close()
    request = browser.new_context().request
    assert sorted(Path(urlparse(d).path).suffix for d in downloads) == [".csv", ".json"], downloads
    for url in downloads:  # every claim of the book, in each format
        body = request.get(url).text()
        assert len(json.loads(body) if url.endswith(".json") else list(csv.DictReader(io.StringIO(body)))) == total, url


def test_no_figure_or_theorem_carries_a_book_wide_number(book_root, pages):
    """Numbers counted across the book ("Fig. 15", "Theorem 10") contradicted the papers' own numbering in the
    captions and titles beside them; figures and boxes are unnumbered (book/_ext/offline_book.py, :nonumber:)."""
    numbered = {rel: found for rel in pages
                if (found := re.findall(r'caption-number">((?:Fig\.|Theorem|Lemma|Proposition|Definition) \d+)',
                                        (book_root / rel).read_text(encoding="utf-8")))}
    assert not numbered, numbered


def test_a_claim_link_opens_its_folded_row_highlighted_with_its_reason(browser, book_url):
    """The claims page's link to a claim lands on its row in the chapter's folded Verdicts: opened, highlighted,
    in view, and showing the reason for its verdict."""
    page, _ = visit(browser, book_url + "book/claims.html")
    href = page.eval_on_selector("table.claims-filter tbody tr[data-chapter] td:first-child a", "a => a.href")
    verdicts = page.eval_on_selector_all("select[data-filter=verdict] option", "os => os.map(o => o.value)")
    page.close()
    assert "holds" in verdicts or "passes" in verdicts, f"the verdict filter does not tell bounds and checks apart: {verdicts}"
    page, problems = visit(browser, href)
    row = page.evaluate("""() => { const row = document.querySelector('tr.claim-target');
        if (!row) return null; const r = row.getBoundingClientRect();
        return {visible: row.checkVisibility(), top: r.top, bottom: r.bottom, text: row.lastElementChild.textContent}; }""")
    page.close()
    assert row is not None, f"{href}: no highlighted row; {problems}"
    assert row["visible"] and 0 <= row["top"] and row["bottom"] <= SCREEN_HEIGHT, f"{href}: row not in view: {row}"
    assert ":" in row["text"], f"{href}: the row's verdict has no reason: {row['text']!r}"
