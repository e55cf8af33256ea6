"""Sphinx extension: a reference to a heading with maths shows the maths.

A ``{ref}`` to a section, ``{ref}`why-sqrt-dk```, shows the section's title,
which Sphinx writes as plain text: a heading "Why divide by
:math:`\\sqrt{d_k}`" was referred to as "Why divide by \\sqrt{d_k}", its TeX
untypeset. Here, after Sphinx has resolved the references, each one whose
text is a section's title with maths gets the title's own nodes back (its
maths typeset by MathJax, as in the heading itself).
"""

import copy

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform


def titles_with_maths(env):
    """{title as text: the title's nodes} of every labelled section whose
    title holds maths."""
    found = {}
    for label, (docname, labelid, title) in env.get_domain(
        "std"
    ).labels.items():
        if not title or "\\" not in title or title in found:
            continue
        try:
            doctree = env.get_doctree(docname)
        except FileNotFoundError:
            continue
        for section in doctree.findall(nodes.section):
            if labelid in section["ids"] and isinstance(
                section[0], nodes.title
            ):
                heading = section[0]
                if any(heading.findall(nodes.math)):
                    found[title] = [
                        copy.deepcopy(child)
                        for child in heading.children
                        if not isinstance(child, nodes.target)
                    ]
                break
    return found


class HeadingMathsInReferences(SphinxPostTransform):
    # After Sphinx's ReferencesResolver (priority 10).
    default_priority = 20

    def run(self, **kwargs):
        titles = None
        for inline in list(self.document.findall(nodes.inline)):
            if "std-ref" not in inline["classes"]:
                continue
            text = inline.astext()
            if "\\" not in text:
                continue
            if titles is None:
                titles = titles_with_maths(self.env)
            if text in titles:
                inline[:] = copy.deepcopy(titles[text])


def setup(app):
    app.add_post_transform(HeadingMathsInReferences)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
