/* A table or a display equation that scrolls sideways says so.

   The theme puts each table in a box, .pst-scrollable-table-container, that scrolls when the
   table is wider than the column (on a phone, most results tables); a display equation
   (MathJax's mjx-container) scrolls in itself (mixers.css). This marks such a box with
   data-more-right while more lies beyond its right edge and data-more-left once it has
   scrolled, and keeps the marks true as the reader scrolls, the page is resized, or the box
   changes width (MathJax typesets the maths after the page has loaded, in the tables' cells
   too). The book's CSS (mixers.css) draws the cues from them: a fading edge, and for a table
   a shadow beside its first column, which stays in view. */
(() => {
  const BOXES = '.pst-scrollable-table-container, mjx-container[display="true"]';

  // Every box is measured before any is marked: a mark changes the page's style, so a box
  // measured after one was marked would lay the whole page out again, once for each of a
  // chapter's dozens of equations.
  const mark = (boxes) => {
    const marks = [...boxes].map((box) => {
      const more = box.scrollWidth - box.clientWidth;
      // A pixel of slack: widths are fractional and the scroll position is rounded.
      return [box, more > 1 && box.scrollLeft > 1, more > 1 && box.scrollLeft < more - 1];
    });
    for (const [box, left, right] of marks) {
      box.toggleAttribute("data-more-left", left);
      box.toggleAttribute("data-more-right", right);
    }
  };

  // A box is first marked when the observer first reports its size, which it does for every
  // box it starts to watch, after the page's next layout.
  const resized = new ResizeObserver((entries) => {
    const boxes = new Set(entries.map((entry) => entry.target.closest(BOXES)));
    boxes.delete(null);
    mark(boxes);
  });
  const watched = new WeakSet();
  const watch = (box) => {
    if (watched.has(box)) return;
    watched.add(box);
    resized.observe(box);
    for (const child of box.children) resized.observe(child);
    box.addEventListener("scroll", () => mark([box]), { passive: true });
  };

  const start = () => {
    document.querySelectorAll(BOXES).forEach(watch);
    // Display equations appear when MathJax has typeset them.
    new MutationObserver((changes) => {
      for (const change of changes) {
        for (const node of change.addedNodes) {
          if (node.nodeType !== Node.ELEMENT_NODE) continue;
          if (node.matches(BOXES)) watch(node);
          node.querySelectorAll(BOXES).forEach(watch);
        }
      }
    }).observe(document.body, { childList: true, subtree: true });
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
