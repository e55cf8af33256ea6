/* An annotated page's notes flow beside its code (book/_ext/annotated.py adds this script to
   those pages only).

   Each section of the page is a row: its notes on the left, its code on the right
   (mixers.css). A note longer than its code would make its row taller than the code, and the
   code column would stand blank beside the rest of the note. Instead, where the code column is
   side by side with the notes (1100 px and wider), a long note runs on beside the next
   sections' code, and the next note starts below it: row by row, each note is moved down by
   what the notes above still cover (a top margin), and takes no more room in its own row than
   its code does (a negative bottom margin). A note never starts below the end of its own code,
   so each note stays beside the code it explains; where that would happen, the row above grows
   instead. A note runs on across the rows of code that have no note of their own, but not out
   of its part of the page (a titled part, or a fold).

   The layout is measured once the page's maths is typeset and its fonts are loaded
   (MathJax.startup.promise, then document.fonts.ready, chained onto MathJax's promise so that
   whoever waits for the maths waits for this too), and again when the window is resized. A
   fold opened or closed lays out its rows again. Without scripts the rows stand as they are.

   A link to an anchor inside a closed fold (a line, a function) opens the fold first. */
(() => {
  const WIDE = window.matchMedia("(min-width: 1100px)");
  // How far into its own code a moved note may start, at the latest: DRIFT (about six lines of
  // code), and at least LEAST_OVERLAP (a line and a bit) before the code ends.
  const DRIFT = 120;
  const LEAST_OVERLAP = 24;
  const reach = (codeHeight) => Math.max(Math.min(DRIFT, codeHeight - LEAST_OVERLAP), Math.min(LEAST_OVERLAP, codeHeight) - 1);
  // How much taller than all the code it could run on beside a note may be and still flow
  // (more, and it is read across the page above its code): about eight lines of notes.
  const WIDE_AFTER = 160;
  // The space between a note that runs on and the next one.
  const NOTE_GAP = 8;

  const rowsOf = (container) =>
    [...container.children].filter(
      (row) => row.classList.contains("annotated-section") && !row.classList.contains("annotated-intro"),
    );

  const reset = (note) => {
    note.style.marginTop = "";
    note.style.marginBottom = "";
  };

  // The rows of one container (a part, or a fold's rows), laid out in order.
  const flow = (rows) => {
    const notes = rows.map((row) => row.querySelector(":scope > .annotated-note"));
    rows.forEach((row) => row.classList.remove("annotated-wide"));
    notes.forEach((note) => note && reset(note));
    if (!WIDE.matches || !rows.length || !rows[0].getClientRects().length) return;
    const hasText = (note) => note && note.textContent.trim();
    const codeOf = (row) => row.querySelector(":scope > .annotated-code");
    const height = (element) => element.getBoundingClientRect().height;
    const gap = rowGap(rows[0]);
    // First, the notes that no flow could hold: a note taller than its own code and the code
    // it could run on beside (the rows below with no note, and a little of the next noted
    // row's) by more than WIDE_AFTER is read across the page above its code, in two columns,
    // as the module's introduction is.
    rows.forEach((row, i) => {
      const note = notes[i];
      if (!hasText(note)) return;
      let room = height(codeOf(row));
      for (const next of rows.slice(i + 1)) {
        const nextCode = height(codeOf(next));
        if (hasText(notes[rows.indexOf(next)])) {
          room += gap + reach(nextCode);
          break;
        }
        room += gap + nextCode;
      }
      if (height(note) - room > WIDE_AFTER) row.classList.add("annotated-wide");
    });
    // Then the flow, top to bottom.
    let coveredTo = -Infinity; // the page y down to which the notes above reach
    rows.forEach((row, i) => {
      const note = notes[i];
      if (!hasText(note)) return;
      if (row.classList.contains("annotated-wide")) {
        coveredTo = -Infinity;
        return;
      }
      // Moved down below the notes above, by what they still cover of this row.
      const top = note.getBoundingClientRect().top + window.scrollY;
      const moved = Math.max(0, coveredTo - top);
      note.style.marginTop = `${moved}px`;
      const noteBottom = top + moved + note.getBoundingClientRect().height;
      const code = codeOf(row).getBoundingClientRect();
      const codeBottom = code.top + window.scrollY + code.height;
      coveredTo = noteBottom + NOTE_GAP;
      if (noteBottom <= codeBottom) return;
      // First the row as tall as its code, so that the rows below are where they would be
      // beside a note that runs on; then how far it may run on: down to where the next note of
      // the part must start, at most DRIFT into its own code (across rows of code with no
      // note), or to a row read across the page. What lies beyond makes the row taller.
      note.style.marginBottom = `${codeBottom - noteBottom}px`;
      let limit = codeBottom;
      for (const next of rows.slice(i + 1)) {
        if (next.classList.contains("annotated-wide")) break;
        const nextNote = next.querySelector(":scope > .annotated-note");
        const nextCode = codeOf(next).getBoundingClientRect();
        const nextCodeTop = nextCode.top + window.scrollY;
        if (hasText(nextNote)) {
          // the next note starts NOTE_GAP below this one's end: still inside its own code
          limit = Math.max(limit, nextCodeTop + reach(nextCode.height) - NOTE_GAP);
          break;
        }
        limit = Math.max(limit, nextCodeTop + nextCode.height);
      }
      note.style.marginBottom = `${codeBottom - Math.min(noteBottom, limit)}px`;
    });
  };

  // The space between two rows: the padding above and below a row's content.
  const rowGap = (row) => {
    const style = getComputedStyle(row);
    return parseFloat(style.paddingTop) + parseFloat(style.paddingBottom);
  };

  const layout = () => {
    document.querySelectorAll(".annotated-source").forEach((container) => {
      flow(rowsOf(container));
      container.querySelectorAll(":scope > details.annotated-fold").forEach((fold) => {
        flow(rowsOf(fold));
      });
    });
  };

  // A target inside a closed fold: the fold opens, and the target is scrolled to.
  const openTarget = () => {
    const id = decodeURIComponent(location.hash.slice(1));
    const target = id && document.getElementById(id);
    if (!target) return;
    let opened = false;
    for (let fold = target.closest("details"); fold; fold = fold.parentElement.closest("details")) {
      if (!fold.open) {
        fold.open = true;
        opened = true;
      }
    }
    if (opened) {
      layout();
      target.scrollIntoView();
    }
  };

  const start = () => {
    openTarget();
    const ready = () => document.fonts.ready.then(layout);
    const mathjax = window.MathJax?.startup?.promise;
    if (mathjax) {
      window.MathJax.startup.promise = mathjax.then(ready);
    } else {
      ready();
    }
    let pending = 0;
    window.addEventListener("resize", () => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(layout);
    });
    window.addEventListener("hashchange", openTarget);
    document.querySelectorAll("details.annotated-fold").forEach((fold) => {
      fold.addEventListener("toggle", layout);
    });
  };

  if (document.readyState === "complete") {
    start();
  } else {
    window.addEventListener("load", start);
  }
})();
