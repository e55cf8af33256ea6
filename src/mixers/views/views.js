// The book's live views: each computes what it shows in the reader's
// browser.
//
// One ES module serves three places, which is why it is one file: in
// Jupyter and on Colab it is the ``_esm`` of the anywidget that
// :func:`mixers.live.live_view` returns, and anywidget loads a single
// module; on the built site, ``book/_ext/live_views.py`` serves the same
// file and a small loader, ``book/_static/live-views.js``, hands it the
// same model, read from the page, with no kernel; under node,
// ``tests/js/views.test.mjs`` imports its formulas and checks them against
// fixtures the package computes (:func:`mixers.live.fixtures`).
//
// A view receives ``view`` (its name) and ``props`` (a few kilobytes of
// JSON from the package: learned things as data, never pictures). The
// formulas are computed here, at whatever setting the reader picks; the
// package's Python is the reference, and each formula's note names its
// twin there.

// ------------------------------------------------------
// Formulas, each the twin of a package function

// The slopes of :func:`mixers.alibi.alibi_slopes`. For :math:`n` heads,
// :math:`n` a power of two, head :math:`i` gets
//
// .. math::
//
//    m_i = 2^{-8(i+1)/n}, \qquad i = 0, \dots, n - 1,
//
// a geometric series from :math:`2^{-8/n}` down to :math:`2^{-8}`.
export function alibiSlopes(nHeads) {
  if (!Number.isInteger(nHeads) || nHeads < 1) {
    throw new RangeError(`nHeads must be a positive integer, got ${nHeads}`);
  }
  const geometric = (n) =>
    Array.from({ length: n }, (_, i) => 2 ** ((-8 * (i + 1)) / n));
  // Any other :math:`n` (the authors' rule): the :math:`p` slopes of the
  // largest power of two :math:`p \le n`, then every other slope of the
  // :math:`2p` series, which fall between them, until there are :math:`n`.
  let p = 1;
  while (2 * p <= nHeads) p *= 2;
  const between = geometric(2 * p).filter((_, i) => i % 2 === 0);
  return [...geometric(p), ...between.slice(0, nHeads - p)];
}

// The bias of :func:`mixers.alibi.alibi_bias`, row-major ``[L, L]``: query
// :math:`i` reads key :math:`j` with
//
// .. math::
//
//    b_{ij} = \begin{cases} -m\,(i - j) & j \le i \\
//             -\infty & j > i \end{cases}
//
// under causal masking (the default), and :math:`-m\,\lvert i - j\rvert`
// everywhere when ``symmetric`` (bidirectional attention). Added to the
// scores, it costs a key :math:`m` per token of distance.
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

// :func:`mixers.attention.masked_softmax` over each row of a row-major
// ``[rows, cols]`` matrix of scores :math:`s`, multiplied by ``scale``
// :math:`c` (:math:`c = 1/(T\sqrt{d})` for a temperature :math:`T`):
//
// .. math::
//
//    w_{rj} = \frac{e^{c s_{rj} - M_r}}{\sum_k e^{c s_{rk} - M_r}},
//
//    M_r = \max_k c\, s_{rk}.
//
// Subtracting the row's largest :math:`M_r` changes no weight and keeps
// :math:`e^x` from overflowing.
export function softmaxRows(scores, rows, cols, scale = 1) {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const logit = (c) => scores[r * cols + c] * scale;
    let max = -Infinity;
    for (let c = 0; c < cols; c++) max = Math.max(max, logit(c));
    // A masked key (:math:`s = -\infty`) gets :math:`e^{-\infty} = 0`. A
    // row with every key masked would be :math:`0/0`: it stays all zeros,
    // as in the package.
    if (max === -Infinity) continue;
    let sum = 0;
    for (let c = 0; c < cols; c++) {
      out[r * cols + c] = Math.exp(logit(c) - max);
      sum += out[r * cols + c];
    }
    for (let c = 0; c < cols; c++) out[r * cols + c] /= sum;
  }
  return out;
}

// Each row of a non-negative row-major matrix divided by the row's largest
// entry: :math:`w_{ij} / \max_k w_{ik}`, in :math:`[0, 1]` with a 1 in
// every row (a row of zeros stays zeros). For ALiBi's causal weights this
// is :math:`e^{-m(i - j)}` whatever the row's length: what a head keeps of
// a key at each distance, where the weights themselves, about
// :math:`1/i` each for a flat head, would all look dark on a 0 to 1 scale.
export function rowsOverMax(weights, rows, cols) {
  const out = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const row = weights.slice(r * cols, (r + 1) * cols);
    const max = Math.max(...row.filter(Number.isFinite));
    if (max > 0) out.set(row.map((w) => w / max), r * cols);
  }
  return out;
}

// The mean entropy of the rows of a row-major weight matrix, in nats:
//
// .. math::
//
//    \bar H = -\frac{1}{R} \sum_r \sum_j w_{rj} \ln w_{rj},
//
// with :math:`0 \ln 0 = 0`. A row spread evenly over :math:`n` keys has
// the most, :math:`\ln n`; a row on one key has 0.
export function meanEntropy(weights, rows, cols) {
  // The spread about :math:`\bar W`, and the spread that remains about
  // each diagonal's mean :math:`\mu_{i-j}`.
  let total = 0;
  for (let i = 0; i < rows * cols; i++) {
    const w = weights[i];
    if (w > 0) total -= w * Math.log(w);
  }
  return total / rows;
}

// :math:`\operatorname{erf}`, which JavaScript lacks, for the exact GELU:
// W. J. Cody's rational approximation as in Numerical Recipes, erfc by a
// Chebyshev fit in :math:`t = 2/(2 + |x|)`, with a relative error below
// :math:`1.2 \times 10^{-7}`, enough for torch's ``nn.GELU()`` in float32.
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
  // Clenshaw's recurrence sums the Chebyshev series; then
  // :math:`\operatorname{erf}(-x) = -\operatorname{erf}(x)`.
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

// :math:`\sigma(z) = 1 / (1 + e^{-z})`.
const sigmoid = (z) => 1 / (1 + Math.exp(-z));

// The activation :math:`f` of each variant, as in
// :data:`mixers.feed_forward.ACTIVATIONS`:
// :math:`\operatorname{relu}(z) = \max(z, 0)`, the exact
// :math:`\operatorname{gelu}(z) =
// \tfrac{z}{2}\,(1 + \operatorname{erf}(z/\sqrt 2))`
// and :math:`\operatorname{swish}(z) = \operatorname{silu}(z) = z\,\sigma(z)`
// (Swish with :math:`\beta = 1`).
export const ACTIVATIONS = {
  relu: (z) => Math.max(z, 0),
  gelu: (z) => 0.5 * z * (1 + erf(z / Math.SQRT2)),
  swish: (z) => z * sigmoid(z),
  silu: (z) => z * sigmoid(z),
  sigmoid,
  identity: (z) => z,
};

// What one hidden unit of a feed-forward variant outputs from its two
// pre-activations, :math:`a = x \cdot w_1` and :math:`b = x \cdot v`: a
// gated linear unit (GLU) multiplies, an ungated one ignores :math:`b`,
//
// .. math::
//
//    u(a, b) = f(a)\, b \quad \text{(gated)},
//
//    u(a) = f(a) \quad \text{(ungated)}.
//
// GEGLU is :math:`f = \operatorname{gelu}`, SwiGLU
// :math:`f = \operatorname{swish}`, the original GLU
// :math:`f = \sigma`, the bilinear layer :math:`f(a) = a`.
export function unitOutput(activation, gated, a, b) {
  const f = ACTIVATIONS[activation];
  if (!f) throw new RangeError(`unknown activation ${activation}`);
  return gated ? f(a) * b : f(a);
}

// The diagonal means of :func:`mixers.gmlp.diagonal_means` (causal), for a
// row-major ``[n, n]`` matrix :math:`W`:
//
// .. math::
//
//    \mu_k = \frac{1}{n - k} \sum_{i - j = k} W_{ij},
//
//    k = 0, \dots, n - 1,
//
// the mean weight that position :math:`i` gives the token :math:`k`
// before it (the diagonal :math:`i - j = k` has :math:`n - k` entries).
export function diagonalMeans(weight, n) {
  const sums = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) sums[i - j] += weight[i * n + j];
  }
  return Array.from(sums, (s, k) => s / (n - k));
}

// The score of :func:`mixers.gmlp.toeplitz_score` (causal): how much of
// the variance of :math:`W`'s lower triangle its Toeplitz part
// :math:`T_{ij} = \mu_{i-j}` explains,
//
// .. math::
//
//    \text{score} = 1 - \frac{\sum_{j \le i} (W_{ij} - \mu_{i-j})^2}
//                           {\sum_{j \le i} (W_{ij} - \bar W)^2},
//
// 1 when every diagonal is constant (a convolution), near 0 when
// position, not distance, decides the weight.
export function toeplitzScore(weight, n) {
  const means = diagonalMeans(weight, n);
  // The mean :math:`\bar W` of the lower triangle, :math:`j \le i`.
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
  // A constant :math:`W` has nothing to explain: it is Toeplitz.
  return total <= 0 ? 1 : 1 - residual / total;
}

// The inverse of :func:`mixers.live.encode_lower`, which sends the lower
// triangle of :math:`W` row by row as bytes :math:`q` in base64, each an
// int8 multiple of ``scale/127``. A byte above 127 is negative in two's
// complement, so
//
// .. math::
//
//    W_{ij} = \frac{\text{scale}}{127}
//             \begin{cases} q & q \le 127 \\ q - 256 & q > 127 \end{cases}
//
// within half a step, :math:`\text{scale}/254`. The masked upper triangle
// comes back 0, in a row-major ``[n, n]`` matrix.
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

