// The book's live views: each computes what it shows in the reader's browser.
//
// One ES module serves three places. In Jupyter and on Colab it is the
// anywidget module of the widget mixers.live.live_view returns (its
// `render({model, el})` is anywidget's contract, and it could be handed to
// Jupyter Book 2's {anywidget} directive unchanged); on the built site,
// book/_ext/live_views.py serves it and a small loader,
// book/_static/live-views.js, hands it the same model, read from the page,
// with no kernel; under node, tests/js/views.test.mjs imports its
// formulas and checks them against fixtures exported by the package
// (mixers.live.fixtures). The package's Python is the reference: every
// formula here has its twin there, named beside it.
//
// A view receives `view` (its name) and `props` (a few kilobytes of JSON
// from the package: learned things as data, never pictures). Formulas
// (ALiBi slopes and biases, softmax with a temperature, the gate of a GLU
// unit) are computed here, at whatever setting the reader picks.

// ---------------------------------------------------------------------------
// Formulas, each the twin of the package function named in its comment.

// mixers.alibi.alibi_slopes: 2^(-8(i+1)/n) for n a power of two; otherwise
// the p slopes of the largest power of two p below n, then every other
// slope of the 2p series (the authors' rule) until there are n.
export function alibiSlopes(nHeads) {
  if (!Number.isInteger(nHeads) || nHeads < 1) {
    throw new RangeError(`nHeads must be a positive integer, got ${nHeads}`);
  }
  const geometric = (n) =>
    Array.from({ length: n }, (_, i) => 2 ** ((-8 * (i + 1)) / n));
  let p = 1;
  while (2 * p <= nHeads) p *= 2;
  const between = geometric(2 * p).filter((_, i) => i % 2 === 0);
  return [...geometric(p), ...between.slice(0, nHeads - p)];
}

// mixers.alibi.alibi_bias: with causal masking (the default), -m (i - j)
// where key j may be read by query i (j <= i), -Infinity where it may not;
// symmetric (for bidirectional attention), -m |i - j| everywhere.
// Row-major [L, L].
export function alibiBias(slope, length, { symmetric = false } = {}) {
  const bias = new Float64Array(length * length);
  for (let i = 0; i < length; i++) {
    for (let j = 0; j < length; j++) {
      bias[i * length + j] = symmetric
        ? -slope * Math.abs(i - j)
        : j <= i
          ? -slope * (i - j)
          : -Infinity;
    }
  }
  return bias;
}

// mixers.attention.masked_softmax over the last axis of a row-major
// [rows, cols] matrix of scores, multiplied by `scale` (1/(T sqrt(d)) for a
// temperature T). -Infinity scores (masked keys) get weight 0; a row with no
// key to read is all zeros, as in the package.
export function softmaxRows(scores, rows, cols, scale = 1) {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let max = -Infinity;
    for (let c = 0; c < cols; c++)
      max = Math.max(max, scores[r * cols + c] * scale);
    if (max === -Infinity) continue;
    let sum = 0;
    for (let c = 0; c < cols; c++) {
      const e = Math.exp(scores[r * cols + c] * scale - max);
      out[r * cols + c] = e;
      sum += e;
    }
    for (let c = 0; c < cols; c++) out[r * cols + c] /= sum;
  }
  return out;
}

// Mean entropy of the rows of a row-major weight matrix, in nats.
export function meanEntropy(weights, rows, cols) {
  let total = 0;
  for (let i = 0; i < rows * cols; i++) {
    const w = weights[i];
    if (w > 0) total -= w * Math.log(w);
  }
  return total / rows;
}

// erf, by W. J. Cody's rational approximations as in Numerical Recipes
// (erfc by a Chebyshev fit): relative error below 1.2e-7, enough for the
// exact-erf GELU of torch's nn.GELU() in float32.
export function erf(x) {
  const z = Math.abs(x);
  const t = 2 / (2 + z);
  const ty = 4 * t - 2;
  const c = [
    -1.3026537197817094, 6.4196979235649026e-1, 1.9476473204185836e-2,
    -9.561514786808631e-3, -9.46595344482036e-4, 3.66839497852761e-4,
    4.2523324806907e-5, -2.0278578112534e-5, -1.624290004647e-6,
    1.30365583558e-6, 1.5626441722e-8, -8.5238095915e-8, 6.529054439e-9,
    5.059343495e-9, -9.91364156e-10, -2.27365122e-10, 9.6467911e-11,
    2.394038e-12, -6.886027e-12, 8.94487e-13, 3.13092e-13, -1.12708e-13,
    3.81e-16, 7.106e-15, -1.523e-15, -9.4e-17, 1.21e-16, -2.8e-17,
  ];
  let d = 0;
  let dd = 0;
  for (let j = c.length - 1; j > 0; j--) {
    const tmp = d;
    d = ty * d - dd + c[j];
    dd = tmp;
  }
  const erfc = t * Math.exp(-z * z + 0.5 * (c[0] + ty * d) - dd);
  return x >= 0 ? 1 - erfc : erfc - 1;
}

const sigmoid = (z) => 1 / (1 + Math.exp(-z));

// mixers.feed_forward.ACTIVATIONS: the activation f of each variant.
export const ACTIVATIONS = {
  relu: (z) => Math.max(z, 0),
  gelu: (z) => 0.5 * z * (1 + erf(z / Math.SQRT2)), // the exact erf form
  swish: (z) => z * sigmoid(z), // Swish with beta = 1, also called SiLU
  silu: (z) => z * sigmoid(z),
  sigmoid,
  identity: (z) => z,
};

// What one hidden unit of a feed-forward variant outputs from its two
// pre-activations a = x·w1 and b = x·v: f(a)·b when gated, f(a) when not.
export function unitOutput(activation, gated, a, b) {
  const f = ACTIVATIONS[activation];
  if (!f) throw new RangeError(`unknown activation ${activation}`);
  return gated ? f(a) * b : f(a);
}

// mixers.gmlp.diagonal_means (causal): m_k, the mean of W[i, j] over the
// diagonal i - j = k, for k = 0 .. n-1. W row-major [n, n].
export function diagonalMeans(weight, n) {
  const sums = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) sums[i - j] += weight[i * n + j];
  }
  return Array.from(sums, (s, k) => s / (n - k));
}

// mixers.gmlp.toeplitz_score (causal): the share of the variance of W's
// lower triangle that its diagonal means explain, in [0, 1].
export function toeplitzScore(weight, n) {
  const means = diagonalMeans(weight, n);
  let count = 0;
  let mean = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      mean += weight[i * n + j];
      count++;
    }
  }
  mean /= count;
  let total = 0;
  let residual = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      const w = weight[i * n + j];
      total += (w - mean) ** 2;
      residual += (w - means[i - j]) ** 2;
    }
  }
  return total <= 0 ? 1 : 1 - residual / total;
}

// mixers.live.encode_lower: the lower triangle of an n x n matrix, row by
// row, as int8 multiples of scale/127 in base64. Back to row-major [n, n]
// (the masked upper triangle is 0).
export function decodeLower({ n, scale, data }) {
  const bytes = Uint8Array.from(atob(data), (ch) => ch.charCodeAt(0));
  const weight = new Float64Array(n * n);
  let at = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      const q = bytes[at++];
      weight[i * n + j] = ((q > 127 ? q - 256 : q) * scale) / 127;
    }
  }
  return weight;
}

