/* A table that scrolls sideways says so.

   The theme puts each table in a box, .pst-scrollable-table-container, that scrolls when the
   table is wider than the column (on a phone, most results tables). This marks the box with
   data-more-right while columns lie beyond its right edge and data-more-left once it has
   scrolled, and keeps the marks true as the reader scrolls, the page is resized, or the table
   changes width (MathJax typesets the maths in its cells after the page has loaded). The book's
   CSS (mixers.css) draws the cues from them: a fading right edge, a shadow beside the first
   column, which stays in view. */
(() => {
  const BOX = ".pst-scrollable-table-container";

  const mark = (box) => {
    const more = box.scrollWidth - box.clientWidth;
    // A pixel of slack: widths are fractional and the scroll position is rounded.
    box.toggleAttribute("data-more-left", more > 1 && box.scrollLeft > 1);
    box.toggleAttribute("data-more-right", more > 1 && box.scrollLeft < more - 1);
  };

  const start = () => {
    const boxes = document.querySelectorAll(BOX);
    const resized = new ResizeObserver((entries) => {
      for (const entry of entries) mark(entry.target.closest(BOX));
    });
    for (const box of boxes) {
      mark(box);
      resized.observe(box);
      for (const table of box.children) resized.observe(table);
      box.addEventListener("scroll", () => mark(box), { passive: true });
    }
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
