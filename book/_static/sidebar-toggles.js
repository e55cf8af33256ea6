/* The sidebar buttons (☰ and the page's contents) work.

   sphinx-book-theme 1.3.0 with pydata-sphinx-theme 0.17.1 puts two buttons of each kind on every
   page: pydata's own, in a page header that the book theme never shows, and the book theme's,
   in the article header that the reader sees. Both carry the class `primary-toggle` (or
   `secondary-toggle`), and both themes wire only the first that `document.querySelector` finds:
   the hidden one. (pydata opens the sidebar as a drawer, a <dialog>, on a narrow screen; the book
   theme collapses the sidebar in its place from 992 px up.) So a tap on the buttons a reader
   sees did nothing. Here a click on any other button of a kind is handed to the one the themes
   wired, which then does what it does at this width. (sphinx-book-theme 1.4.0 is not the way
   out: it needs Sphinx 8.2, and jupyter-book 1.0.4 pins Sphinx 7.) */
document.addEventListener("click", (event) => {
  for (const kind of ["primary-toggle", "secondary-toggle"]) {
    const wired = document.querySelector(`.${kind}`);
    const pressed = event.target.closest?.(`.${kind}`);
    if (wired && pressed && pressed !== wired) {
      event.preventDefault();
      // The button's tooltip would otherwise stay up over the page after a tap.
      pressed.blur();
      wired.click();
      return;
    }
  }
});