// ---------------------------------------------------------------------------
// Drawing: SVG panels with axes, ticks, labels, legends and colour bars.

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 360; // a panel's viewBox; it scales to its column
const HEIGHT = 272;
const FRAME = { left: 56, right: 16, top: 30, bottom: 44 };
// The matplotlib colour cycle (C0, C1, ...), as the book's figures use it.
export const COLOURS = [
  "#1f77b4",
  "#ff7f0e",
  "#2ca02c",
  "#d62728",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#bcbd22",
  "#17becf",
];
const MAPS = {
  viridis: [
    "#440154",
    "#482475",
    "#414487",
    "#355f8d",
    "#2a788e",
    "#21918c",
    "#22a884",
    "#44bf70",
    "#7ad151",
    "#bddf26",
    "#fde725",
  ],
  diverging: [
    "#053061",
    "#2166ac",
    "#4393c3",
    "#92c5de",
    "#d1e5f0",
    "#f7f7f7",
    "#fddbc7",
    "#f4a582",
    "#d6604d",
    "#b2182b",
    "#67001f",
  ],
};

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function html(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function rgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

// The colour of t in [0, 1] on a map, interpolated between its stops (256
// steps, computed once per map).
const TABLES = {};
function colourAt(map, t) {
  if (!TABLES[map]) {
    const stops = MAPS[map].map(rgb);
    TABLES[map] = Array.from({ length: 256 }, (_, k) => {
      const x = (k / 255) * (stops.length - 1);
      const i = Math.min(Math.floor(x), stops.length - 2);
      return stops[i].map((v, c) =>
        Math.round(v + (stops[i + 1][c] - v) * (x - i)),
      );
    });
  }
  return TABLES[map][Math.round(Math.min(Math.max(t, 0), 1) * 255)];
}

// Round tick positions covering [lo, hi], about `count` of them.
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

export function format(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return String(Number(v.toPrecision(3)));
}

const scale = (d0, d1, r0, r1) => (v) =>
  r0 + ((v - d0) / (d1 - d0 || 1)) * (r1 - r0);

// A panel: an SVG with a title, described for screen readers by `label`.
function panel(parent, title, label) {
  const figure = html("figure", { class: "mx-panel" });
  const root = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": label,
  });
  root.append(svg("title", {}, label));
  root.append(svg("text", { x: WIDTH / 2, y: 16, class: "mx-title" }, title));
  figure.append(root);
  parent.append(figure);
  return root;
}

// Axes in a box: ticks and labels on x (bottom) and y (left).
function axes(
  root,
  box,
  x,
  y,
  xs,
  ys,
  { xlabel, ylabel, xticks, yticks, xformat = format },
) {
  const g = svg("g", { class: "mx-axes" });
  g.append(
    svg("rect", {
      x: box.x,
      y: box.y,
      width: box.w,
      height: box.h,
      class: "mx-frame",
    }),
  );
  for (const v of xticks ?? niceTicks(...xs)) {
    const px = x(v);
    g.append(
      svg("line", {
        x1: px,
        x2: px,
        y1: box.y + box.h,
        y2: box.y + box.h + 4,
      }),
    );
    g.append(
      svg(
        "text",
        { x: px, y: box.y + box.h + 15, class: "mx-tick" },
        xformat(v),
      ),
    );
  }
  for (const v of yticks ?? niceTicks(...ys)) {
    const py = y(v);
    g.append(svg("line", { x1: box.x - 4, x2: box.x, y1: py, y2: py }));
    g.append(
      svg(
        "text",
        { x: box.x - 6, y: py + 4, class: "mx-tick mx-right" },
        format(v),
      ),
    );
  }
  if (xlabel) {
    g.append(
      svg(
        "text",
        { x: box.x + box.w / 2, y: box.y + box.h + 32, class: "mx-label" },
        xlabel,
      ),
    );
  }
  if (ylabel) {
    // clear of the widest tick label
    const widest = Math.max(
      0,
      ...(yticks ?? niceTicks(...ys)).map((v) => format(v).length),
    );
    // (at x >= 11: the rotated glyphs reach about 10 px left of it)
    const left = Math.max(11, box.x - Math.max(30, 14 + 6.4 * widest));
    const at = `translate(${left}, ${box.y + box.h / 2}) rotate(-90)`;
    g.append(svg("text", { transform: at, class: "mx-label" }, ylabel));
  }
  root.append(g);
}

// Axes for an n x n matrix drawn in box: cells, not points, so each tick sits
// at the middle of its row or column.
function matrixAxes(root, box, n, xlabel, ylabel) {
  const cx = scale(0, n, box.x, box.x + box.w);
  const cy = scale(0, n, box.y, box.y + box.h);
  const ticks = niceTicks(0, n - 1, 4).filter(Number.isInteger);
  axes(
    root,
    box,
    (v) => cx(v + 0.5),
    (v) => cy(v + 0.5),
    [0, n - 1],
    [0, n - 1],
    { xlabel, ylabel, xticks: ticks, yticks: ticks },
  );
}

// The plotting box of a panel `width` wide, inside its margins.
const plotBox = (width = WIDTH) => ({
  x: FRAME.left,
  y: FRAME.top,
  w: width - FRAME.left - FRAME.right,
  h: HEIGHT - FRAME.top - FRAME.bottom,
});

// A matrix as an image: `value(i, j)` -> a number, or NaN for a cell left
// blank (masked). Drawn through a canvas of at most 400 x 400 pixels; where
// a pixel covers several cells it shows the one farthest from 0, so that a
// narrow band (the weights of a steep head at L = 1,024) stays visible.
function image(root, box, rows, cols, value, map, lo, hi) {
  const [w, h] = [Math.min(cols, 400), Math.min(rows, 400)];
  const canvas = document.createElement("canvas");
  canvas.width = w;
  canvas.height = h;
  const context = canvas.getContext("2d");
  const pixels = context.createImageData(w, h);
  const cell = (py, px) => {
    let best = NaN;
    for (let i = Math.floor((py * rows) / h); i < ((py + 1) * rows) / h; i++) {
      for (
        let j = Math.floor((px * cols) / w);
        j < ((px + 1) * cols) / w;
        j++
      ) {
        const v = value(i, j);
        if (Number.isFinite(v) && !(Math.abs(v) <= Math.abs(best))) best = v;
      }
    }
    return best;
  };
  for (let py = 0; py < h; py++) {
    for (let px = 0; px < w; px++) {
      const v = cell(py, px);
      const at = 4 * (py * w + px);
      const [r, g, b] = Number.isFinite(v)
        ? colourAt(map, (v - lo) / (hi - lo || 1))
        : [255, 255, 255];
      pixels.data.set([r, g, b, 255], at);
    }
  }
  context.putImageData(pixels, 0, 0);
  root.append(
    svg("image", {
      x: box.x,
      y: box.y,
      width: box.w,
      height: box.h,
      href: canvas.toDataURL(),
      preserveAspectRatio: "none",
      class: "mx-pixels",
    }),
  );
}

