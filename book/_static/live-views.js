// The book's live views on the site, with no kernel (mixers.live).
//
// A live view's notebook output carries, besides the widget, an HTML form:
// <div class="mixers-live"> holding the view's name and props as JSON (and a
// static picture in <noscript>). This loader hands each one to the same
// module Jupyter runs, views.js (served from the package by
// book/_ext/live_views.py), through anywidget's contract, render({model, el}),
// with a model that holds the JSON. views.js is fetched only by pages that
// have a view.
const outputs = document.querySelectorAll(".mixers-live");
if (outputs.length) {
  const { default: widget } = await import(
    new URL("./views.js", import.meta.url)
  );
  for (const output of outputs) {
    const data = JSON.parse(
      output.querySelector('script[type="application/json"]').textContent,
    );
    const model = {
      get: (key) => data[key],
      set: (key, value) => {
        data[key] = value;
      },
      on() {},
      off() {},
      save_changes() {},
    };
    widget.render({ model, el: output });
  }
}
