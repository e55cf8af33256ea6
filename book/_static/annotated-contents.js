/* An annotated page's contents (book/_ext/annotated.py adds this script to those pages only): a
   tap on an entry of the contents drawer closes the drawer, so that the section it goes to is
   seen (the theme closes its drawers on a tap beside them or on Escape, not on a link). The
   page goes to the entry once the drawer is closed and the theme has put the contents back: in
   the same moment, the browser scrolled to the wrong place. */
document.addEventListener(
  "click",
  (event) => {
    const link = event.target.closest?.("#pst-secondary-sidebar-modal a[href^='#']");
    if (!link) return;
    event.preventDefault();
    link.closest("dialog").close();
    requestAnimationFrame(() => {
      location.hash = link.hash;
    });
  },
  true,
);
