"""Small fixes that make the rendered book load cleanly offline, as the browser tests check.

- sphinx-thebe and sphinx-togglebutton add their inline configuration scripts once per
  ``env-before-read-docs``, which runs twice in a Jupyter Book build, and the copies differ only
  in their empty file name (``None`` and ``''``): the second ``const THEBE_JS_URL`` throws a
  script error on every page. A page keeps one copy of each inline script.
- The root ``index.html`` that sphinx-external-toc writes is a bare redirect that names no icon,
  so the browser asks for ``/favicon.ico``: a 404 in the console whenever that request goes out
  before the redirect (a race the browser tests caught about one load in five). The book's icon
  is copied there.
- sphinx-proof turns ``numfig`` on for every build, so figures were numbered across the whole book and a
  chapter's first figure read "Fig. 15" beside prose about the paper's Figure 1. The theorem boxes are
  ``:nonumber:``, so numbering is turned off again once sphinx-proof has set it.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def _drop_repeated_scripts(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def _icon_at_the_root(app, exception):
    icon = app.config.html_favicon
    if exception is not None or app.builder.format != "html" or not icon or "://" in icon:
        return
    source = next((base / icon for base in (Path(app.confdir), Path(app.srcdir)) if (base / icon).is_file()), None)
    if source is not None:
        shutil.copyfile(source, Path(app.outdir) / "favicon.ico")


def _no_book_wide_numbers(app, config):
    config.numfig = False


def setup(app):
    app.connect("config-inited", _no_book_wide_numbers, priority=900)  # after sphinx-proof's (500)
    app.connect("html-page-context", _drop_repeated_scripts, priority=999)
    app.connect("build-finished", _icon_at_the_root)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