// A vertical colour bar beside a box, from lo to hi.
function colourBar(root, box, map, lo, hi, label) {
  const id = `mx-bar-${Math.random().toString(36).slice(2)}`;
  const gradient = svg("linearGradient", { id, x1: 0, y1: 1, x2: 0, y2: 0 });
  MAPS[map].forEach((c, i, all) => {
    gradient.append(
      svg("stop", { offset: i / (all.length - 1), "stop-color": c }),
    );
  });
  const defs = svg("defs");
  defs.append(gradient);
  root.append(defs);
  const bar = { x: box.x + box.w + 10, y: box.y, w: 10, h: box.h };
  root.append(
    svg("rect", {
      ...xywh(bar),
      fill: `url(#${id})`,
      class: "mx-frame-solid",
    }),
  );
  const y = scale(lo, hi, bar.y + bar.h, bar.y);
  for (const v of niceTicks(lo, hi, 4)) {
    root.append(
      svg(
        "text",
        { x: bar.x + bar.w + 3, y: y(v) + 4, class: "mx-tick mx-left" },
        format(v),
      ),
    );
  }
  if (label) {
    const at =
      `translate(${bar.x + bar.w + 40}, ${bar.y + bar.h / 2}) ` + `rotate(90)`;
    root.append(svg("text", { transform: at, class: "mx-label" }, label));
  }
}

const xywh = (b) => ({ x: b.x, y: b.y, width: b.w, height: b.h });

// Lines through points: [{points: [[x, y], ...], colour, dash, width, label}].
function lines(root, x, y, series) {
  for (const s of series) {
    const d = s.points
      .map(
        ([a, b], i) => `${i ? "L" : "M"}${x(a).toFixed(1)},${y(b).toFixed(1)}`,
      )
      .join("");
    root.append(
      svg("path", {
        d,
        fill: "none",
        stroke: s.colour,
        "stroke-width": s.width ?? 1.8,
        "stroke-dasharray": s.dash ?? "",
        "stroke-opacity": s.opacity ?? 1,
      }),
    );
  }
}

// A thin dashed vertical line from 0 to `top` at x = v: the chosen setting.
const chosenAt = (v, top) => ({
  points: [
    [v, 0],
    [v, top],
  ],
  colour: "#333",
  dash: "3 3",
  width: 1,
});

// A legend in the top-right (or another) corner of a box.
function legend(root, box, entries, corner = "top-right") {
  const g = svg("g", { class: "mx-legend" });
  const width =
    12 + 6.2 * Math.max(...entries.map((e) => e.label.length)) + 22;
  const x0 = corner.endsWith("right") ? box.x + box.w - width - 4 : box.x + 4;
  const y0 = corner.startsWith("top")
    ? box.y + 4
    : box.y + box.h - 4 - 15 * entries.length - 4;
  g.append(
    svg("rect", {
      x: x0,
      y: y0,
      width,
      height: 15 * entries.length + 4,
      class: "mx-legend-box",
    }),
  );
  entries.forEach((e, i) => {
    const yy = y0 + 11 + 15 * i;
    g.append(
      svg("line", {
        x1: x0 + 5,
        x2: x0 + 25,
        y1: yy,
        y2: yy,
        stroke: e.colour,
        "stroke-width": 2,
        "stroke-dasharray": e.dash ?? "",
      }),
    );
    g.append(
      svg(
        "text",
        { x: x0 + 30, y: yy + 4, class: "mx-tick mx-left" },
        e.label,
      ),
    );
  });
  root.append(g);
}

// ---------------------------------------------------------------------------
// Controls: a visible name, an accessible label, keyboard and touch.

let ids = 0;

// A slider's readout: an integer as it is (1024, not 1.02e3), else 3 digits.
const exact = (v) => (Number.isInteger(v) ? String(v) : format(v));

// A range input with its name and its value shown beside it.
function slider(
  parent,
  name,
  { min, max, step = 1, value, show = exact },
  onInput,
) {
  const id = `mx-control-${++ids}`;
  const row = html("div", { class: "mx-control" });
  row.append(html("label", { for: id }, name));
  const input = html("input", { type: "range", id, min, max, step, value });
  const readout = html("output", { for: id }, show(Number(value)));
  input.addEventListener("input", () => {
    readout.textContent = show(Number(input.value));
    onInput(Number(input.value));
  });
  row.append(input, readout);
  parent.append(row);
  return {
    input,
    setMax(m) {
      input.max = m;
      if (Number(input.value) > m) input.value = m;
      readout.textContent = show(Number(input.value));
    },
  };
}

// One choice among a few options: radio buttons drawn as a row of buttons
// (arrow keys move between them; the chosen one is filled).
function choice(parent, name, options, value, onChange, label = String) {
  const group = `mx-choice-${++ids}`;
  const set = html("fieldset", { class: "mx-control mx-choice" });
  set.append(html("legend", {}, name));
  for (const option of options) {
    const id = `${group}-${set.childElementCount}`;
    const input = html("input", {
      type: "radio",
      name: group,
      id,
      value: String(option),
    });
    input.checked = option === value;
    input.addEventListener("change", () => input.checked && onChange(option));
    set.append(input, html("label", { for: id }, label(option)));
  }
  parent.append(set);
  return set;
}

// ---------------------------------------------------------------------------
// The views. Each takes (el, props) and returns nothing; it draws into
// el.figures and redraws on every control move.

function layout(el, caption) {
  const controls = html("div", { class: "mx-controls" });
  const figures = html("div", { class: "mx-figures" });
  const text = html("p", { class: "mx-caption", "aria-live": "polite" });
  el.append(controls, figures, text);
  return {
    controls,
    draw(paint) {
      figures.replaceChildren();
      text.textContent = paint(figures) ?? caption;
    },
  };
}

// 2 to a power, the power as superscript characters (2⁻⁰·⁵).
const SUPERSCRIPT = {
  "-": "⁻",
  ".": "·",
  0: "⁰",
  1: "¹",
  2: "²",
  3: "³",
  4: "⁴",
  5: "⁵",
  6: "⁶",
  7: "⁷",
  8: "⁸",
  9: "⁹",
};
const powerOf2 = (p) =>
  `2${[...format(p)].map((c) => SUPERSCRIPT[c] ?? c).join("")}`;
const powerOfTwo = (m) => powerOf2(Math.log2(m));

