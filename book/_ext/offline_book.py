"""Small fixes that make the rendered book load cleanly offline, as the browser tests check.

- sphinx-thebe and sphinx-togglebutton add their inline configuration scripts once per
  ``env-before-read-docs``, which runs twice in a Jupyter Book build, and the copies differ only
  in their empty file name (``None`` and ``''``): the second ``const THEBE_JS_URL`` throws a
  script error on every page. A page keeps one copy of each inline script.
"""

from __future__ import annotations


def _drop_repeated_scripts(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _drop_repeated_scripts, priority=999)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