// The level sets of a function sampled on a grid, by marching squares:
// for a level :math:`\ell`, the segments along which the sampled
// :math:`g` crosses :math:`\ell`, as pairs of points
// ``[[r0, c0], [r1, c1]]`` in grid units (row, column; fractions between
// samples). ``values`` is row-major ``[rows, cols]``.
export function contourSegments(values, rows, cols, level) {
  const segments = [];
  const g = (r, c) => values[r * cols + c];
  // Where :math:`g` crosses :math:`\ell` on the edge from sample
  // :math:`p` to sample :math:`q`, linearly interpolated:
  // :math:`p + t\,(q - p)` with
  // :math:`t = (\ell - g_p) / (g_q - g_p)`.
  const cross = ([r0, c0], [r1, c1]) => {
    const t = (level - g(r0, c0)) / (g(r1, c1) - g(r0, c0));
    return [r0 + t * (r1 - r0), c0 + t * (c1 - c0)];
  };
  for (let r = 0; r + 1 < rows; r++) {
    for (let c = 0; c + 1 < cols; c++) {
      // A square's four corners, clockwise, and which lie above the level.
      const corners = [
        [r, c],
        [r, c + 1],
        [r + 1, c + 1],
        [r + 1, c],
      ];
      const above = corners.map(([i, j]) => g(i, j) > level);
      // The level crosses each edge whose two ends disagree: two edges,
      // or all four (a saddle).
      const crossings = [];
      for (let k = 0; k < 4; k++) {
        const next = (k + 1) % 4;
        if (above[k] !== above[next])
          crossings.push(cross(corners[k], corners[next]));
      }
      if (crossings.length === 2) segments.push(crossings);
      // A saddle: two segments, each cutting off one of the two corners
      // that lie on the other side of the level from the square's centre
      // (the mean of its corners). Edge :math:`k` runs from corner
      // :math:`k` to :math:`k + 1`, so corner 0 lies between edges 3 and
      // 0, corner 1 between edges 0 and 1.
      if (crossings.length === 4) {
        const centre = corners.reduce((s, [i, j]) => s + g(i, j), 0) / 4;
        const [e0, e1, e2, e3] = crossings;
        if (centre > level === above[1])
          segments.push([e0, e3], [e1, e2]);
        else segments.push([e0, e1], [e2, e3]);
      }
    }
  }
  return segments;
}

// Standard normal draws from a seed, so a view's draws are the same on
// every visit: mulberry32 for uniform numbers :math:`u_1, u_2` in
// :math:`[0, 1)`, then the Box-Muller transform
// :math:`z = \sqrt{-2 \ln(1 - u_1)}\, \cos(2\pi u_2)`.
export function gaussians(seed) {
  let a = seed >>> 0;
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

// The scores of one query against ``n`` keys whose :math:`d` entries, like
// the query's, are independent with variance 1. Given the query,
// :math:`q \cdot k = \lVert q \rVert\, z` with :math:`z` standard normal,
// and :math:`\lVert q \rVert^2` is a sum of :math:`d` squares: drawn that
// way, the scores have exactly the distribution of :math:`q \cdot k`, mean
// 0 and variance :math:`d`, at the cost of :math:`d + n` draws, not
// :math:`d(n + 1)`.
export function drawScores(normal, d, n) {
  let norm2 = 0;
  for (let t = 0; t < d; t++) norm2 += normal() ** 2;
  return Float64Array.from({ length: n }, () => Math.sqrt(norm2) * normal());
}

// ------------------------------------------------------
// Drawing: SVG panels with axes, legends, images and colour bars

// A panel is an SVG drawn in viewBox units, scaled to its column (so its
// text scales with it): two panels side by side in the book's column at
// 1280 px are drawn about 326 px wide, a scale of 0.91, and one fills a
// phone's. Its text is 16 units (``TEXT``), at least 14 px as shown, near
// the book's static figures. Its plotting box sits inside the
// frame's margins, left wide enough for the tick labels and the axis
// label of :math:`y`, below for those of :math:`x`.
const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 360;
const HEIGHT = 292;
const TEXT = 16;
const FRAME = { left: 70, right: 22, top: 36, bottom: 54 };
// The width of a character of the panels' text, about: for what must
// clear a label (a legend's box, the label of :math:`y`).
const CHAR = 0.55 * TEXT;
// A title's character (bold, 16.5 units), about, and a title's line.
const TITLE_CHAR = 0.6 * 16.5;
const TITLE_LINE = 20;

// The matplotlib colour cycle (C0, C1, ...), as the book's figures use it.
// prettier-ignore
export const COLOURS = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
];

// Two colour maps, by their stops: viridis for what runs from nothing to
// most (weights), and a red-blue diverging map for what has a sign, with
// white at its centre, 0.
// prettier-ignore
const MAPS = {
  viridis: [
    "#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c",
    "#22a884", "#44bf70", "#7ad151", "#bddf26", "#fde725",
  ],
  diverging: [
    "#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
    "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f",
  ],
};

