"""Sphinx extension: every page includes each of its scripts once.

Jupyter Book 1.x sets up sphinx-thebe so that its inline configuration script
(``const THEBE_JS_URL = ...``) is added to every page twice (once with no file
name, once with an empty one), and the second copy throws "Identifier
'THEBE_JS_URL' has already been declared" in the reader's console. This drops
exact duplicates (same file, same inline body, same attributes) from each
page's script list before it is rendered.
"""


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (
            str(getattr(script, "filename", script) or ""),
            repr(sorted(getattr(script, "attributes", {}).items())),
        )
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    # Late (the default priority is 500), after the extensions that add scripts
    # to the page.
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
