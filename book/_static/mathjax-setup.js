/* What the MathJax configuration that Sphinx writes (JSON, book/_ext/mathjax_parts.py) cannot
   say: two functions MathJax calls as it starts. Loaded before MathJax's startup.js.

   * ready: the hidden MathML for screen readers (a11y/assistive-mml) records its setting for
     MathJax's menu, which the site does not load; MathJax would warn of an unknown option.
   * pageReady: after MathJax has typeset the page, it typesets the maths inside code: the
     package's comments in the chapters' listings carry typeset formulas
     (book/_ext/listings.py), in spans of class "math" that MathJax's page-wide pass skips, as
     it skips all code. MathJax.startup.promise, which resolves when pageReady's does, then
     says that every formula of the page is done. */
(() => {
  const config = (window.MathJax = window.MathJax || {});
  config.startup = {
    ...config.startup,
    ready() {
      delete MathJax.config.options?.menuOptions;
      MathJax.startup.defaultReady();
    },
    pageReady() {
      return MathJax.startup.defaultPageReady().then(() => {
        const inCode = [...document.querySelectorAll("pre .math")];
        return inCode.length ? MathJax.typesetPromise(inCode) : undefined;
      });
    },
  };
})();