// Elements with their attributes (and text): SVG ones in SVG's namespace.
function element(node, attrs, text) {
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
const svg = (tag, attrs = {}, text) =>
  element(document.createElementNS(SVG, tag), attrs, text);
const html = (tag, attrs = {}, text) =>
  element(document.createElement(tag), attrs, text);
const xywh = (b) => ({ x: b.x, y: b.y, width: b.w, height: b.h });

// The colour of :math:`t \in [0, 1]` on a map, interpolated linearly
// between its stops: a table of 256 colours, computed once per map.
const TABLES = {};
function colourAt(map, t) {
  if (!TABLES[map]) {
    // Each stop's red, green and blue; entry :math:`k` of the table lies
    // :math:`x = k/255` of the way along the stops, between stop
    // :math:`\lfloor x \rfloor` and the next, a linear mix of the two.
    const rgb = (hex) =>
      [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
    const stops = MAPS[map].map(rgb);
    TABLES[map] = Array.from({ length: 256 }, (_, k) => {
      const x = (k / 255) * (stops.length - 1);
      const i = Math.min(Math.floor(x), stops.length - 2);
      return stops[i].map((v, c) =>
        Math.round(v + (stops[i + 1][c] - v) * (x - i)),
      );
    });
  }
  // :math:`t` clipped to :math:`[0, 1]`, then the nearest of the 256.
  return TABLES[map][Math.round(Math.min(Math.max(t, 0), 1) * 255)];
}

// About ``count`` round tick positions covering :math:`[lo, hi]`: the
// step is the first of :math:`1, 2, 2.5, 5, 10` times a power of ten that
// is at least :math:`(hi - lo)/\text{count}`.
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

// A number in at most 3 significant digits, in exponent form outside
// :math:`[10^{-3}, 10^4)`.
export function format(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return String(Number(v.toPrecision(3)));
}

// The linear map from data :math:`[d_0, d_1]` to pixels :math:`[r_0, r_1]`.
const scale = (d0, d1, r0, r1) => (v) =>
  r0 + ((v - d0) / (d1 - d0 || 1)) * (r1 - r0);

// A panel: an SVG ``width`` wide with a title, described for screen
// readers by ``label``, in a figure of its own (the figures wrap to one a
// row on a phone). A title too long for one line takes two, the panel
// growing upwards by a line (its viewBox starts above 0), so that what is
// drawn below keeps its place; ``below`` units more are left under the
// frame's bottom margin, for a legend that would hide the lines in a box.
function panel(parent, title, label, width = WIDTH, below = 0) {
  const figure = html("figure", { class: "mx-panel" });
  const lines = titleLines(title, width);
  const above = TITLE_LINE * (lines.length - 1);
  const root = svg("svg", {
    viewBox: `0 ${-above} ${width} ${HEIGHT + above + below}`,
    role: "img",
    "aria-label": label,
  });
  root.append(svg("title", {}, label));
  const text = svg("text", { class: "mx-title" });
  lines.forEach((line, i) => {
    const at = { x: width / 2, y: 20 - above + TITLE_LINE * i };
    text.append(svg("tspan", at, line));
  });
  root.append(text);
  figure.append(root);
  parent.append(figure);
  return root;
}

// A title as the lines it is drawn on: itself where it fits the panel,
// else broken after the last comma (else space) that leaves a first line
// that fits. A bold title character is about 0.6 of its 16.5 units wide
// (the widest title at one line, "mean entropy of each head against T",
// measures 347 units of 360).
export function titleLines(title, width = WIDTH) {
  const fits = (line) => line.trim().length * TITLE_CHAR <= width - 8;
  if (fits(title)) return [title];
  for (const mark of [", ", " "]) {
    let cut = title.lastIndexOf(mark);
    while (cut > 0 && !fits(title.slice(0, cut + 1))) {
      cut = title.lastIndexOf(mark, cut - 1);
    }
    // The first line keeps its mark, the space with it, so that the
    // title's text reads as it did on one line.
    if (cut > 0) {
      const end = cut + mark.length;
      return [title.slice(0, end), title.slice(end)];
    }
  }
  return [title];
}

// The plotting box of a panel ``width`` wide, inside its margins, and the
// square box a matrix is drawn in.
const plotBox = (width = WIDTH) => ({
  x: FRAME.left,
  y: FRAME.top,
  w: width - FRAME.left - FRAME.right,
  h: HEIGHT - FRAME.top - FRAME.bottom,
});
const squareBox = () => ({ x: FRAME.left, y: FRAME.top, w: 196, h: 196 });

// A tick and its label at ``v`` on one axis, from the tick's end points
// and the label's place and class.
function tick(g, [x1, y1, x2, y2], [x, y, kind], text) {
  g.append(svg("line", { x1, x2, y1, y2 }));
  g.append(svg("text", { x, y, class: kind }, text));
}

// Axes around a box: a frame, ticks and labels on :math:`x` (bottom) and
// :math:`y` (left). ``x`` and ``y`` map data to pixels; ``xs`` and ``ys``
// are the data ranges the ticks cover unless ``xticks``/``yticks`` name
// them.
function axes(root, box, x, y, xs, ys, options) {
  const { xlabel, ylabel, xformat = format } = options;
  const xticks = options.xticks ?? niceTicks(...xs);
  const yticks = options.yticks ?? niceTicks(...ys);
  // Ticks below the box for :math:`x`, left of it for :math:`y`: each a
  // 4-px line and its label.
  const g = svg("g", { class: "mx-axes" });
  g.append(svg("rect", { ...xywh(box), class: "mx-frame" }));
  const bottom = box.y + box.h;
  for (const v of xticks) {
    const at = [x(v), bottom + 19, "mx-tick"];
    tick(g, [x(v), bottom, x(v), bottom + 4], at, xformat(v));
  }
  for (const v of yticks) {
    const at = [box.x - 6, y(v) + 5, "mx-tick mx-right"];
    tick(g, [box.x - 4, y(v), box.x, y(v)], at, format(v));
  }
  // The label of :math:`x` centred below its tick labels.
  if (xlabel) {
    const at = { x: box.x + box.w / 2, y: bottom + 41, class: "mx-label" };
    g.append(svg("text", at, xlabel));
  }
  // The rotated label of :math:`y` clears the widest tick label, but stays
  // at :math:`x \ge 14`: its glyphs reach about 13 px left of it.
  if (ylabel) {
    const widest = Math.max(0, ...yticks.map((v) => format(v).length));
    const left = Math.max(14, box.x - Math.max(34, 16 + CHAR * widest));
    const at = `translate(${left}, ${box.y + box.h / 2}) rotate(-90)`;
    g.append(svg("text", { transform: at, class: "mx-label" }, ylabel));
  }
  root.append(g);
}

// Axes for an :math:`n \times n` matrix drawn in ``box``: it has cells,
// not points, so each tick sits at the middle of its row or column.
function matrixAxes(root, box, n, xlabel, ylabel) {
  const cx = scale(0, n, box.x, box.x + box.w);
  const cy = scale(0, n, box.y, box.y + box.h);
  const ticks = niceTicks(0, n - 1, 4).filter(Number.isInteger);
  const [xs, ys] = [(v) => cx(v + 0.5), (v) => cy(v + 0.5)];
  const options = { xlabel, ylabel, xticks: ticks, yticks: ticks };
  axes(root, box, xs, ys, [0, n - 1], [0, n - 1], options);
}

// A matrix as an image: ``value(i, j)`` is a number, or NaN for a cell left
// blank (masked), coloured on ``map`` from ``lo`` to ``hi``. It is drawn
// through a canvas of at most 400 by 400 pixels.
function image(root, box, rows, cols, value, map, lo, hi) {
  // One canvas pixel a cell, up to 400 cells a side.
  const [w, h] = [Math.min(cols, 400), Math.min(rows, 400)];
  const canvas = html("canvas", { width: w, height: h });
  const context = canvas.getContext("2d");
  const pixels = context.createImageData(w, h);
  // Where a pixel covers several cells it shows the one farthest from 0,
  // so that a narrow band (the weights of a steep head at
  // :math:`L = 1024`) stays visible.
  const cell = (py, px) => {
    let best = NaN;
    const [i0, i1] = [(py * rows) / h, ((py + 1) * rows) / h];
    const [j0, j1] = [(px * cols) / w, ((px + 1) * cols) / w];
    for (let i = Math.floor(i0); i < i1; i++) {
      for (let j = Math.floor(j0); j < j1; j++) {
        const v = value(i, j);
        if (Number.isFinite(v) && !(Math.abs(v) <= Math.abs(best))) best = v;
      }
    }
    return best;
  };
  // Each pixel at :math:`t = (v - \text{lo})/(\text{hi} - \text{lo})` on the
  // map, a blank cell white.
  for (let py = 0; py < h; py++) {
    for (let px = 0; px < w; px++) {
      const v = cell(py, px);
      const [r, g, b] = Number.isFinite(v)
        ? colourAt(map, (v - lo) / (hi - lo || 1))
        : [255, 255, 255];
      pixels.data.set([r, g, b, 255], 4 * (py * w + px));
    }
  }
  // Into the SVG as a PNG, stretched over the box, its pixels kept sharp
  // (``mx-pixels``).
  context.putImageData(pixels, 0, 0);
  root.append(
    svg("image", {
      ...xywh(box),
      href: canvas.toDataURL(),
      preserveAspectRatio: "none",
      class: "mx-pixels",
    }),
  );
}

// A vertical colour bar beside a box, from ``lo`` to ``hi``, with its
// label: a gradient through the map's stops (with an id of its own, as
// a page may hold many).
function colourBar(root, box, map, lo, hi, label) {
  const id = `mx-bar-${Math.random().toString(36).slice(2)}`;
  const gradient = svg("linearGradient", { id, x1: 0, y1: 1, x2: 0, y2: 0 });
  MAPS[map].forEach((c, i, all) => {
    const stop = { offset: i / (all.length - 1), "stop-color": c };
    gradient.append(svg("stop", stop));
  });
  const defs = svg("defs");
  defs.append(gradient);
  root.append(defs);
  // The bar 10 px right of the box: its ticks on its right, its label
  // beyond them, turned to read downwards.
  const bar = { x: box.x + box.w + 10, y: box.y, w: 10, h: box.h };
  const fill = `url(#${id})`;
  root.append(svg("rect", { ...xywh(bar), fill, class: "mx-frame-solid" }));
  const y = scale(lo, hi, bar.y + bar.h, bar.y);
  for (const v of niceTicks(lo, hi, 4)) {
    const at = { x: bar.x + bar.w + 3, y: y(v) + 5 };
    root.append(svg("text", { ...at, class: "mx-tick mx-left" }, format(v)));
  }
  const [lx, ly] = [bar.x + bar.w + 48, bar.y + bar.h / 2];
  const at = `translate(${lx}, ${ly}) rotate(90)`;
  root.append(svg("text", { transform: at, class: "mx-label" }, label));
}

// A heat map: a matrix as an image, with its colour bar.
function heatMap(root, box, [rows, cols], value, { map, lo, hi, label }) {
  image(root, box, rows, cols, value, map, lo, hi);
  colourBar(root, box, map, lo, hi, label);
}

// A point in pixels, as an SVG path's ``M`` (move to) or ``L`` (line to).
const to = (command, x, y) => `${command}${x.toFixed(1)},${y.toFixed(1)}`;

// Lines through points: each series is
// ``{points: [[x, y], ...], colour, dash, width, opacity}``, drawn as one
// path.
function lines(root, x, y, series) {
  for (const s of series) {
    const d = s.points
      .map(([a, b], i) => to(i ? "L" : "M", x(a), y(b)))
      .join("");
    // Unfilled, in the series' colour, width, dash and opacity (a solid
    // line 1.8 px wide unless it says otherwise).
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

// A straight line from one point to another, as a series for ``lines``: a
// thin black one (an axis at 0) unless ``style`` says otherwise.
const segment = (from, to, style = {}) => ({
  points: [from, to],
  colour: "#000",
  width: 0.6,
  ...style,
});

// A thin dashed vertical line from 0 to ``top`` at :math:`x = v`: the
// setting chosen.
const chosenAt = (v, top) =>
  segment([v, 0], [v, top], { colour: "#333", dash: "3 3", width: 1 });

// Level sets, as segments in data coordinates, drawn as one thin path.
function contours(root, x, y, segments) {
  const d = segments
    .map(([[a0, b0], [a1, b1]]) =>
      to("M", x(a0), y(b0)) + to("L", x(a1), y(b1))
    )
    .join("");
  root.append(svg("path", { d, class: "mx-contour" }));
}

// A legend in a corner of a box (``top-right``, ``bottom-left``, ...),
// or ``below`` it, under the label of :math:`x` (room its panel leaves):
// each entry a line in its series' colour and dash, then its label.
function legend(root, box, entries, corner = "top-right") {
  const g = svg("g", { class: "mx-legend" });
  const [width, height] = legendSize(entries);
  const [x0, y0] = legendCorner(box, [width, height], corner);
  g.append(
    svg("rect", { x: x0, y: y0, width, height, class: "mx-legend-box" }),
  );
  // Each entry: the series' line (colour, dash), then its label.
  entries.forEach((e, i) => {
    // Entry :math:`i`'s line, 20 px long, centred on its row at
    // :math:`y_0 + 12 + 19i`, and its label 5 px beyond.
    const yy = y0 + 12 + 19 * i;
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
    const at = { x: x0 + 30, y: yy + 5, class: "mx-tick mx-left" };
    g.append(svg("text", at, e.label));
  });
  root.append(g);
}

// A legend's box: 19 units a line, as wide as its longest label
// (``CHAR`` a character) and its 20-unit sample line.
export function legendSize(entries) {
  const longest = Math.max(...entries.map((e) => e.label.length));
  return [34 + CHAR * longest, 19 * entries.length + 5];
}

// Where a legend of ``size`` starts (its top left) in ``corner`` of
// ``box``, 4 units in; ``below``: under the frame's bottom margin,
// centred on the box as far as the panel's right margin allows.
export function legendCorner(box, [width, height], corner) {
  if (corner === "below") {
    const right = box.x + box.w + FRAME.right - 4;
    const x0 = Math.min(box.x + (box.w - width) / 2, right - width);
    return [Math.max(4, x0), box.y + box.h + FRAME.bottom];
  }
  const x0 = corner.endsWith("right") ? box.x + box.w - width - 4 : box.x + 4;
  const y0 = corner.startsWith("top") ? box.y + 4 : box.y + box.h - 4 - height;
  return [x0, y0];
}

// Where a legend of ``size`` goes in ``box``: the first of ``corners``
// that hides none of the ``points`` drawn (pixels), matplotlib's
// ``loc="best"`` over the corners a view allows; where each hides some,
// ``otherwise`` if given, else the corner that hides the fewest.
export function clearestCorner(box, size, points, corners, otherwise) {
  const hidden = (corner) => {
    const [x0, y0] = legendCorner(box, size, corner);
    const [x1, y1] = [x0 + size[0], y0 + size[1]];
    const inside = ([x, y]) => x > x0 && x < x1 && y > y0 && y < y1;
    return points.filter(inside).length;
  };
  const counts = corners.map(hidden);
  const fewest = Math.min(...counts);
  if (fewest > 0 && otherwise) return otherwise;
  return corners[counts.indexOf(fewest)];
}

// A series' points as the pixels they are drawn at, for a legend to avoid.
const pixels = (series, x, y) =>
  series.flatMap((s) => s.points.map(([a, b]) => [x(a), y(b)]));

// ------------------------------------------------------
// Controls: each with a visible name, an accessible label, keyboard and touch

let ids = 0;

// A slider's readout: an integer as it is (1024, not 1.02e3), else 3
// digits.
const exact = (v) => (Number.isInteger(v) ? String(v) : format(v));

// A range input with its name, and its value shown beside it (``show``
// turns the input's value into what it stands for, such as
// :math:`T = 2^v`). ``setMax`` narrows it when another control changes
// what it may reach.
function slider(parent, name, options, onInput) {
  const { min, max, step = 1, value, show = exact } = options;
  const id = `mx-control-${++ids}`;
  // The label names the input for screen readers (``for``); the readout
  // is an ``output`` tied to it.
  const row = html("div", { class: "mx-control" });
  row.append(html("label", { for: id }, name));
  const input = html("input", { type: "range", id, min, max, step, value });
  const readout = html("output", { for: id }, show(Number(value)));
  // Every move (drag, arrow key, tap) updates the readout and the view.
  input.addEventListener("input", () => {
    readout.textContent = show(Number(input.value));
    onInput(Number(input.value));
  });
  row.append(input, readout);
  parent.append(row);
  // What another control needs: the input, and a way to narrow it.
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
// (arrow keys move between them; the chosen one is filled). ``label``
// names each option.
function choice(parent, name, options, value, onChange, label = String) {
  const group = `mx-choice-${++ids}`;
  const set = html("fieldset", { class: "mx-control mx-choice" });
  set.append(html("legend", {}, name));
  // A radio input (hidden, still focusable) and its label, drawn as the
  // button; one name groups them, so arrow keys move between them.
  for (const option of options) {
    const id = `${group}-${set.childElementCount}`;
    const input = html("input", {
      type: "radio",
      name: group,
      id,
      value: String(option),
    });
    // The one chosen at the start is checked; a change to another calls
    // ``onChange`` with the option itself (a number stays a number).
    input.checked = option === value;
    input.addEventListener("change", () => input.checked && onChange(option));
    set.append(input, html("label", { for: id }, label(option)));
  }
  parent.append(set);
}

// One choice among many: a drop-down list with its name.
function list(parent, name, options, value, onChange) {
  const id = `mx-control-${++ids}`;
  const row = html("div", { class: "mx-control" });
  row.append(html("label", { for: id }, name));
  // One ``option`` an item, the starting one selected; a change hands
  // the chosen item to ``onChange``.
  const select = html("select", { id });
  for (const option of options) {
    const item = html("option", { value: option }, option);
    item.selected = option === value;
    select.append(item);
  }
  select.addEventListener("change", () => onChange(select.value));
  row.append(select);
  parent.append(row);
}

// ------------------------------------------------------
// The views' frame: controls, figures and a caption

// Each view is a function ``(el, props)`` that adds its controls and
// paints its figures; ``layout`` holds what they share. ``paint(draw)``
// keeps the view's drawing function and calls it: it fills the figures
// and returns the caption, which screen readers announce as it changes.
// ``set(key)`` is the handler a control needs: it stores the control's
// value in ``state[key]`` (through ``convert``) and paints again.
function layout(el, state, { wide = false } = {}) {
  // The caption is ``aria-live``: a screen reader reads it out when a
  // control changes it.
  const controls = html("div", { class: "mx-controls" });
  const kind = wide ? "mx-figures mx-wide" : "mx-figures";
  const figures = html("div", { class: kind });
  const caption = html("p", { class: "mx-caption", "aria-live": "polite" });
  el.append(controls, figures, caption);
  // Every change paints the figures afresh: a view's panels are cheap
  // to draw, and drawing from the state alone keeps them in step.
  let draw = () => "";
  const repaint = () => {
    figures.replaceChildren();
    caption.textContent = draw(figures) ?? "";
  };
  // What a view uses: where its controls go, a handler for each, and a
  // way to hand over its drawing.
  return {
    controls,
    set: (key, convert = (v) => v) => (v) => {
      state[key] = convert(v);
      repaint();
    },
    paint(drawing) {
      draw = drawing;
      repaint();
    },
  };
}

// 2 to a power, the power as superscript characters (2⁻⁰·⁵): the slopes
// :math:`m = 2^{-8(i+1)/n}` by their exponent, as the chapter writes them.
const SUPERSCRIPT = Object.fromEntries(
  [..."-.0123456789"].map((c, i) => [c, "⁻·⁰¹²³⁴⁵⁶⁷⁸⁹"[i]]),
);
const powerOf2 = (p) =>
  `2${[...format(p)].map((c) => SUPERSCRIPT[c] ?? c).join("")}`;
const powerOfTwo = (m) => powerOf2(Math.log2(m));

// "1 head", "8 heads": a count and its noun, plural unless it is 1.
export const counted = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

// ------------------------------------------------------
// The ALiBi view

// Any head count 1 to 64, any head, any length up to 1,024. One panel
// shows the chosen head's bias matrix (or the attention weights it alone
// would give), the other the bias along a row, with the head's span, and
// every head's slope.
function alibiView(el, props) {
  const state = {
    heads: props.heads ?? 8,
    head: 0,
    length: props.length ?? 32,
    show: "bias",
    mask: "causal",
  };
  const view = layout(el, state);
  const { controls } = view;
  // Fewer heads may leave the chosen head past the last: it follows.
  const heads = { min: 1, max: 64, value: state.heads };
  slider(controls, "heads", heads, (v) => {
    head.setMax(v - 1);
    state.head = Number(head.input.value);
    view.set("heads")(v);
  });
  const head = slider(
    controls,
    "head",
    { min: 0, max: state.heads - 1, value: 0 },
    view.set("head"),
  );
  // Any length :math:`L` up to 1,024: the matrix is :math:`L \times L`.
  const lengths = { min: 4, max: 1024, value: state.length };
  slider(controls, "length", lengths, view.set("length"));
  // The matrix shows the bias or the weights; the mask is causal or
  // none (:math:`-m\,\lvert i - j\rvert` both ways).
  const shows = (v) => (v === "bias" ? "the bias" : "softmax of the bias");
  const what = ["bias", "weight"];
  choice(controls, "colour shows", what, state.show, view.set("show"), shows);
  const masks = ["causal", "bidirectional"];
  choice(controls, "attention", masks, state.mask, view.set("mask"));
  // The slopes of all heads, the chosen one's :math:`m`; the caption
  // gives the first six slopes as powers of two and the head's span.
  view.paint((figures) => {
    const slopes = alibiSlopes(state.heads);
    const m = slopes[state.head];
    const weights = biasMatrix(figures, state, m);
    biasAlongARow(figures, state, slopes);
    const span = Math.log(10) / m;
    // "8 heads: slopes 2⁻¹, …" or "1 head: slope 2⁻⁸": the count and its
    // noun agree.
    const shown = slopes.slice(0, 6).map(powerOfTwo).join(", ");
    const more = slopes.length > 6 ? ", …" : "";
    const slopesAre = state.heads === 1 ? "slope" : "slopes";
    return (
      `${counted(state.heads, "head")}: ${slopesAre} ${shown}${more}; ` +
      `head ${state.head} ` +
      `loses a factor of 10 after ${format(span)} tokens.` +
      (weights ?? "")
    );
  });
}

// The chosen head's matrix over :math:`L` positions, rows queries and
// columns keys: its bias :math:`-m\,(i - j)`, from :math:`-m\,(L - 1)` to
// 0, or the weights :math:`\operatorname{softmax}_j(-m\,(i - j))` that
// the bias alone would give. Returns what the caption says of the
// weights.
function biasMatrix(figures, state, m) {
  const L = state.length;
  const symmetric = state.mask === "bidirectional";
  const bias = alibiBias(m, L, { symmetric });
  const weights = state.show === "weight" ? softmaxRows(bias, L, L) : null;
  // Each row of weights sums to 1, so a flat head's are all about
  // :math:`1/i`: on a 0 to 1 scale nearly all dark. Each row is drawn
  // over its largest instead, :math:`w_{ij}/w_{ii} = e^{-m(i - j)}`, the
  // share of the nearest key's weight that a key keeps at its distance.
  const values = weights ? rowsOverMax(weights, L, L) : bias;
  // The title gives the slope as a power of two; the description says
  // what the colours show, for a screen reader.
  const title = `head ${state.head} of ${state.heads}: m = ${powerOfTwo(m)}`;
  const root = panel(
    figures,
    title,
    (weights
      ? "The attention weights from the ALiBi bias alone, each row over " +
        "its largest weight,"
      : "The ALiBi bias") +
      ` of head ${state.head} of ${state.heads} over ${L} positions:` +
      " rows are queries, columns keys, " +
      (symmetric ? "-m|i - j| both ways." : "the upper triangle masked."),
  );
  // Masked cells (:math:`j > i`, causal) stay blank; the bias runs from
  // :math:`-m\,(L - 1)` (the farthest key) to 0 (the query itself).
  const box = squareBox();
  const visible = (i, j) => (symmetric || j <= i ? values[i * L + j] : NaN);
  heatMap(root, box, [L, L], visible, {
    map: "viridis",
    lo: weights ? 0 : -m * (L - 1),
    hi: weights ? 1 : 0,
    label: weights ? "weight ÷ its row's largest" : "bias",
  });
  matrixAxes(root, box, L, "key j", "query i");
  if (!weights) return undefined;
  // The caption gives the scale: the rows' largest weights, each the
  // weight of the query itself, :math:`w_{ii} = 1 / \sum_j e^{b_{ij}}`,
  // from 1 (causal, query 0 reads itself alone) down to where the most
  // keys are in reach (the last query, or the middle one both ways).
  const largest = Array.from({ length: L }, (_, i) => weights[i * L + i]);
  const [least, most] = [Math.min(...largest), Math.max(...largest)];
  return (
    " Each row of weights is drawn over its largest, which runs from " +
    `${format(least)} to ${format(most)} over the rows.`
  );
}

// The bias :math:`-m\,(i - j)` against the distance :math:`i - j`, with
// the head's span: the bias reaches :math:`-\ln 10`, a tenth of the
// nearest key's weight, at
//
// .. math::
//
//    i - j = \frac{\ln 10}{m},
//
// 1.8 tokens for the steepest of 8 heads, :math:`m = 1/2`; 589 for the
// flattest, :math:`m = 2^{-8}`. The shaded band is the distances the
// matrix covers.
function biasAlongARow(figures, state, slopes) {
  const m = slopes[state.head];
  const L = state.length;
  const span = Math.log(10) / m;
  const root = panel(
    figures,
    "the bias along a row",
    `The bias -m(i - j) against the distance i - j for head ` +
      `${state.head}: it falls to -ln 10 (a tenth of the weight) after ` +
      `${format(span)} tokens; the matrix covers distances up to ` +
      `${L - 1}.`,
  );
  const box = { ...plotBox(), h: 160 };
  // The distance axis reaches the matrix's :math:`L` or a little past
  // the span, whichever is farther.
  const far = Math.max(L, 1.2 * span);
  const x = scale(0, far, box.x, box.x + box.w);
  const ylo = -m * far;
  const y = scale(ylo, 0, box.y + box.h, box.y);
  const covered = { ...box, x: x(0), w: x(L - 1) - x(0) };
  root.append(svg("rect", { ...xywh(covered), class: "mx-shade" }));
  axes(root, box, x, y, [0, far], [ylo, 0], {
    xlabel: "distance i - j",
    ylabel: "bias",
  });
  // The line :math:`-m\,(i - j)`, the level :math:`-\ln 10`, and the span
  // where they meet; then every head's slope below the axes.
  const tenth = { colour: "#7f7f7f", dash: "2 3", width: 1.2 };
  const reach = { colour: COLOURS[3], dash: "6 4", width: 1.5 };
  lines(root, x, y, [
    segment([0, 0], [far, -m * far], { colour: COLOURS[0], width: 1.8 }),
    segment([0, -Math.log(10)], [far, -Math.log(10)], tenth),
    segment([span, ylo], [span, 0], reach),
  ]);
  // The legend at the bottom left, where the line has fallen away; the
  // strip of slopes below the axes.
  const entries = [
    { label: "-m (i - j)", colour: COLOURS[0] },
    { label: `span ${format(span)}`, ...reach },
    { label: "-ln 10", ...tenth },
  ];
  legend(root, box, entries, "bottom-left");
  slopeStrip(root, slopes, state.head, box.y + box.h + 62);
}

// Every head's slope as a dot on a :math:`\log_2` axis from
// :math:`2^{-8}` to :math:`2^0`, the chosen head's larger and red.
function slopeStrip(root, slopes, chosen, y0) {
  const x = scale(-8, 0, FRAME.left, WIDTH - FRAME.right);
  // The axis, its ticks at :math:`2^{-8}, 2^{-6}, \dots, 2^0`, its name.
  const rule = { x1: x(-8), x2: x(0), y1: y0, y2: y0, class: "mx-rule" };
  root.append(svg("line", rule));
  for (const v of [-8, -6, -4, -2, 0]) {
    const at = { x: x(v), y: y0 + 20, class: "mx-tick" };
    root.append(svg("text", at, powerOf2(v)));
  }
  const at = { x: FRAME.left - 8, y: y0 + 5, class: "mx-tick mx-right" };
  root.append(svg("text", at, "slopes"));
  // A dot at :math:`\log_2 m` for each head.
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

// ------------------------------------------------------
// The softmax view: temperature, mask and scale

// One head's attention weights over a sentence, from the raw scores
// :math:`q \cdot k` of a layer's heads (data), at any temperature
// :math:`T`, with or without the causal mask and the scale
// :math:`1/\sqrt{d}`; beside them, every head's mean entropy against
// :math:`T`.
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
  const view = layout(el, state);
  const { controls } = view;
  const heads = scores.map((_, h) => h);
  choice(controls, "head", heads, 0, view.set("head"));
  // :math:`T` on a log scale, from :math:`2^{-3}` to :math:`2^3`.
  const temperatures = {
    min: -3,
    max: 3,
    step: 0.05,
    value: 0,
    show: (v) => format(2 ** v),
  };
  slider(controls, "temperature T", temperatures, view.set("log2T"));
  // The causal mask or none; the scale :math:`1/\sqrt{d}` or none; the
  // weights or the scores they come from.
  choice(controls, "mask", ["none", "causal"], "none", view.set("mask"));
  const scaled = view.set("scaled", (v) => v !== "none");
  choice(controls, "scale", ["1/√d", "none"], "1/√d", scaled);
  const shows = ["weights", "scores"];
  choice(controls, "show", shows, "weights", view.set("show"));
  // The softmax's input, :math:`q \cdot k / (T \sqrt{d})` (or
  // :math:`q \cdot k / T` unscaled), :math:`-\infty` where the causal
  // mask hides a later key.
  const logitsOf = (h, T) => {
    const factor = 1 / (T * (state.scaled ? Math.sqrt(dHead) : 1));
    const s = Float64Array.from(scores[h].flat(), (v) => v * factor);
    if (state.mask === "causal") {
      for (let i = 0; i < n; i++)
        for (let j = i + 1; j < n; j++) s[i * n + j] = -Infinity;
    }
    return s;
  };
  // The weights, :math:`\operatorname{softmax}` of each row.
  const weightsOf = (h, T) => softmaxRows(logitsOf(h, T), n, n);
  // The caption: the chosen head's setting and its rows' mean entropy,
  // against the most a row can have.
  view.paint((figures) => {
    const T = 2 ** state.log2T;
    const logits = logitsOf(state.head, T);
    const entropy = sentenceWeights(figures, state, { tokens, logits });
    entropyAgainstT(figures, state, { n, heads, weightsOf });
    return softmaxCaption(state, entropy, n);
  });
}

// What the softmax view shows, in words: the head, the temperature, the
// scale and the mask, and how spread the head's weights are.
export function softmaxCaption(state, entropy, n) {
  const T = format(2 ** state.log2T);
  const scaled = state.scaled ? "scores divided by √d" : "scores not scaled";
  const mask = state.mask === "causal" ? "causal mask" : "no mask";
  return (
    `Head ${state.head} at T = ${T}, ${scaled}, ${mask}: its rows' mean ` +
    `entropy is ${entropy.toFixed(2)} nats, of at most ` +
    `ln ${n} = ${Math.log(n).toFixed(2)} (weights spread evenly). A higher ` +
    "T flattens every head."
  );
}

// What the colour bar of the scores says they are: the softmax's input,
// with the scale only when it is applied.
export const scoreLabel = (scaled) =>
  scaled ? "score q·k / (T√d)" : "score q·k / T";

// The chosen head's weights (or its scores, on a diverging map centred on
// 0), the sentence's words along both axes. Returns the weights' mean
// entropy.
function sentenceWeights(figures, state, { tokens, logits }) {
  const n = tokens.length;
  const T = 2 ** state.log2T;
  const weights = softmaxRows(logits, n, n);
  const entropy = meanEntropy(weights, n, n);
  const root = panel(
    figures,
    `head ${state.head}, T = ${format(T)}: entropy ` +
      `${entropy.toFixed(2)} nats`,
    `Attention weights of head ${state.head} over '${tokens.join(" ")}' ` +
      `at temperature ${format(T)}: rows are queries, columns keys.`,
  );
  // The scores' colour scale is symmetric about 0, as wide as the
  // largest finite score; masked scores stay blank.
  const box = { x: 74, y: FRAME.top + 2, w: 176, h: 176 };
  const top = Math.max(...logits.filter(Number.isFinite).map(Math.abs));
  const weighted = state.show === "weights";
  const shown = weighted ? weights : logits;
  const label = weighted ? "attention weight" : scoreLabel(state.scaled);
  const colours = weighted
    ? { map: "viridis", lo: 0, hi: 1, label }
    : { map: "diverging", lo: -top, hi: top, label };
  heatMap(root, box, [n, n], (i, j) => shown[i * n + j], colours);
  root.append(svg("rect", { ...xywh(box), class: "mx-frame" }));
  // Each word at the middle of its row (queries) and column (keys).
  tokens.forEach((t, i) => {
    const c = box.x + ((i + 0.5) * box.w) / n;
    const r = box.y + ((i + 0.5) * box.h) / n;
    const row = { x: box.x - 5, y: r + 5, class: "mx-tick mx-right" };
    root.append(svg("text", row, t));
    const down = `translate(${c + 5}, ${box.y + box.h + 6}) rotate(-90)`;
    const column = { transform: down, class: "mx-tick mx-right" };
    root.append(svg("text", column, t));
  });
  return entropy;
}

// Every head's mean entropy against :math:`T` on :math:`[2^{-3}, 2^3]`,
// between 0 (each query on one key) and :math:`\ln n` (spread evenly): a
// higher temperature flattens every head.
function entropyAgainstT(figures, state, { n, heads, weightsOf }) {
  const root = panel(
    figures,
    "mean entropy of each head against T",
    `The mean entropy of each head's attention rows against the ` +
      `temperature, from ${format(2 ** -3)} to 8; the chosen ` +
      `temperature is marked. At most ln ${n} = ` +
      `${Math.log(n).toFixed(2)} nats.`,
  );
  // :math:`\log_2 T` along :math:`x`, the entropy from 0 to a little
  // above its most, :math:`\ln n`, along :math:`y`.
  const box = plotBox();
  const x = scale(-3, 3, box.x, box.x + box.w);
  const y = scale(0, Math.log(n) * 1.05, box.y + box.h, box.y);
  axes(root, box, x, y, [-3, 3], [0, Math.log(n)], {
    xlabel: "temperature T (log scale)",
    ylabel: "entropy (nats)",
    xticks: [-3, -2, -1, 0, 1, 2, 3],
    // 1/8, 1/4, 1/2, 1, 2, 4, 8: short enough not to touch at 16 units.
    xformat: (v) => (v < 0 ? `1/${2 ** -v}` : String(2 ** v)),
  });
  // Each head's entropy at 61 temperatures, :math:`\log_2 T` from
  // -3 to 3 in steps of 0.1; the chosen head drawn thicker.
  const grid = Array.from({ length: 61 }, (_, i) => -3 + i / 10);
  const entropyAt = (h, g) => meanEntropy(weightsOf(h, 2 ** g), n, n);
  const chosen = (h) => h === state.head;
  const curves = heads.map((h) => ({
    points: grid.map((g) => [g, entropyAt(h, g)]),
    colour: COLOURS[h % 10],
    width: chosen(h) ? 2.6 : 1.4,
    opacity: chosen(h) ? 1 : 0.6,
    label: `head ${h}`,
  }));
  lines(root, x, y, [...curves, chosenAt(state.log2T, Math.log(n))]);
  // The curves rise from the left: the legend where they leave room.
  const corners = ["bottom-right", "top-left"];
  const [size, drawn] = [legendSize(curves), pixels(curves, x, y)];
  legend(root, box, curves, clearestCorner(box, size, drawn, corners));
}

// ------------------------------------------------------
// The GLU view: one hidden unit of each feed-forward variant

// The view opens at :math:`b = 1/2`, where the gate visibly acts: the
// gated :math:`f(a)\,b` is half of :math:`f(a)`, drawn beside it. At
// :math:`b = 1` the two curves coincide, and at :math:`b = 0` the gate
// shuts the unit.
export const GLU_DEFAULTS = { extent: 3, b: 0.5 };

// A variant's activation :math:`f` on :math:`[-r, r]` (and its gated
// output :math:`f(a)\,b` at the chosen :math:`b`, or another variant's
// unit to compare with); beside it the unit's output over the whole square
// :math:`(a, b) \in [-r, r]^2`, with its level sets.
function gluView(el, props) {
  const { variants } = props;
  const names = Object.keys(variants);
  const state = {
    variant: props.variant ?? names[0],
    extent: GLU_DEFAULTS.extent,
    b: props.b ?? GLU_DEFAULTS.b,
    other: "none",
  };
  const view = layout(el, state);
  const { controls } = view;
  choice(controls, "variant", names, state.variant, view.set("variant"));
  const extents = { min: 0.5, max: 10, step: 0.5, value: state.extent };
  slider(controls, "range", extents, view.set("extent"));
  // Named for what it is, not where its panel sits (the panels stack on a
  // phone): the curves are the square's slice at this :math:`b`, marked
  // on the square by a dashed line.
  const bs = { min: -3, max: 3, step: 0.1, value: state.b };
  slider(controls, "linear branch b", bs, view.set("b"));
  const others = ["none", ...names];
  list(controls, "compare with", others, "none", view.set("other"));
  view.paint((figures) => {
    const { gated, d_ff: dFF, parameters } = variants[state.variant];
    unitCurves(figures, state, variants);
    unitSquare(figures, state, variants[state.variant]);
    return (
      `${state.variant}: ${gated ? "gated" : "ungated"}, d_ff = ` +
      `${dFF} at d_model 768, ${parameters.toLocaleString("en")} ` +
      `parameters.`
    );
  });
}

// The unit's output against :math:`a` at the chosen :math:`b`: the
// activation :math:`f(a)`, the gated :math:`f(a)\,b`, and the compared
// variant's unit, on a :math:`y` range that holds them all and 0.
function unitCurves(figures, state, variants) {
  const { activation, gated } = variants[state.variant];
  const e = state.extent;
  const b = format(state.b);
  const root = panel(
    figures,
    gated ? `f = ${activation}: f(a)·b at b = ${b}` : `f = ${activation}`,
    `The activation ${activation} on [-${e}, ${e}]` +
      (gated ? `, and the gated output f(a)·b at b = ${b}.` : "."),
  );
  // Each curve at 201 points :math:`a \in [-r, r]`, at the chosen
  // :math:`b`.
  const as = Array.from({ length: 201 }, (_, i) => -e + (2 * e * i) / 200);
  const curve = (name, isGated, style) => ({
    points: as.map((a) => [a, unitOutput(name, isGated, a, state.b)]),
    ...style,
  });
  // :math:`f(a)` solid; the gated :math:`f(a)\,b` dashed, a negative
  // :math:`b` in brackets; the compared variant dotted.
  const plain = { colour: COLOURS[0], label: "f(a)" };
  const curves = [curve(activation, false, plain)];
  if (gated) {
    const times = state.b < 0 ? `(${b})` : b;
    const style = { colour: COLOURS[1], dash: "6 3", label: `f(a)·${times}` };
    curves.push(curve(activation, true, style));
  }
  if (state.other !== "none") {
    const other = variants[state.other];
    const label = state.other + (other.gated ? `, b = ${b}` : "");
    const style = { colour: COLOURS[2], dash: "2 2", label };
    curves.push(curve(other.activation, other.gated, style));
  }
  // The :math:`y` range holds every curve and 0 (a flat curve gets a
  // range of 1); the axes at 0, then the curves.
  const ys = curves.flatMap((c) => c.points.map((p) => p[1]));
  let [lo, hi] = [Math.min(0, ...ys), Math.max(0, ...ys)];
  if (hi - lo < 1e-9) hi = lo + 1;
  const box = plotBox();
  const x = scale(-e, e, box.x, box.x + box.w);
  const y = scale(lo, hi, box.y + box.h, box.y);
  axes(root, box, x, y, [-e, e], [lo, hi], {
    xlabel: "a = x·w1",
    ylabel: "output",
  });
  lines(root, x, y, [
    segment([-e, 0], [e, 0]),
    segment([0, lo], [0, hi]),
    ...curves,
  ]);
  // The legend in a corner the curves leave clear, top left first.
  const corners = ["top-left", "bottom-right", "top-right", "bottom-left"];
  const [size, drawn] = [legendSize(curves), pixels(curves, x, y)];
  legend(root, box, curves, clearestCorner(box, size, drawn, corners));
}

// The unit's output over :math:`(a, b) \in [-r, r]^2`, red positive and
// blue negative, sampled at the centres of a 120 by 120 grid (row 0 at
// the top, the largest :math:`b`). An ungated unit's level sets are
// vertical lines (:math:`f(a)` ignores :math:`b`); a gated unit's,
// :math:`f(a)\,b = c`, are hyperbola-like, and its sign follows
// :math:`b`.
function unitSquare(figures, state, { activation, gated }) {
  const e = state.extent;
  const root = panel(
    figures,
    gated ? "f(a)·b: gated" : "f(a): b is not used",
    `What one hidden unit of ${state.variant} outputs over its two ` +
      `pre-activations a and b in [-${e}, ${e}]: ` +
      (gated
        ? "f(a) times b, so its sign follows b."
        : "f(a), whatever b is.") +
      " Black lines are level sets; the dashed line is b = " +
      `${format(state.b)}, where the curves are drawn.`,
  );
  // Cell :math:`(i, j)` at :math:`a = a_j`, :math:`b = a_{119 - i}`, with
  // :math:`a_k = -r + 2r\,(k + \tfrac12)/120`; the colour scale is
  // symmetric, :math:`\pm v` with :math:`v` the largest
  // :math:`\lvert u \rvert`.
  const cells = 120;
  const at = (k) => -e + (2 * e * (k + 0.5)) / cells;
  const output = Float64Array.from({ length: cells * cells }, (_, k) => {
    const [i, j] = [Math.floor(k / cells), k % cells];
    return unitOutput(activation, gated, at(j), at(cells - 1 - i));
  });
  // Red above 0, blue below, white at 0: the sign of the unit's output.
  const vmax = Math.max(...output.map(Math.abs)) || 1;
  const box = squareBox();
  heatMap(root, box, [cells, cells], (i, j) => output[i * cells + j], {
    map: "diverging",
    lo: -vmax,
    hi: vmax,
    label: "unit output",
  });
  const x = scale(-e, e, box.x, box.x + box.w);
  const y = scale(-e, e, box.y + box.h, box.y);
  // Level sets at round values strictly inside :math:`(-v, v)`, about
  // nine of them as in the chapter's figure, traced on the grid by
  // marching squares; the grid's (row, column) back to :math:`(a, b)`.
  const levels = niceTicks(-vmax, vmax, 10).filter((c) => Math.abs(c) < vmax);
  const toAB = ([r, c]) => [at(c), at(cells - 1 - r)];
  for (const level of levels) {
    const segments = contourSegments(output, cells, cells, level);
    contours(root, x, y, segments.map((s) => s.map(toAB)));
  }
  // The dashed line: the slice the curves beside it draw.
  const slice = { colour: "#222", dash: "4 3", width: 1.2 };
  lines(root, x, y, [segment([-e, state.b], [e, state.b], slice)]);
  axes(root, box, x, y, [-e, e], [-e, e], {
    xlabel: "a = x·w1",
    ylabel: "b = x·v",
    xticks: niceTicks(-e, e, 4),
    yticks: niceTicks(-e, e, 4),
  });
}

// ------------------------------------------------------
// The gMLP view: the learned spatial weights

// What the gMLP view's matrix can show.
const PARTS = {
  W: "The learned spatial weights W",
  T: "The Toeplitz part T of W (each diagonal's mean)",
  "W - T": "What the Toeplitz part of W leaves out, W - T,",
};

// gMLP's learned spatial weights :math:`W` (data: int8 per matrix), by
// model, layer and training step; or its Toeplitz part
// :math:`T_{ij} = \mu_{i-j}`, or what :math:`T` leaves out,
// :math:`W - T`. Beside it, the diagonal means :math:`\mu_k` against the
// offset :math:`k`, and how Toeplitz :math:`W` is.
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
  // Every matrix is :math:`n \times n`, the model's context.
  const n = weights[models[0]][0][0].n;
  const view = layout(el, state);
  const { controls } = view;
  // The model (gMLP or aMLP), its layer, and the training step, by its
  // index among the saved steps (the readout shows the step itself).
  choice(controls, "model", models, state.model, view.set("model"));
  const layerNumbers = Array.from({ length: layers }, (_, i) => i);
  choice(controls, "layer", layerNumbers, 0, view.set("layer"));
  slider(
    controls,
    "step",
    {
      min: 0,
      max: steps.length - 1,
      value: state.step,
      show: (v) => String(steps[v]),
    },
    view.set("step"),
  );
  // How many diagonals the profile shows; which part of :math:`W`;
  // one colour scale per step, or one for all steps.
  const offsets = { min: 4, max: n - 1, value: state.maxOffset };
  slider(controls, "offsets shown", offsets, view.set("maxOffset"));
  choice(controls, "matrix", Object.keys(PARTS), "W", view.set("part"));
  const scales = ["this step", "all steps"];
  const shared = view.set("shared", (v) => v === "all steps");
  choice(controls, "colour scale", scales, "this step", shared);
  // :math:`W` at one saved step of the chosen model and layer, and the
  // matrix shown: :math:`W = T + (W - T)`, row-major ``[n, n]``.
  const matrix = (step) =>
    decodeLower(weights[state.model][step][state.layer]);
  const part = (step) => {
    const w = matrix(step);
    const diagonal = diagonalMeans(w, n);
    return w.map((v, at) => {
      const toeplitz = diagonal[Math.floor(at / n) - (at % n)] ?? 0;
      return { W: v, T: toeplitz, "W - T": v - toeplitz }[state.part];
    });
  };
  const largest = (m) => Math.max(...m.map(Math.abs));
  view.paint((figures) => {
    const shown = part(state.step);
    // One scale for every step shows W grow over training.
    const vmax =
      (state.shared
        ? Math.max(...steps.map((_, k) => largest(part(k))))
        : largest(shown)) || 1;
    const step = steps[state.step];
    spatialWeights(figures, state, { n, step, shown, vmax });
    const w = matrix(state.step);
    diagonalProfile(figures, state, w, n);
    return gmlpCaption(state, { step, score: toeplitzScore(w, n), vmax });
  });
}

// What the gMLP view shows, in words: which :math:`W`, how much of its
// variance its Toeplitz part explains, and the colour scale.
export function gmlpCaption(state, { step, score, vmax }) {
  const scale = state.shared ? "one scale for all steps" : "this step's scale";
  return (
    `${state.model}, layer ${state.layer}, step ${step}: the Toeplitz part ` +
    `of W (each diagonal's mean) explains ${Math.round(100 * score)} % of ` +
    `its variance (Toeplitz score ${score.toFixed(2)}). Colours run from ` +
    `-${format(vmax)} to ${format(vmax)}, ${scale}.`
  );
}

// The matrix shown, on a diverging map from :math:`-v` to :math:`v`:
// row :math:`i` mixes positions :math:`j \le i`.
function spatialWeights(figures, state, { n, step, shown, vmax }) {
  const root = panel(
    figures,
    `${state.part}: ${state.model}, layer ${state.layer}, step ${step}`,
    `${PARTS[state.part]} of ${state.model}, layer ${state.layer}, at` +
      ` step ${step}: row i mixes positions j ≤ i.`,
  );
  // Above the diagonal the causal :math:`W` is 0 by construction: left
  // blank, not drawn as a white 0.
  const box = squareBox();
  const causal = (i, j) => (j <= i ? shown[i * n + j] : NaN);
  heatMap(root, box, [n, n], causal, {
    map: "diverging",
    lo: -vmax,
    hi: vmax,
    label: state.part === "W" ? "W[i, j]" : state.part,
  });
  matrixAxes(root, box, n, "position j", "position i");
}

// The diagonal means :math:`\mu_k` against the offset :math:`k = i - j`,
// up to the offset chosen, titled by the Toeplitz score of :math:`W`.
function diagonalProfile(figures, state, w, n) {
  const means = diagonalMeans(w, n).slice(0, state.maxOffset + 1);
  const root = panel(
    figures,
    `Toeplitz score ${toeplitzScore(w, n).toFixed(2)}`,
    `The mean of each diagonal of W against the offset i - j, offsets 0 ` +
      `to ${state.maxOffset}.`,
  );
  const box = plotBox();
  // The range holds 0 and every mean; the means as a line with dots.
  let [lo, hi] = [Math.min(0, ...means), Math.max(0, ...means)];
  if (hi - lo < 1e-12) hi = lo + 1;
  const x = scale(0, state.maxOffset, box.x, box.x + box.w);
  const y = scale(lo, hi, box.y + box.h, box.y);
  axes(root, box, x, y, [0, state.maxOffset], [lo, hi], {
    xlabel: "offset i - j",
    ylabel: "mean of the diagonal",
  });
  // The axis at 0, the profile as a line, and a dot at each offset.
  const profile = { points: means.map((v, k) => [k, v]), colour: COLOURS[0] };
  lines(root, x, y, [segment([0, 0], [state.maxOffset, 0]), profile]);
  for (const [k, v] of means.entries()) {
    const dot = { cx: x(k), cy: y(v), r: 2.2, fill: COLOURS[0] };
    root.append(svg("circle", dot));
  }
}

// ------------------------------------------------------
// The side-by-side view: loss curves

// Loss against step for the reference pair at its best learning rate and
// one chosen pair at any of its learning rates, one line per seed or their
// mean. The runs are data: every run of every pair at every rate.
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
  const view = layout(el, state, { wide: true });
  const { controls } = view;
  // A new pair starts at its best rate; the slider then reaches its rates.
  list(controls, "pair", names, state.pair, (v) => {
    state.pair = v;
    state.rate = bestIndex(v);
    rate.setMax(pairs[v].lrs.length - 1);
    rate.input.value = state.rate;
    rate.input.dispatchEvent(new Event("input"));
  });
  // The rate slider reads out the rate itself, marked where it is
  // the pair's best.
  const rateLabel = (k) => {
    const lr = pairs[state.pair].lrs[k];
    if (lr === undefined) return "";
    return `${format(lr)}${lr === pairs[state.pair].best_lr ? " (best)" : ""}`;
  };
  // The slider moves through the pair's rates by index; ``rate`` is kept
  // so that choosing another pair can narrow it.
  const rate = slider(
    controls,
    "learning rate",
    {
      min: 0,
      max: pairs[state.pair].lrs.length - 1,
      value: state.rate,
      show: rateLabel,
    },
    view.set("rate"),
  );
  // Validation or training loss; each seed or their mean; the
  // reference shown or hidden.
  const lossName = (v) => (v === "val" ? "validation" : "training");
  const losses = ["val", "train"];
  choice(controls, "loss", losses, "val", view.set("loss"), lossName);
  const mean = view.set("mean", (v) => v === "mean");
  choice(controls, "seeds", ["each", "mean"], "each", mean);
  const shown = view.set("reference", (v) => v === "shown");
  choice(controls, "reference", ["shown", "hidden"], "shown", shown);
  view.paint((figures) => {
    const groups = shownRuns(state, reference, pairs);
    lossCurves(figures, el, state, reference, groups);
    return curvesCaption(state, pairs, groups);
  });
}

// The runs drawn, as ``[pair, learning rate, runs]``: the reference at its
// best rate (unless hidden), then the chosen pair at the chosen rate
// (unless that is the reference, shown already).
function shownRuns(state, reference, pairs) {
  const lr = pairs[state.pair].lrs[state.rate];
  const best = pairs[reference].best_lr;
  const runsAt = (p, rate) => pairs[p].runs.filter((r) => r.lr === rate);
  const groups = [];
  if (state.reference) groups.push([reference, best, runsAt(reference, best)]);
  const same = state.pair === reference && lr === best;
  if (!same || !state.reference)
    groups.push([state.pair, lr, runsAt(state.pair, lr)]);
  return groups;
}

// A group's lines: one per seed that did not diverge, or their mean at each
// step, :math:`\bar\ell_t = \frac{1}{S} \sum_s \ell_{s,t}` (the seeds
// share their steps).
function linesOf(state, runs) {
  const kept = runs.filter((r) => !r.diverged);
  const losses = (r) => r[state.loss];
  const line = (r) => ({ steps: r.steps, losses: losses(r), seed: r.seed });
  if (!state.mean || !kept.length) return kept.map(line);
  const mean = kept[0].steps.map(
    (_, t) => kept.reduce((sum, r) => sum + losses(r)[t], 0) / kept.length,
  );
  return [{ steps: kept[0].steps, losses: mean, seed: "mean" }];
}

// The title names what is drawn: the reference only while it is shown.
export function curvesTitle(pair, lr, reference, referenceShown) {
  const chosen = `${pair} at ${format(lr)}`;
  return referenceShown ? `${chosen}, reference at its best` : chosen;
}

// The lines, the reference's in C0 and the chosen pair's in C1, a dash per
// seed. The :math:`y` range is fitted to every point drawn (a little
// margin either side), so that no curve leaves the box: the first
// evaluations are the highest losses, and a range fitted to the later
// ones would cut off the start of every curve.
function lossCurves(figures, el, state, reference, groups) {
  const lr = groups.at(-1)[1];
  const what = state.loss === "val" ? "validation" : "training";
  // Each line's points (non-finite losses left out), the reference's
  // in C0, the chosen pair's in C1, seeds told apart by their dash.
  const series = groups.flatMap(([p, , runs]) =>
    linesOf(state, runs).map(({ steps, losses, seed }) => ({
      points: steps
        .map((t, i) => [t, losses[i]])
        .filter(([, v]) => Number.isFinite(v)),
      colour: COLOURS[p === reference ? 0 : 1],
      dash: seed === "mean" ? "" : ["", "6 3", "2 2"][seed % 3],
      label: seed === "mean" ? `${p}, mean of the seeds` : `${p} seed ${seed}`,
    })),
  );
  // Wide where the column is (a desktop), a standard panel on a phone.
  // Both axes fitted to the points drawn: steps from 0 to the last one,
  // losses by ``paddedRange``.
  const width = el.clientWidth >= 560 ? WIDTH * 1.6 : WIDTH;
  const box = plotBox(width);
  const all = series.flatMap((s) => s.points);
  const [lo, hi] = paddedRange(all.map((p) => p[1]));
  const last = Math.max(1, ...all.map((p) => p[0]));
  const x = scale(0, last, box.x, box.x + box.w);
  const y = scale(lo, hi, box.y + box.h, box.y);
  // The legend in a corner the lines leave clear, else below the axes (on
  // a phone, six lines of legend hide lines in any corner), in room the
  // panel leaves for it.
  const size = legendSize(series);
  const corners = ["top-right", "bottom-left", "top-left", "bottom-right"];
  const drawn = pixels(series, x, y);
  const corner = clearestCorner(box, size, drawn, corners, "below");
  const root = panel(
    figures,
    curvesTitle(state.pair, lr, reference, state.reference),
    `${what} loss against step of ${state.pair} at learning rate ` +
      `${format(lr)}, one line per seed` +
      (state.reference
        ? `, with the reference pair ${reference} at its best rate.`
        : "."),
    width,
    corner === "below" ? size[1] + 6 : 0,
  );
  axes(root, box, x, y, [0, last], [lo, hi], {
    xlabel: "step",
    ylabel: `${what} loss (nats)`,
  });
  lines(root, x, y, series);
  legend(root, box, series, corner);
}

// :math:`[\min, \max]` of some values widened by 4 % of their spread on
// either side (a unit either side of a single value; :math:`[0, 1]` for
// none).
export function paddedRange(values) {
  if (!values.length) return [0, 1];
  const [lo, hi] = [Math.min(...values), Math.max(...values)];
  const pad = hi > lo ? 0.04 * (hi - lo) : 1;
  return [lo - pad, hi + pad];
}

// The caption: each group's loss at its last step, averaged over the
// seeds that did not diverge, and the runs that diverged (not drawn).
function curvesCaption(state, pairs, groups) {
  const what = state.loss === "val" ? "Validation" : "Training";
  // The final loss of each group, :math:`\bar\ell_T`, over the seeds
  // that did not diverge.
  const ends = groups.map(([p, lr, runs]) => {
    const kept = runs.filter((r) => !r.diverged);
    const best = lr === pairs[p].best_lr ? " (its best)" : "";
    const name = `${p} at ${format(lr)}${best}`;
    if (!kept.length) return `${name}: every seed diverged`;
    const finals = kept.map((r) => r[state.loss].at(-1));
    const mean = finals.reduce((s, v) => s + v, 0) / finals.length;
    const seeds = `${kept.length} seed${kept.length > 1 ? "s" : ""}`;
    return `${name}, ${mean.toFixed(3)} (mean of ${seeds})`;
  });
  // The last step evaluated, and which runs diverged.
  const steps = groups.flatMap(([, , rs]) => rs.flatMap((r) => r.steps));
  const step = Math.max(...steps);
  const diverged = groups.flatMap(([p, , rs]) =>
    rs.filter((r) => r.diverged).map((r) => `${p} seed ${r.seed}`),
  );
  return (
    `${what} loss at step ${step}: ${ends.join("; ")}.` +
    (diverged.length ? ` Diverged, so not drawn: ${diverged.join(", ")}.` : "")
  );
}

// ------------------------------------------------------
// The scaling view: why attention divides by the square root of d

// One query against :math:`n` keys whose :math:`d_k` entries are
// independent with variance 1, so the scores :math:`q \cdot k` have
// variance :math:`d_k`. Unscaled, the softmax of scores that spread
// :math:`\sqrt{d_k}` wide puts nearly all its weight on one key; divided
// by :math:`\sqrt{d_k}`, they spread 1 wide whatever :math:`d_k`. One
// panel shows one draw's weights; the other the mean entropy of a row
// against :math:`d_k`, scaled and not (200 draws each).
function scalingView(el, props) {
  const state = {
    log2d: props.log2_d ?? 6,
    n: props.keys ?? 32,
    scaled: "1/√dₖ",
    draw: 1,
    sorted: false,
  };
  const view = layout(el, state);
  const { controls } = view;
  // :math:`d_k = 2^v` for :math:`v = 0 \dots 10`; 2 to 64 keys; the scale
  // or none; which of 20 seeded draws; bars in order or sorted.
  const dimensions = {
    min: 0,
    max: 10,
    value: state.log2d,
    show: (v) => String(2 ** v),
  };
  slider(controls, "dₖ", dimensions, view.set("log2d"));
  // The number of keys; the scale or none; the draw; the order of the
  // bars.
  const keys = { min: 2, max: 64, value: state.n };
  slider(controls, "keys", keys, view.set("n"));
  const scales = ["1/√dₖ", "none"];
  choice(controls, "scale", scales, state.scaled, view.set("scaled"));
  const draws = { min: 1, max: 20, value: 1 };
  slider(controls, "draw", draws, view.set("draw"));
  const sorted = view.set("sorted", (v) => v === "sorted");
  choice(controls, "order", ["as drawn", "sorted"], "as drawn", sorted);
  view.paint((figures) => {
    // One seeded draw of scores, its softmax (scaled or not), its entropy
    // and its largest weight.
    const d = 2 ** state.log2d;
    const n = state.n;
    const scaled = state.scaled !== "none";
    const scores = drawScores(gaussians(state.draw), d, n);
    const w = softmaxRows(scores, 1, n, scaled ? 1 / Math.sqrt(d) : 1);
    const entropy = meanEntropy(w, 1, n);
    const top = Math.max(...w);
    oneQuery(figures, state, { d, scaled, w, entropy, top });
    entropyAgainstD(figures, state);
    // The caption: the spread of the scores (:math:`\sqrt{d_k}` unscaled,
    // 1 scaled) and what this draw's row does with it.
    return (
      `At dₖ = ${d} the scores have a spread of ` +
      `${scaled ? "1" : `√${d} = ${format(Math.sqrt(d))}`}; this draw's ` +
      `row puts ${top.toFixed(2)} of its weight on one key (entropy ` +
      `${entropy.toFixed(2)} nats, uniform ${Math.log(n).toFixed(2)}).`
    );
  });
}

// One draw's weights as bars (in their order or heaviest first), against
// the uniform :math:`1/n`.
function oneQuery(figures, state, { d, scaled, w, entropy, top }) {
  const n = state.n;
  const root = panel(
    figures,
    `dₖ = ${d}, ${scaled ? "scaled" : "not scaled"}: largest ` +
      `${top.toFixed(2)}`,
    `The softmax weights of one query over ${n} keys at dₖ = ${d}, ` +
      `${scaled ? "with" : "without"} the scale 1/√dₖ: the largest ` +
      `weight is ${top.toFixed(2)}, the entropy ${entropy.toFixed(2)} ` +
      `nats.`,
  );
  // One slot a key along :math:`x`, each bar at the middle of its
  // slot; the weight from 0 to 1 along :math:`y`.
  const box = plotBox();
  const x = scale(0, n, box.x, box.x + box.w);
  const y = scale(0, 1, box.y + box.h, box.y);
  axes(root, box, (v) => x(v + 0.5), y, [0, n - 1], [0, 1], {
    xlabel: state.sorted ? "keys, heaviest first" : "key j",
    ylabel: "weight",
    xticks: niceTicks(0, n - 1, 4).filter(Number.isInteger),
  });
  // One bar a key, blue scaled and red unscaled, and the uniform
  // :math:`1/n` dashed.
  const bars = state.sorted ? [...w].sort((a, b) => b - a) : w;
  bars.forEach((v, j) => {
    root.append(
      svg("rect", {
        x: x(j) + 0.5,
        y: y(v),
        width: Math.max(x(1) - x(0) - 1, 0.5),
        height: y(0) - y(v),
        fill: COLOURS[scaled ? 0 : 3],
      }),
    );
  });
  // The weight every key would get if the softmax were flat.
  const uniform = { colour: "#555", dash: "3 3", width: 1 };
  lines(root, x, y, [segment([0, 1 / n], [n, 1 / n], uniform)]);
  legend(root, box, [{ label: `uniform 1/${n}`, ...uniform }], "top-right");
}

// The mean entropy of a row against :math:`d_k = 2^0 \dots 2^{10}`,
// averaged over 200 draws (their own seeds, the same on every visit),
// scaled by :math:`1/\sqrt{d_k}` (flat) and not (falling towards 0).
function entropyAgainstD(figures, state) {
  const n = state.n;
  const root = panel(
    figures,
    `mean entropy, ${n} keys, 200 draws`,
    `The mean entropy of a row of ${n} weights against dₖ from 1 to ` +
      `1024, with the scale (flat) and without it (falling towards 0); ` +
      `at most ln ${n} = ${Math.log(n).toFixed(2)} nats.`,
  );
  // At each :math:`d_k = 2^e` the mean entropy over 200 draws, seeded by
  // :math:`e`, the scale :math:`2^{-e/2} = 1/\sqrt{d_k}` or none.
  const entropyCurve = (scaled) =>
    Array.from({ length: 11 }, (_, e) => {
      const normal = gaussians(1000 + e);
      let total = 0;
      for (let k = 0; k < 200; k++) {
        const s = drawScores(normal, 2 ** e, n);
        const w = softmaxRows(s, 1, n, scaled ? 2 ** (-e / 2) : 1);
        total += meanEntropy(w, 1, n);
      }
      return [e, total / 200];
    });
  // Room above :math:`\ln n` for the legend, clear of the curves.
  const box = plotBox();
  const x = scale(0, 10, box.x, box.x + box.w);
  const y = scale(0, Math.log(n) * 1.55, box.y + box.h, box.y);
  axes(root, box, x, y, [0, 10], [0, Math.log(n)], {
    xlabel: "dₖ (log scale)",
    ylabel: "entropy (nats)",
    xticks: [0, 2, 4, 6, 8, 10],
    xformat: (v) => String(2 ** v),
  });
  // The two curves and the uniform bound :math:`\ln n`, and the
  // :math:`d_k` chosen.
  const uniform = { colour: "#555", dash: "3 3", width: 1 };
  const curves = [
    {
      points: entropyCurve(true),
      colour: COLOURS[0],
      label: "scaled by 1/√dₖ",
    },
    { points: entropyCurve(false), colour: COLOURS[3], label: "not scaled" },
    {
      ...segment([0, Math.log(n)], [10, Math.log(n)], uniform),
      label: `uniform: ln ${n}`,
    },
  ];
  lines(root, x, y, [...curves, chosenAt(state.log2d, Math.log(n))]);
  legend(root, box, curves, "top-right");
}

// ------------------------------------------------------
// The anywidget entry point, also what the site's loader calls

// The views' style, in parts. The view in the system's sans-serif font,
// 14 px, as the book's text around it.
const VIEW_STYLE = `
.mx-view {
  font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #222;
  margin: 0.5rem 0 1rem;
}
`;

// Its controls in a row that wraps, each control's name beside its input
// (a fieldset's border and padding taken off).
const CONTROLS_STYLE = `
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
`;

// A control's name in bold, the same for a label and a fieldset's
// legend (which browsers otherwise set apart).
const NAME_STYLE = `
.mx-control > label:first-child, .mx-view .mx-choice legend {
  font-weight: 600;
  font-size: inherit;
  line-height: inherit;
  float: left;
  width: auto;
  margin: 0 0.4rem 0 0;
  padding: 0;
}
`;

// Sliders and lists at least 28 px tall, for a finger; a slider's
// readout in figures of one width, so that it does not jitter.
const INPUT_STYLE = `
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
`;

// A choice's radio inputs hidden but focusable, their labels drawn as
// a row of buttons.
const CHOICE_STYLE = `
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
`;

// The chosen button filled, the focused one outlined in orange.
const CHOSEN_STYLE = `
.mx-choice input:checked + label {
  background: #1f77b4;
  color: #fff;
  font-weight: 600;
}
.mx-choice input:focus-visible + label {
  outline: 3px solid #ff7f0e;
  outline-offset: 1px;
}
`;

// Panels side by side while each gets 300 px, one a row below that
// (a phone); the side-by-side view's panel takes the whole row.
const PANEL_STYLE = `
.mx-figures { display: flex; flex-wrap: wrap; gap: 0.5rem; }
.mx-panel { flex: 1 1 300px; max-width: 460px; margin: 0; }
.mx-wide .mx-panel { max-width: 720px; flex-basis: 100%; }
.mx-panel svg { width: 100%; height: auto; display: block; }
`;

// The panels' text: ``TEXT`` units, a title a little larger and bold;
// tick labels centred on their tick, or ended or started at it.
const TEXT_STYLE = `
.mx-panel text {
  font-size: 16px;
  fill: #222;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
.mx-panel .mx-title {
  font-size: 16.5px;
  font-weight: 600;
  text-anchor: middle;
}
.mx-panel .mx-tick { text-anchor: middle; }
.mx-panel .mx-right { text-anchor: end; }
.mx-panel .mx-left { text-anchor: start; }
.mx-panel .mx-label { text-anchor: middle; font-size: 16px; }
`;

// The panels' lines and marks: axes, frames, the shaded span, the slope
// dots, the legend's box, sharp pixels for a matrix, thin level sets.
const MARK_STYLE = `
.mx-axes line { stroke: #222; }
.mx-frame { fill: none; stroke: #222; stroke-width: 0.8; }
.mx-frame-solid { stroke: #222; stroke-width: 0.6; }
.mx-shade { fill: #1f77b4; fill-opacity: 0.1; }
.mx-rule { stroke: #888; }
.mx-dot { fill: #1f77b4; }
.mx-dot-chosen { fill: #d62728; stroke: #222; }
.mx-legend-box { fill: #fff; fill-opacity: 0.85; stroke: #ccc; }
.mx-pixels { image-rendering: pixelated; }
.mx-contour {
  fill: none;
  stroke: #000;
  stroke-width: 0.6;
  stroke-opacity: 0.6;
}
`;

// The caption under the panels, as large as the view's text, in grey.
const CAPTION_STYLE = `
.mx-caption { margin: 0.3rem 0 0; color: #444; }
`;

// All of it, added once to the document (or to the shadow root a notebook
// front end may draw a widget in).
const STYLE = [
  VIEW_STYLE,
  CONTROLS_STYLE,
  NAME_STYLE,
  INPUT_STYLE,
  CHOICE_STYLE,
  CHOSEN_STYLE,
  PANEL_STYLE,
  TEXT_STYLE,
  MARK_STYLE,
  CAPTION_STYLE,
];

// Every view by the name the package gives it (``mixers.live.VIEW_NAMES``;
// ``tests/test_live.py`` checks that the two lists agree).
export const VIEWS = {
  alibi: alibiView,
  softmax: softmaxView,
  glu: gluView,
  gmlp: gmlpView,
  curves: curvesView,
  scaling: scalingView,
};

// The style goes into the document's head, or into the shadow root the
// view is drawn in, unless it is there already.
function addStyle(el) {
  const host = el.getRootNode();
  const target = host === document ? document.head : host;
  if (target.querySelector?.("style[data-mixers-views]")) return;
  const css = STYLE.join("");
  const style = html("style", { "data-mixers-views": "" }, css);
  target.append(style);
}

// anywidget's contract: draw the view the model names with its props
// into ``el``, and return what removes it.
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