// ALiBi: any head count 1..64, any head, any length up to 1,024. Left: the
// chosen head's causal bias matrix (or the attention weights it alone would
// give); right: the bias along a row, with the head's span ln(10)/m, and
// every head's slope.
function alibiView(el, props) {
  const state = {
    heads: props.heads ?? 8,
    head: 0,
    length: props.length ?? 32,
    show: "bias",
    mask: "causal",
  };
  const view = layout(el);
  slider(
    view.controls,
    "heads",
    { min: 1, max: 64, value: state.heads },
    (v) => {
      state.heads = v;
      head.setMax(v - 1);
      state.head = Number(head.input.value);
      redraw();
    },
  );
  const head = slider(
    view.controls,
    "head",
    { min: 0, max: state.heads - 1, value: 0 },
    (v) => {
      state.head = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "length",
    { min: 4, max: 1024, value: state.length },
    (v) => {
      state.length = v;
      redraw();
    },
  );
  choice(
    view.controls,
    "colour shows",
    ["bias", "weight"],
    state.show,
    (v) => {
      state.show = v;
      redraw();
    },
    (v) => (v === "bias" ? "the bias" : "softmax of the bias"),
  );
  choice(
    view.controls,
    "attention",
    ["causal", "bidirectional"],
    state.mask,
    (v) => {
      state.mask = v;
      redraw();
    },
  );
  const redraw = () =>
    view.draw((figures) => {
      const slopes = alibiSlopes(state.heads);
      const m = slopes[state.head];
      const L = state.length;
      const span = Math.log(10) / m;
      const symmetric = state.mask === "bidirectional";
      const bias = alibiBias(m, L, { symmetric });
      const weight = state.show === "weight" ? softmaxRows(bias, L, L) : null;
      const values = weight ?? bias;
      // matrix
      const left = panel(
        figures,
        `head ${state.head} of ${state.heads}: m = ${powerOfTwo(m)}`,
        (weight
          ? "The attention weights from the ALiBi bias alone"
          : "The ALiBi bias") +
          ` of head ${state.head} of ${state.heads} over ${L} positions:` +
          " rows are queries, columns keys, " +
          (symmetric ? "-m|i - j| both ways." : "the upper triangle masked."),
      );
      const box = { x: FRAME.left, y: FRAME.top, w: 202, h: 202 };
      const lo = weight ? 0 : -m * (L - 1);
      const hi = weight ? 1 : 0;
      image(
        left,
        box,
        L,
        L,
        (i, j) => (symmetric || j <= i ? values[i * L + j] : NaN),
        "viridis",
        lo,
        hi,
      );
      matrixAxes(left, box, L, "key j", "query i");
      colourBar(left, box, "viridis", lo, hi, weight ? "weight" : "bias");
      // profile along a row, and every head's slope
      const right = panel(
        figures,
        "the bias along a row",
        `The bias -m(i - j) against the distance i - j for head ` +
          `${state.head}: it falls to -ln 10 (a tenth of the weight) after ` +
          `${format(span)} tokens; the matrix covers distances up to ` +
          `${L - 1}.`,
      );
      const pbox = {
        x: FRAME.left,
        y: FRAME.top,
        w: WIDTH - FRAME.left - FRAME.right,
        h: 172,
      };
      const far = Math.max(L, 1.2 * span);
      const x = scale(0, far, pbox.x, pbox.x + pbox.w);
      const ylo = -m * far;
      const y = scale(ylo, 0, pbox.y + pbox.h, pbox.y);
      right.append(
        svg("rect", {
          x: x(0),
          y: pbox.y,
          width: x(L - 1) - x(0),
          height: pbox.h,
          class: "mx-shade",
        }),
      );
      axes(right, pbox, x, y, [0, far], [ylo, 0], {
        xlabel: "distance i - j",
        ylabel: "bias",
      });
      lines(right, x, y, [
        {
          points: [
            [0, 0],
            [far, -m * far],
          ],
          colour: COLOURS[0],
        },
        {
          points: [
            [0, -Math.log(10)],
            [far, -Math.log(10)],
          ],
          colour: "#7f7f7f",
          dash: "2 3",
          width: 1.2,
        },
        {
          points: [
            [span, ylo],
            [span, 0],
          ],
          colour: COLOURS[3],
          dash: "6 4",
          width: 1.5,
        },
      ]);
      legend(
        right,
        pbox,
        [
          { label: "-m (i - j)", colour: COLOURS[0] },
          { label: `span ${format(span)}`, colour: COLOURS[3], dash: "6 4" },
          { label: "-ln 10", colour: "#7f7f7f", dash: "2 3" },
        ],
        "bottom-left",
      );
      slopeStrip(right, slopes, state.head, pbox.y + pbox.h + 48);
      return (
        `${state.heads} heads: slopes ` +
        slopes.slice(0, 6).map(powerOfTwo).join(", ") +
        (slopes.length > 6 ? ", …" : "") +
        `; head ${state.head} loses a factor of 10 after ${format(span)}` +
        " tokens."
      );
    });
  redraw();
}

// Every head's slope as a tick on a log2 axis from 2^-8 to 2^0, the chosen
// head's filled.
function slopeStrip(root, slopes, chosen, y0) {
  const x = scale(-8, 0, FRAME.left, WIDTH - FRAME.right);
  root.append(
    svg("line", { x1: x(-8), x2: x(0), y1: y0, y2: y0, class: "mx-rule" }),
  );
  for (const v of [-8, -6, -4, -2, 0]) {
    root.append(
      svg("text", { x: x(v), y: y0 + 16, class: "mx-tick" }, powerOf2(v)),
    );
  }
  root.append(
    svg(
      "text",
      { x: FRAME.left - 6, y: y0 + 4, class: "mx-tick mx-right" },
      "slopes",
    ),
  );
  slopes.forEach((m, h) => {
    root.append(
      svg("circle", {
        cx: x(Math.log2(m)),
        cy: y0,
        r: h === chosen ? 4.5 : 3,
        class: h === chosen ? "mx-dot-chosen" : "mx-dot",
      }),
    );
  });
}

// Softmax with a temperature: the attention weights of one head of a layer
// whose raw scores q·k travel as data; T divides the scores after the usual
// 1/sqrt(d_head). Right: every head's mean entropy against T.
function softmaxView(el, props) {
  const { tokens, scores, d_head: dHead } = props;
  const n = tokens.length;
  const state = {
    head: 0,
    log2T: 0,
    mask: "none",
    scaled: true,
    show: "weights",
  };
  const view = layout(el);
  choice(
    view.controls,
    "head",
    scores.map((_, h) => h),
    0,
    (v) => {
      state.head = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "temperature T",
    { min: -3, max: 3, step: 0.05, value: 0, show: (v) => format(2 ** v) },
    (v) => {
      state.log2T = v;
      redraw();
    },
  );
  choice(view.controls, "mask", ["none", "causal"], "none", (v) => {
    state.mask = v;
    redraw();
  });
  choice(view.controls, "scale", ["1/√d", "none"], "1/√d", (v) => {
    state.scaled = v !== "none";
    redraw();
  });
  choice(view.controls, "show", ["weights", "scores"], "weights", (v) => {
    state.show = v;
    redraw();
  });
  // The softmax's input: q·k / (T·sqrt(d)), -Infinity where masked.
  const logitsOf = (h, T) => {
    const factor = 1 / (T * (state.scaled ? Math.sqrt(dHead) : 1));
    const s = Float64Array.from(scores[h].flat(), (v) => v * factor);
    if (state.mask === "causal") {
      for (let i = 0; i < n; i++)
        for (let j = i + 1; j < n; j++) s[i * n + j] = -Infinity;
    }
    return s;
  };
  const weightsOf = (h, T) => softmaxRows(logitsOf(h, T), n, n);
  const redraw = () =>
    view.draw((figures) => {
      const T = 2 ** state.log2T;
      const w = weightsOf(state.head, T);
      const entropy = meanEntropy(w, n, n);
      const left = panel(
        figures,
        `head ${state.head}, T = ${format(T)}: entropy ` +
          `${entropy.toFixed(2)} nats`,
        `Attention weights of head ${state.head} over '${tokens.join(" ")}' ` +
          `at temperature ${format(T)}: rows are queries, columns keys.`,
      );
      const box = { x: 62, y: FRAME.top + 4, w: 192, h: 192 };
      const logits = logitsOf(state.head, T);
      const top = Math.max(...logits.filter(Number.isFinite).map(Math.abs));
      const [shown, map, lo, hi, label] =
        state.show === "weights"
          ? [w, "viridis", 0, 1, "attention weight"]
          : [logits, "diverging", -top, top, "score q·k / (T√d)"];
      image(left, box, n, n, (i, j) => shown[i * n + j], map, lo, hi);
      left.append(svg("rect", { ...xywh(box), class: "mx-frame" }));
      tokens.forEach((t, i) => {
        const c = box.x + ((i + 0.5) * box.w) / n;
        const r = box.y + ((i + 0.5) * box.h) / n;
        left.append(
          svg(
            "text",
            { x: box.x - 5, y: r + 4, class: "mx-tick mx-right" },
            t,
          ),
        );
        left.append(
          svg(
            "text",
            {
              transform:
                `translate(${c + 4}, ${box.y + box.h + 6}) ` + `rotate(-90)`,
              class: "mx-tick mx-right",
            },
            t,
          ),
        );
      });
      colourBar(left, box, map, lo, hi, label);
      const right = panel(
        figures,
        "mean entropy of each head against T",
        `The mean entropy of each head's attention rows against the ` +
          `temperature, from ${format(2 ** -3)} to 8; the chosen ` +
          `temperature is marked. At most ln ${n} = ` +
          `${Math.log(n).toFixed(2)} nats.`,
      );
      const pbox = plotBox();
      const x = scale(-3, 3, pbox.x, pbox.x + pbox.w);
      const y = scale(0, Math.log(n) * 1.05, pbox.y + pbox.h, pbox.y);
      axes(right, pbox, x, y, [-3, 3], [0, Math.log(n)], {
        xlabel: "temperature T (log scale)",
        ylabel: "entropy (nats)",
        xticks: [-3, -2, -1, 0, 1, 2, 3],
        xformat: (v) => format(2 ** v),
      });
      const grid = Array.from({ length: 61 }, (_, i) => -3 + i / 10);
      lines(
        right,
        x,
        y,
        scores.map((_, h) => ({
          points: grid.map((g) => [
            g,
            meanEntropy(weightsOf(h, 2 ** g), n, n),
          ]),
          colour: COLOURS[h % 10],
          width: h === state.head ? 2.6 : 1.4,
          opacity: h === state.head ? 1 : 0.6,
        })),
      );
      lines(right, x, y, [chosenAt(state.log2T, Math.log(n))]);
      legend(
        right,
        pbox,
        scores.map((_, h) => ({
          label: `head ${h}`,
          colour: COLOURS[h % 10],
        })),
        "bottom-right",
      );
      return undefined;
    });
  redraw();
}

// A GLU variant's unit: f(z) on [-range, range], and f(a)·b (or f(a)) over
// the square [-range, range]², on a diverging map centred on 0.
function gluView(el, props) {
  const { variants } = props;
  const state = {
    variant: props.variant ?? Object.keys(variants)[0],
    extent: 3,
    b: 1,
    other: "none",
  };
  const view = layout(el);
  choice(
    view.controls,
    "variant",
    Object.keys(variants),
    state.variant,
    (v) => {
      state.variant = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "range",
    { min: 0.5, max: 10, step: 0.5, value: state.extent },
    (v) => {
      state.extent = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "linear branch b (left)",
    { min: -3, max: 3, step: 0.1, value: 1 },
    (v) => {
      state.b = v;
      redraw();
    },
  );
  list(
    view.controls,
    "compare with",
    ["none", ...Object.keys(variants)],
    "none",
    (v) => {
      state.other = v;
      redraw();
    },
  );
  const redraw = () =>
    view.draw((figures) => {
      const {
        activation,
        gated,
        d_ff: dFF,
        parameters,
      } = variants[state.variant];
      const e = state.extent;
      const zs = Array.from({ length: 201 }, (_, i) => -e + (2 * e * i) / 200);
      const left = panel(
        figures,
        gated
          ? `f = ${activation}: f(a)·b at b = ${format(state.b)}`
          : `f = ${activation}`,
        `The activation ${activation} on [-${e}, ${e}]` +
          (gated
            ? `, and the gated output f(a)·b at b = ${format(state.b)}.`
            : "."),
      );
      const box = plotBox();
      const curves = [
        {
          points: zs.map((z) => [z, ACTIVATIONS[activation](z)]),
          colour: COLOURS[0],
          label: "f(a)",
        },
      ];
      if (gated)
        curves.push({
          points: zs.map((z) => [z, unitOutput(activation, true, z, state.b)]),
          colour: COLOURS[1],
          dash: "6 3",
          label: `f(a)·${state.b < 0 ? `(${state.b})` : state.b}`,
        });
      if (state.other !== "none") {
        const other = variants[state.other];
        curves.push({
          points: zs.map((z) => [
            z,
            unitOutput(other.activation, other.gated, z, state.b),
          ]),
          colour: COLOURS[2],
          dash: "2 2",
          label: state.other + (other.gated ? `, b = ${format(state.b)}` : ""),
        });
      }
      const ys = curves.flatMap((c) => c.points.map((p) => p[1]));
      let [lo, hi] = [Math.min(0, ...ys), Math.max(0, ...ys)];
      if (hi - lo < 1e-9) hi = lo + 1;
      const x = scale(-e, e, box.x, box.x + box.w);
      const y = scale(lo, hi, box.y + box.h, box.y);
      axes(left, box, x, y, [-e, e], [lo, hi], {
        xlabel: "a = x·w1",
        ylabel: "output",
      });
      lines(left, x, y, [
        {
          points: [
            [-e, 0],
            [e, 0],
          ],
          colour: "#000",
          width: 0.6,
        },
        {
          points: [
            [0, lo],
            [0, hi],
          ],
          colour: "#000",
          width: 0.6,
        },
        ...curves,
      ]);
      legend(left, box, curves, "top-left");
      const right = panel(
        figures,
        gated ? "f(a)·b: gated" : "f(a): b is not used",
        `What one hidden unit of ${state.variant} outputs over its two ` +
          `pre-activations a and b in [-${e}, ${e}]: ` +
          (gated
            ? "f(a) times b, so its sign follows b."
            : "f(a), whatever b is."),
      );
      const sbox = { x: FRAME.left, y: FRAME.top, w: 202, h: 202 };
      const cells = 120;
      const at = (k) => -e + (2 * e * (k + 0.5)) / cells;
      let vmax = 0;
      for (let i = 0; i < cells; i++)
        for (let j = 0; j < cells; j++)
          vmax = Math.max(
            vmax,
            Math.abs(unitOutput(activation, gated, at(j), at(cells - 1 - i))),
          );
      vmax = vmax || 1;
      image(
        right,
        sbox,
        cells,
        cells,
        (i, j) => unitOutput(activation, gated, at(j), at(cells - 1 - i)),
        "diverging",
        -vmax,
        vmax,
      );
      const sx = scale(-e, e, sbox.x, sbox.x + sbox.w);
      const sy = scale(-e, e, sbox.y + sbox.h, sbox.y);
      axes(right, sbox, sx, sy, [-e, e], [-e, e], {
        xlabel: "a = x·w1",
        ylabel: "b = x·v",
        xticks: niceTicks(-e, e, 4),
        yticks: niceTicks(-e, e, 4),
      });
      colourBar(right, sbox, "diverging", -vmax, vmax, "unit output");
      return (
        `${state.variant}: ${gated ? "gated" : "ungated"}, d_ff = ` +
        `${dFF} at d_model 768, ${parameters.toLocaleString("en")} ` +
        `parameters.`
      );
    });
  redraw();
}

// What the gMLP view's matrix can show.
const PARTS = {
  W: "The learned spatial weights W",
  T: "The Toeplitz part T of W (each diagonal's mean)",
  "W - T": "What the Toeplitz part of W leaves out, W - T,",
};

// gMLP's learned spatial weights W (data: int8 per matrix), by model, layer
// and training step, or its Toeplitz part T, or what T leaves out; right:
// the mean of each diagonal against the offset, and how Toeplitz W is.
function gmlpView(el, props) {
  const { models, layers, steps, weights } = props;
  const state = {
    model: models[0],
    layer: 0,
    step: steps.length - 1,
    maxOffset: props.max_offset ?? 24,
    part: "W",
    shared: false,
  };
  const n = weights[models[0]][0][0].n;
  const view = layout(el);
  choice(view.controls, "model", models, state.model, (v) => {
    state.model = v;
    redraw();
  });
  choice(
    view.controls,
    "layer",
    Array.from({ length: layers }, (_, i) => i),
    0,
    (v) => {
      state.layer = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "step",
    {
      min: 0,
      max: steps.length - 1,
      value: state.step,
      show: (v) => String(steps[v]),
    },
    (v) => {
      state.step = v;
      redraw();
    },
  );
  slider(
    view.controls,
    "offsets shown",
    { min: 4, max: n - 1, value: state.maxOffset },
    (v) => {
      state.maxOffset = v;
      redraw();
    },
  );
  choice(view.controls, "matrix", Object.keys(PARTS), "W", (v) => {
    state.part = v;
    redraw();
  });
  choice(
    view.controls,
    "colour scale",
    ["this step", "all steps"],
    "this step",
    (v) => {
      state.shared = v === "all steps";
      redraw();
    },
  );
  // The matrix shown (W, T or W - T) of one saved step, row-major [n, n].
  const part = (step) => {
    const w = decodeLower(weights[state.model][step][state.layer]);
    // W = T + (W - T): T, its Toeplitz part, holds each diagonal's mean
    const diagonal = diagonalMeans(w, n);
    return w.map((v, at) => {
      const toeplitz = diagonal[Math.floor(at / n) - (at % n)] ?? 0;
      return { W: v, T: toeplitz, "W - T": v - toeplitz }[state.part];
    });
  };
  const largest = (m) => Math.max(...m.map(Math.abs));
  const redraw = () =>
    view.draw((figures) => {
      const w = decodeLower(weights[state.model][state.step][state.layer]);
      const step = steps[state.step];
      const shown = part(state.step);
      // one scale for every step shows W grow over training
      const vmax =
        (state.shared
          ? Math.max(...steps.map((_, k) => largest(part(k))))
          : largest(shown)) || 1;
      const left = panel(
        figures,
        `${state.part}: ${state.model}, layer ${state.layer}, step ${step}`,
        `${PARTS[state.part]} of ${state.model}, layer ${state.layer}, at` +
          ` step ${step}: row i mixes positions j ≤ i.`,
      );
      const box = { x: FRAME.left, y: FRAME.top, w: 202, h: 202 };
      image(
        left,
        box,
        n,
        n,
        (i, j) => (j <= i ? shown[i * n + j] : NaN),
        "diverging",
        -vmax,
        vmax,
      );
      matrixAxes(left, box, n, "position j", "position i");
      const what = state.part === "W" ? "W[i, j]" : state.part;
      colourBar(left, box, "diverging", -vmax, vmax, what);
      const means = diagonalMeans(w, n).slice(0, state.maxOffset + 1);
      const right = panel(
        figures,
        `Toeplitz score ${toeplitzScore(w, n).toFixed(2)}`,
        `The mean of each diagonal of W against the offset i - j, offsets 0 ` +
          `to ${state.maxOffset}.`,
      );
      const pbox = plotBox();
      let [lo, hi] = [Math.min(0, ...means), Math.max(0, ...means)];
      if (hi - lo < 1e-12) hi = lo + 1;
      const x = scale(0, state.maxOffset, pbox.x, pbox.x + pbox.w);
      const y = scale(lo, hi, pbox.y + pbox.h, pbox.y);
      axes(right, pbox, x, y, [0, state.maxOffset], [lo, hi], {
        xlabel: "offset i - j",
        ylabel: "mean of the diagonal",
      });
      lines(right, x, y, [
        {
          points: [
            [0, 0],
            [state.maxOffset, 0],
          ],
          colour: "#000",
          width: 0.6,
        },
        { points: means.map((v, k) => [k, v]), colour: COLOURS[0] },
      ]);
      for (const [k, v] of means.entries())
        right.append(
          svg("circle", { cx: x(k), cy: y(v), r: 2.2, fill: COLOURS[0] }),
        );
      return undefined;
    });
  redraw();
}

// A drop-down list with its name.
function list(parent, name, options, value, onChange) {
  const id = `mx-control-${++ids}`;
  const row = html("div", { class: "mx-control" });
  row.append(html("label", { for: id }, name));
  const select = html("select", { id });
  for (const option of options) {
    const item = html("option", { value: option }, option);
    item.selected = option === value;
    select.append(item);
  }
  select.addEventListener("change", () => onChange(select.value));
  row.append(select);
  parent.append(row);
  return select;
}

// Loss against step for the reference pair (at its best learning rate) and
// one chosen pair at any of its learning rates, one line per seed.
function curvesView(el, props) {
  const { reference, pairs } = props;
  const names = Object.keys(pairs);
  const bestIndex = (p) => pairs[p].lrs.indexOf(pairs[p].best_lr);
  const state = {
    pair: props.pair ?? names[0],
    rate: 0,
    loss: "val",
    mean: false,
    reference: true,
  };
  state.rate = bestIndex(state.pair);
  const view = layout(el);
  const rateLabel = (k) => {
    const lr = pairs[state.pair].lrs[k];
    return lr === undefined
      ? ""
      : `${format(lr)}${lr === pairs[state.pair].best_lr ? " (best)" : ""}`;
  };
  list(view.controls, "pair", names, state.pair, (v) => {
    state.pair = v;
    state.rate = bestIndex(v);
    rate.setMax(pairs[v].lrs.length - 1);
    rate.input.value = state.rate;
    rate.input.dispatchEvent(new Event("input"));
  });
  const rate = slider(
    view.controls,
    "learning rate",
    {
      min: 0,
      max: pairs[state.pair].lrs.length - 1,
      value: state.rate,
      show: rateLabel,
    },
    (v) => {
      state.rate = v;
      redraw();
    },
  );
  choice(
    view.controls,
    "loss",
    ["val", "train"],
    "val",
    (v) => {
      state.loss = v;
      redraw();
    },
    (v) => (v === "val" ? "validation" : "training"),
  );
  choice(view.controls, "seeds", ["each", "mean"], "each", (v) => {
    state.mean = v === "mean";
    redraw();
  });
  choice(view.controls, "reference", ["shown", "hidden"], "shown", (v) => {
    state.reference = v === "shown";
    redraw();
  });
  // One line per seed, or their mean at each step (the seeds share steps).
  const linesOf = (p, rs) => {
    const kept = rs.filter((r) => !r.diverged);
    if (!state.mean || !kept.length) return kept.map((r) => [p, r, r.seed]);
    const mean = kept[0].steps.map(
      (_, i) =>
        kept.reduce((sum, r) => sum + r[state.loss][i], 0) / kept.length,
    );
    return [[p, { steps: kept[0].steps, [state.loss]: mean }, "mean"]];
  };
  const redraw = () =>
    view.draw((figures) => {
      const lr = pairs[state.pair].lrs[state.rate];
      const chosen = (p, rateOf) =>
        pairs[p].runs.filter((r) => r.lr === rateOf);
      const shown = [];
      if (state.reference)
        shown.push([reference, chosen(reference, pairs[reference].best_lr)]);
      const same = state.pair === reference && lr === pairs[reference].best_lr;
      if (!same || !state.reference)
        shown.push([state.pair, chosen(state.pair, lr)]);
      const what = state.loss === "val" ? "validation" : "training";
      const root = panel(
        figures,
        `${state.pair} at ${format(lr)}, reference at its best`,
        `${what} loss against step of ${state.pair} at learning rate ` +
          `${format(lr)}, one line per seed, with the reference pair ` +
          `${reference} at its best rate.`,
      );
      // Wide where the column is (a desktop), a standard panel on a phone.
      const width = el.clientWidth >= 560 ? WIDTH * 1.6 : WIDTH;
      root.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
      root.querySelector(".mx-title").setAttribute("x", width / 2);
      const box = plotBox(width);
      const runs = shown.flatMap(([p, rs]) => linesOf(p, rs));
      const all = runs.flatMap(([, r]) =>
        r[state.loss].filter(Number.isFinite),
      );
      const last = Math.max(...runs.flatMap(([, r]) => r.steps));
      const [lo, hi] = [
        Math.min(...all),
        Math.min(Math.max(...all), Math.min(...all) + 1.5),
      ];
      const x = scale(0, last, box.x, box.x + box.w);
      const y = scale(lo, hi, box.y + box.h, box.y);
      axes(root, box, x, y, [0, last], [lo, hi], {
        xlabel: "step",
        ylabel: `${what} loss (nats)`,
      });
      const clip = `mx-clip-${++ids}`;
      const defs = svg("defs");
      const path = svg("clipPath", { id: clip });
      path.append(svg("rect", xywh(box)));
      defs.append(path);
      root.append(defs);
      const plot = svg("g", { "clip-path": `url(#${clip})` });
      root.append(plot);
      const entries = runs.map(([p, r, seed]) => ({
        points: r.steps
          .map((t, i) => [t, r[state.loss][i]])
          .filter(([, v]) => Number.isFinite(v)),
        colour: COLOURS[p === reference ? 0 : 1],
        dash: seed === "mean" ? "" : ["", "6 3", "2 2"][seed % 3],
        label:
          seed === "mean" ? `${p}, mean of the seeds` : `${p} seed ${seed}`,
      }));
      lines(plot, x, y, entries);
      legend(root, box, entries, "top-right");
      const diverged = shown.flatMap(([p, rs]) =>
        rs.filter((r) => r.diverged).map((r) => `${p} seed ${r.seed}`),
      );
      return diverged.length
        ? `Diverged, so not drawn: ${diverged.join(", ")}.`
        : undefined;
    });
  redraw();
  figuresWide(el);
}

// Why attention divides by sqrt(d_k): one query against n keys whose entries
// are independent with variance 1. Given the query, each score q·k is |q|·z
// with z standard normal, and |q|² is a sum of d_k squares: the scores are
// drawn that way (exactly their distribution). Left: one draw's weights;
// right: the mean entropy of a row against d_k, scaled and not (200 draws).
export function gaussians(seed) {
  let a = seed >>> 0; // mulberry32, then Box-Muller
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () =>
    Math.sqrt(-2 * Math.log(1 - uniform())) *
    Math.cos(2 * Math.PI * uniform());
}

function drawScores(normal, d, n) {
  let norm2 = 0;
  for (let t = 0; t < d; t++) norm2 += normal() ** 2;
  return Float64Array.from({ length: n }, () => Math.sqrt(norm2) * normal());
}

function scalingView(el, props) {
  const state = {
    log2d: props.log2_d ?? 6,
    n: props.keys ?? 32,
    scaled: "1/√dₖ",
    draw: 1,
    sorted: false,
  };
  const view = layout(el);
  slider(
    view.controls,
    "dₖ",
    { min: 0, max: 10, value: state.log2d, show: (v) => String(2 ** v) },
    (v) => {
      state.log2d = v;
      redraw();
    },
  );
  slider(view.controls, "keys", { min: 2, max: 64, value: state.n }, (v) => {
    state.n = v;
    redraw();
  });
  choice(view.controls, "scale", ["1/√dₖ", "none"], state.scaled, (v) => {
    state.scaled = v;
    redraw();
  });
  slider(view.controls, "draw", { min: 1, max: 20, value: 1 }, (v) => {
    state.draw = v;
    redraw();
  });
  choice(view.controls, "order", ["as drawn", "sorted"], "as drawn", (v) => {
    state.sorted = v === "sorted";
    redraw();
  });
  const entropyCurve = (scaled) =>
    Array.from({ length: 11 }, (_, e) => {
      const normal = gaussians(1000 + e);
      let total = 0;
      for (let k = 0; k < 200; k++) {
        const s = drawScores(normal, 2 ** e, state.n);
        total += meanEntropy(
          softmaxRows(s, 1, state.n, scaled ? 2 ** (-e / 2) : 1),
          1,
          state.n,
        );
      }
      return [e, total / 200];
    });
  const redraw = () =>
    view.draw((figures) => {
      const d = 2 ** state.log2d;
      const n = state.n;
      const scaled = state.scaled !== "none";
      const s = drawScores(gaussians(state.draw), d, n);
      const w = softmaxRows(s, 1, n, scaled ? 1 / Math.sqrt(d) : 1);
      const entropy = meanEntropy(w, 1, n);
      const top = Math.max(...w);
      const left = panel(
        figures,
        `dₖ = ${d}, ${scaled ? "scaled" : "not scaled"}: largest ` +
          `${top.toFixed(2)}`,
        `The softmax weights of one query over ${n} keys at dₖ = ${d}, ` +
          `${scaled ? "with" : "without"} the scale 1/√dₖ: the largest ` +
          `weight is ${top.toFixed(2)}, the entropy ${entropy.toFixed(2)} ` +
          `nats.`,
      );
      const box = plotBox();
      const x = scale(0, n, box.x, box.x + box.w);
      const y = scale(0, 1, box.y + box.h, box.y);
      axes(left, box, (v) => x(v + 0.5), y, [0, n - 1], [0, 1], {
        xlabel: state.sorted ? "keys, heaviest first" : "key j",
        ylabel: "weight",
        xticks: niceTicks(0, n - 1, 4).filter(Number.isInteger),
      });
      const bars = state.sorted ? [...w].sort((a, b) => b - a) : w;
      bars.forEach((v, j) => {
        left.append(
          svg("rect", {
            x: x(j) + 0.5,
            y: y(v),
            width: Math.max(x(1) - x(0) - 1, 0.5),
            height: y(0) - y(v),
            fill: COLOURS[scaled ? 0 : 3],
          }),
        );
      });
      lines(left, x, y, [
        {
          points: [
            [0, 1 / n],
            [n, 1 / n],
          ],
          colour: "#555",
          dash: "3 3",
          width: 1,
        },
      ]);
      legend(
        left,
        box,
        [{ label: `uniform 1/${n}`, colour: "#555", dash: "3 3" }],
        "top-right",
      );
      const right = panel(
        figures,
        `mean entropy over 200 draws, ${n} keys`,
        `The mean entropy of a row of ${n} weights against dₖ from 1 to ` +
          `1024, with the scale (flat) and without it (falling towards 0); ` +
          `at most ln ${n} = ${Math.log(n).toFixed(2)} nats.`,
      );
      const xr = scale(0, 10, box.x, box.x + box.w);
      const yr = scale(0, Math.log(n) * 1.05, box.y + box.h, box.y);
      axes(right, box, xr, yr, [0, 10], [0, Math.log(n)], {
        xlabel: "dₖ (log scale)",
        ylabel: "entropy (nats)",
        xticks: [0, 2, 4, 6, 8, 10],
        xformat: (v) => String(2 ** v),
      });
      const curves = [
        {
          points: entropyCurve(true),
          colour: COLOURS[0],
          label: "scaled by 1/√dₖ",
        },
        {
          points: entropyCurve(false),
          colour: COLOURS[3],
          label: "not scaled",
        },
        {
          points: [
            [0, Math.log(n)],
            [10, Math.log(n)],
          ],
          colour: "#555",
          dash: "3 3",
          width: 1,
          label: `uniform: ln ${n}`,
        },
      ];
      lines(right, xr, yr, [...curves, chosenAt(state.log2d, Math.log(n))]);
      legend(right, box, curves, "bottom-left");
      return (
        `At dₖ = ${d} the scores have a spread of ` +
        `${scaled ? "1" : `√${d} = ${format(Math.sqrt(d))}`}; this draw's ` +
        `row puts ${top.toFixed(2)} of its weight on one key (entropy ` +
        `${entropy.toFixed(2)} nats, uniform ${Math.log(n).toFixed(2)}).`
      );
    });
  redraw();
}

function figuresWide(el) {
  el.querySelector(".mx-figures")?.classList.add("mx-wide");
}

export const VIEWS = {
  alibi: alibiView,
  softmax: softmaxView,
  glu: gluView,
  gmlp: gmlpView,
  curves: curvesView,
  scaling: scalingView,
};

// ---------------------------------------------------------------------------
// The anywidget entry point (also what the site's loader calls).

const STYLE = `
.mx-view {
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #222;
  margin: 0.5rem 0 1rem;
}
.mx-controls {
  display: flex;
  flex-wrap: wrap;
  gap: 0.4rem 1rem;
  align-items: center;
  margin-bottom: 0.4rem;
}
.mx-control {
  display: flex;
  align-items: center;
  gap: 0.4rem;
  border: 0;
  margin: 0;
  padding: 0;
  min-inline-size: 0;
  flex-wrap: wrap;
}
.mx-control > label:first-child, .mx-view .mx-choice legend {
  font-weight: 600;
  font-size: inherit;
  line-height: inherit;
  float: left;
  width: auto;
  margin: 0 0.4rem 0 0;
  padding: 0;
}
.mx-control input[type=range] {
  width: 7rem;
  accent-color: #1f77b4;
  min-height: 28px;
}
.mx-control output { min-width: 2rem; font-variant-numeric: tabular-nums; }
.mx-control select {
  font: inherit;
  padding: 0.2rem;
  min-height: 32px;
  max-width: 100%;
}
.mx-choice input { position: absolute; opacity: 0; width: 1px; height: 1px; }
.mx-choice label {
  display: inline-block;
  padding: 0.2rem 0.6rem;
  min-height: 28px;
  line-height: 1.6;
  border: 1px solid #1f77b4;
  color: #1f77b4;
  cursor: pointer;
  margin: 0 -1px 2px 0;
}
.mx-choice input:checked + label {
  background: #1f77b4;
  color: #fff;
  font-weight: 600;
}
.mx-choice input:focus-visible + label {
  outline: 3px solid #ff7f0e;
  outline-offset: 1px;
}
.mx-figures { display: flex; flex-wrap: wrap; gap: 0.5rem; }
.mx-panel { flex: 1 1 300px; max-width: 460px; margin: 0; }
.mx-wide .mx-panel { max-width: 720px; flex-basis: 100%; }
.mx-panel svg { width: 100%; height: auto; display: block; }
.mx-panel text {
  font-size: 11.5px;
  fill: #222;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
.mx-panel .mx-title { font-size: 13px; font-weight: 600; text-anchor: middle; }
.mx-panel .mx-tick { text-anchor: middle; }
.mx-panel .mx-right { text-anchor: end; }
.mx-panel .mx-left { text-anchor: start; }
.mx-panel .mx-label { text-anchor: middle; font-size: 12.5px; }
.mx-axes line { stroke: #222; }
.mx-frame { fill: none; stroke: #222; stroke-width: 0.8; }
.mx-frame-solid { stroke: #222; stroke-width: 0.6; }
.mx-shade { fill: #1f77b4; fill-opacity: 0.1; }
.mx-rule { stroke: #888; }
.mx-dot { fill: #1f77b4; }
.mx-dot-chosen { fill: #d62728; stroke: #222; }
.mx-legend-box { fill: #fff; fill-opacity: 0.85; stroke: #ccc; }
.mx-pixels { image-rendering: pixelated; }
.mx-caption { margin: 0.3rem 0 0; font-size: 0.9em; color: #444; }
`;

function addStyle(el) {
  const host = el.getRootNode();
  const target = host === document ? document.head : host;
  if (target.querySelector?.("style[data-mixers-views]")) return;
  const style = html("style", { "data-mixers-views": "" }, STYLE);
  target.append(style);
}

function render({ model, el }) {
  const name = model.get("view");
  const draw = VIEWS[name];
  if (!draw)
    throw new Error(`mixers views: no view called ${JSON.stringify(name)}`);
  addStyle(el);
  const root = html("div", { class: "mx-view", "data-view": name });
  el.append(root);
  draw(root, model.get("props"));
  return () => root.remove();
}

export default { render };
