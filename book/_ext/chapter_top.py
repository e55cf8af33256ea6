"""Sphinx extension: the top of a chapter (a notebook page) reads well.

* An "Open in Colab" link under the chapter's title, where a reader looks for
  it (the theme's launch button, an unlabelled rocket in the header, stays).
  Its URL is the one the launch button gets: Colab's URL (``launch_buttons``
  in ``_config.yml``), then the repository, branch and notebook path
  (``repository``), so ``tools/set_repository_url.py`` still changes it in
  one place.
* The cells that only set the chapter up, shown collapsed (tag
  ``hide-input``): the Colab cell, which installs the package on Colab, and
  the cells right after it, such as the imports, used to be one "Show code
  cell source" bar each, two or three of them before the chapter's first
  section. Adjacent ones are folded into one bar that says what it holds
  ("Show the setup code: installing on Colab, the imports, the settings"),
  up to one that shows an output, which stays in its place under the bar; a
  hidden cell of imports elsewhere says "Show the imports".
* A cell that names its own fold (cell metadata ``"mystnb":
  {"code_prompt_show": "How Fig. 6.2 is drawn", "code_prompt_hide": ...}``,
  read by MyST-NB) keeps its label and its own bar. Where it names only the
  label to show, the open bar shows the same words, never MyST-NB's generic
  "Hide code cell source".
"""

import re

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.nodes import NodeMatcher

COLAB_LINK_CLASS = "colab-link"


def colab_url(config, docname: str) -> str | None:
    """The Colab URL of the notebook ``docname`` (as the launch button's)."""
    theme = config.html_theme_options
    colab = theme.get("launch_buttons", {}).get("colab_url", "").strip("/")
    found = re.fullmatch(
        r"https://github\.com/([^/]+)/([^/]+?)/?",
        theme.get("repository_url", ""),
    )
    if not colab or not found:
        return None
    owner, repo = found.groups()
    branch = theme.get("repository_branch", "main")
    book = theme.get("path_to_docs", "").strip("/")
    path = f"{book}/{docname}.ipynb" if book else f"{docname}.ipynb"
    return f"{colab}/github/{owner}/{repo}/blob/{branch}/{path}"


def add_colab_link(app, doctree):
    docname = app.env.docname
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    url = colab_url(app.config, docname)
    title = next(iter(doctree.findall(nodes.title)), None)
    if url is None or title is None:
        return
    link = nodes.reference("", "Open in Colab", refuri=url)
    # fa-rocket: the launch button's icon (book/_ext/icons.py) before it.
    link["classes"] += [COLAB_LINK_CLASS, "fa-rocket"]
    paragraph = nodes.paragraph("", "", link, classes=["colab-line"])
    title.parent.insert(title.parent.index(title) + 1, paragraph)


# What a hidden setup cell holds, read from its code.
def what_it_holds(code: str) -> str:
    lines = [
        line
        for line in code.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if "google.colab" in code:
        return "installing on Colab"
    if lines and re.match(r"(import|from)\s", lines[0]):
        return "the imports"
    return "the settings"


class FoldSetupCells(SphinxPostTransform):
    """After myst-nb has put each hidden input in its own bar
    (``HideInputCells``, priority 199): adjacent hidden cells with no output
    share one bar, labelled by what they hold."""

    default_priority = 210
    formats = ("html",)

    def run(self, **kwargs):
        from myst_nb.sphinx_ import HideCodeCellNode

        hidden = NodeMatcher(nodes.container, nb_element="cell_code")
        done = set()
        for cell in list(self.document.findall(hidden)):
            if (
                id(cell) in done
                or not self.only_hidden_input(cell, HideCodeCellNode)
                or self.own_label(cell)
            ):
                continue
            run = [cell]
            sibling = cell.next_node(descend=False, siblings=True)
            # The run ends after a cell that shows an output (which stays),
            # or before one that names its own fold.
            while self.hidden_input(
                sibling, HideCodeCellNode
            ) and not self.own_label(sibling):
                run.append(sibling)
                if len(sibling.children) > 1:
                    break
                sibling = sibling.next_node(descend=False, siblings=True)
            done.update(map(id, run))
            bar = cell.children[0]
            for other in run[1:]:
                bar.extend(other.children[0].children)
                other.remove(other.children[0])
                if not other.children:
                    other.parent.remove(other)
            held = [what_it_holds(c.astext()) for c in bar.children]
            if held == ["the imports"]:
                show = "Show the imports"
            elif len(run) > 1 or held == ["installing on Colab"]:
                show = "Show the setup code: " + ", ".join(held)
            else:
                continue
            bar["prompt_show"] = show
            bar["prompt_hide"] = "Hide" + show[len("Show") :]

    @staticmethod
    def own_label(cell) -> bool:
        """The cell's metadata names its fold (MyST-NB's code_prompt_show)."""
        mystnb = cell.get("cell_metadata", {}).get("mystnb") or {}
        return "code_prompt_show" in mystnb

    @staticmethod
    def only_hidden_input(cell, bar_class) -> bool:
        """The cell is its collapsed source and nothing else (no output)."""
        return len(cell.children) == 1 and isinstance(
            cell.children[0], bar_class
        )

    @staticmethod
    def hidden_input(cell, bar_class) -> bool:
        """A code cell whose source is collapsed (it may show an output)."""
        return (
            isinstance(cell, nodes.container)
            and cell.get("nb_element") == "cell_code"
            and bool(cell.children)
            and isinstance(cell.children[0], bar_class)
        )


GENERIC_HIDE = "Hide code cell"


class NoGenericHideLabel(SphinxPostTransform):
    """A fold whose cell names only the label to show (``code_prompt_show``)
    keeps those words when open, instead of MyST-NB's default "Hide code
    cell {type}"."""

    default_priority = 220
    formats = ("html",)

    def run(self, **kwargs):
        from myst_nb.sphinx_ import HideCodeCellNode

        for bar in self.document.findall(HideCodeCellNode):
            show = bar.get("prompt_show", "")
            if bar.get("prompt_hide", "").startswith(
                GENERIC_HIDE
            ) and not show.startswith("Show code cell"):
                if show.startswith("Show "):
                    bar["prompt_hide"] = "Hide " + show[len("Show ") :]
                else:
                    bar["prompt_hide"] = show


def setup(app):
    app.connect("doctree-read", add_colab_link)
    app.add_post_transform(FoldSetupCells)
    app.add_post_transform(NoGenericHideLabel)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
