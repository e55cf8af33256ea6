// The formulas of src/mixers/views/views.js against the package's own values.
//
//   python -m mixers.live FIXTURES.json && MIXERS_FIXTURES=FIXTURES.json node --test tests/js/
//
// (tests/test_live.py and .ci/run do both steps.) The fixtures come from
// mixers.live.fixtures(): ALiBi slopes for 1..64 heads and biases, masked
// softmax with a scale, the activations and gated units at sample points,
// gMLP's diagonal means and Toeplitz score, and the int8 weight encoding.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  ACTIVATIONS,
  alibiBias,
  alibiSlopes,
  clearestCorner,
  contourSegments,
  counted,
  curvesTitle,
  decodeLower,
  diagonalMeans,
  erf,
  gaussians,
  GLU_DEFAULTS,
  gmlpCaption,
  legendCorner,
  legendSize,
  niceTicks,
  paddedRange,
  rowsOverMax,
  scoreLabel,
  softmaxCaption,
  softmaxRows,
  titleLines,
  toeplitzScore,
  unitOutput,
  VIEWS,
} from "../../src/mixers/views/views.js";

const path = process.env.MIXERS_FIXTURES;
assert.ok(
  path,
  "set MIXERS_FIXTURES to a file written by `python -m mixers.live`",
);
const fixtures = JSON.parse(readFileSync(path, "utf8"));

// Every value within atol + rtol·|expected|; null in a fixture is -Infinity.
function close(actual, expected, what, { atol = 1e-12, rtol = 1e-9 } = {}) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i] === null ? -Infinity : expected[i];
    const got = actual[i];
    if (want === -Infinity) {
      assert.equal(
        got,
        -Infinity,
        `${what}[${i}]: ${got}, expected -Infinity`,
      );
    } else {
      assert.ok(
        Math.abs(got - want) <= atol + rtol * Math.abs(want),
        `${what}[${i}]: ${got}, expected ${want}`,
      );
    }
  }
}

test("ALiBi slopes equal the package's for every head count 1..64", () => {
  for (let n = 1; n <= 64; n++) {
    // the package computes them in float32
    close(alibiSlopes(n), fixtures.slopes[n], `slopes(${n})`, {
      atol: 0,
      rtol: 1e-7,
    });
  }
});

test("the slope rule changes past a power of two: 3, 6, 12 and 24 heads", () => {
  // the first p slopes are the p-head model's; the rest fall between them
  for (const [n, p] of [
    [3, 2],
    [6, 4],
    [12, 8],
    [24, 16],
  ]) {
    const slopes = alibiSlopes(n);
    assert.deepEqual(
      slopes.slice(0, p),
      alibiSlopes(p),
      `${n} heads begin as ${p}`,
    );
    const between = alibiSlopes(2 * p).filter((_, i) => i % 2 === 0);
    assert.deepEqual(
      slopes.slice(p),
      between.slice(0, n - p),
      `${n} heads: the extra slopes`,
    );
    assert.equal(new Set(slopes).size, n, `${n} heads: no slope repeats`);
  }
  assert.throws(() => alibiSlopes(0), RangeError);
  assert.throws(() => alibiSlopes(2.5), RangeError);
});

test("ALiBi biases equal the package's causal bias", () => {
  const { n_heads: heads, length, values, symmetric } = fixtures.bias;
  alibiSlopes(heads).forEach((m, h) => {
    close(alibiBias(m, length), values[h], `bias of head ${h}`, {
      atol: 1e-6,
      rtol: 1e-6,
    });
    close(
      alibiBias(m, length, { symmetric: true }),
      symmetric[h],
      `symmetric bias of head ${h}`,
      { atol: 1e-6, rtol: 1e-6 },
    );
  });
});

test("softmax with a scale, plain and causal, equals masked_softmax", () => {
  const { scores, scale, plain, causal } = fixtures.softmax;
  scores.forEach((s, k) => {
    const n = Math.sqrt(s.length);
    close(
      softmaxRows(Float64Array.from(s), n, n, scale),
      plain[k],
      `plain ${k}`,
      { atol: 1e-12 },
    );
    const masked = Float64Array.from(s, (v, i) =>
      i % n > Math.floor(i / n) ? -Infinity : v,
    );
    close(softmaxRows(masked, n, n, scale), causal[k], `causal ${k}`, {
      atol: 1e-12,
    });
  });
  // a row with no key to read is all zeros, as in the package
  assert.deepEqual([...softmaxRows([-Infinity, -Infinity], 1, 2)], [0, 0]);
});

test("every activation equals the package's at 81 points on [-10, 10]", () => {
  const { z, values } = fixtures.activations;
  assert.deepEqual(
    Object.keys(ACTIVATIONS).sort(),
    Object.keys(values).sort(),
  );
  for (const [name, expected] of Object.entries(values)) {
    close(z.map(ACTIVATIONS[name]), expected, name, {
      atol: 2e-7,
      rtol: 2e-7,
    });
  }
  assert.ok(Math.abs(erf(0.5) - 0.5204998778130465) < 1e-9);
});

test("gated units f(a)·b equal the package's", () => {
  const { a, b, values } = fixtures.gated;
  for (const [name, expected] of Object.entries(values)) {
    close(
      a.map((ai, i) => unitOutput(name, true, ai, b[i])),
      expected,
      name,
      { atol: 1e-6, rtol: 2e-7 },
    );
    close(
      a.map((ai, i) => unitOutput(name, false, ai, b[i])),
      a.map(ACTIVATIONS[name]),
      `${name} ungated`,
    );
  }
  assert.throws(() => unitOutput("tanh", true, 1, 1), RangeError);
});

test("gMLP: diagonal means, Toeplitz score and the int8 encoding", () => {
  const {
    n,
    weight,
    diagonal_means: means,
    toeplitz_score: score,
    encoded,
  } = fixtures.gmlp;
  close(diagonalMeans(weight, n), means, "diagonal means");
  close([toeplitzScore(weight, n)], [score], "Toeplitz score");
  const decoded = decodeLower(encoded);
  const step = encoded.scale / 254 + 1e-9; // the largest rounding error
  close(
    decoded,
    weight.map((v, i) => (i % n > Math.floor(i / n) ? 0 : v)),
    "decoded",
    { atol: step, rtol: 0 },
  );
});

test("ticks are round and cover the range", () => {
  assert.deepEqual(niceTicks(0, 10, 5), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(niceTicks(-3, 3, 4), [-2, 0, 2]);
  assert.deepEqual(niceTicks(0, 1, 4), [0, 0.25, 0.5, 0.75, 1]);
  assert.deepEqual(Object.keys(VIEWS).sort(), [
    "alibi",
    "curves",
    "glu",
    "gmlp",
    "scaling",
    "softmax",
  ]);
});

test("the scores of the scaling view have the distribution of q·k", () => {
  // q·k for d independent unit normals on each side has mean 0 and variance d
  const normal = gaussians(7);
  for (const d of [1, 16, 256]) {
    let sum = 0;
    let squares = 0;
    const draws = 4000;
    for (let k = 0; k < draws; k++) {
      let norm2 = 0;
      for (let t = 0; t < d; t++) norm2 += normal() ** 2;
      const s = Math.sqrt(norm2) * normal();
      sum += s;
      squares += s * s;
    }
    const variance = squares / draws - (sum / draws) ** 2;
    assert.ok(
      Math.abs(variance / d - 1) < 0.1,
      `variance ${variance} at d = ${d}`,
    );
  }
  assert.equal(gaussians(3)(), gaussians(3)(), "a seed gives the same draws");
});

test("ALiBi weights over their row's largest are e^(-m(i - j))", () => {
  // The flattest of 8 heads over 1,024 positions: its softmax weights are
  // about 1/i each, so nearly all lie in the darkest tenth of a 0-1 scale;
  // over each row's largest they show how far the head reads.
  const [m, L] = [2 ** -8, 1024];
  const weights = softmaxRows(alibiBias(m, L), L, L);
  const shown = rowsOverMax(weights, L, L);
  let [cells, darkRaw, darkShown] = [0, 0, 0];
  for (let i = 0; i < L; i++) {
    for (let j = 0; j < L; j++) {
      const want = j <= i ? Math.exp(-m * (i - j)) : 0;
      assert.ok(Math.abs(shown[i * L + j] - want) < 1e-12, `(${i}, ${j})`);
      if (j > i) continue;
      cells++;
      darkRaw += weights[i * L + j] < 0.1;
      darkShown += shown[i * L + j] < 0.1;
    }
  }
  assert.ok(darkRaw / cells > 0.99, `raw: ${darkRaw / cells}`);
  // e^(-m d) < 0.1 beyond d = ln 10 / m = 589 tokens: 18 % of the triangle
  assert.ok(Math.abs(darkShown / cells - 0.18) < 0.01, `${darkShown / cells}`);
  // a row of zeros (no key to read) stays zeros
  assert.deepEqual([...rowsOverMax([0, 0, 2, 1], 2, 2)], [0, 0, 1, 0.5]);
});

test("marching squares: a plane's level set is a line, a bowl's a circle", () => {
  // g = column: the level 2.5 runs down the grid at column 2.5
  const [rows, cols] = [5, 6];
  const plane = Float64Array.from({ length: rows * cols }, (_, k) => k % cols);
  const line = contourSegments(plane, rows, cols, 2.5);
  assert.equal(line.length, rows - 1);
  for (const [[r0, c0], [r1, c1]] of line) {
    assert.deepEqual([c0, c1], [2.5, 2.5]);
    assert.equal(Math.abs(r1 - r0), 1);
  }
  // g = distance² from the centre: every crossing lies on the circle of
  // radius 6 (linear interpolation of r² errs by under 0.05 here)
  const n = 21;
  const bowl = Float64Array.from(
    { length: n * n },
    (_, k) => (Math.floor(k / n) - 10) ** 2 + ((k % n) - 10) ** 2,
  );
  const circle = contourSegments(bowl, n, n, 36);
  assert.ok(circle.length >= 24, `${circle.length} segments`);
  for (const point of circle.flat()) {
    const radius = Math.hypot(point[0] - 10, point[1] - 10);
    assert.ok(Math.abs(radius - 6) < 0.05, `radius ${radius}`);
  }
  // a saddle: the centre (the corners' mean, 0.5) is above 0.4, so the
  // segments cut off the two corners below it, (0, 1) and (1, 0)
  const saddle = contourSegments([1, 0, 0, 1], 2, 2, 0.4);
  assert.deepEqual(saddle, [
    [
      [0, 0.6],
      [0.4, 1],
    ],
    [
      [1, 0.4],
      [0.6, 0],
    ],
  ]);
  assert.deepEqual(contourSegments(plane, rows, cols, 9), []);
});

test("the views' labels follow their settings", () => {
  assert.equal(scoreLabel(true), "score q·k / (T√d)");
  assert.equal(scoreLabel(false), "score q·k / T");
  assert.equal(
    curvesTitle("gmlp", 0.024, "attention+gelu", true),
    "gmlp at 0.024, reference at its best",
  );
  assert.equal(curvesTitle("gmlp", 0.024, "attention+gelu", false), "gmlp at 0.024");
  // a loss axis fitted to what is drawn, with a margin of 4 % either side
  const [lo, hi] = paddedRange([2, 3, 2.5]);
  assert.ok(Math.abs(lo - 1.96) < 1e-12 && Math.abs(hi - 3.04) < 1e-12);
  assert.deepEqual(paddedRange([2]), [1, 3]);
  assert.deepEqual(paddedRange([]), [0, 1]);
});

test("captions say what every view shows, a count in its number", () => {
  assert.equal(counted(1, "head"), "1 head");
  assert.equal(counted(8, "head"), "8 heads");
  const state = { head: 2, log2T: 1, scaled: true, mask: "causal" };
  assert.equal(
    softmaxCaption(state, 0.5, 6),
    "Head 2 at T = 2, scores divided by √d, causal mask: its rows' mean " +
      "entropy is 0.50 nats, of at most ln 6 = 1.79 (weights spread " +
      "evenly). A higher T flattens every head.",
  );
  const gmlp = { model: "gmlp", layer: 1, shared: false };
  assert.equal(
    gmlpCaption(gmlp, { step: 600, score: 0.834, vmax: 0.12 }),
    "gmlp, layer 1, step 600: the Toeplitz part of W (each diagonal's " +
      "mean) explains 83 % of its variance (Toeplitz score 0.83). Colours " +
      "run from -0.12 to 0.12, this step's scale.",
  );
});

test("the GLU view opens where the gate visibly acts", () => {
  // At the default b the gated curve f(a)·b is neither f(a) itself (b = 1,
  // the two curves on top of each other) nor shut (b = 0): for every gated
  // activation it stands apart from f(a) by a fifth of its range or more.
  const { b, extent } = GLU_DEFAULTS;
  assert.ok(b !== 1 && b !== 0 && Math.abs(b) <= 3, `b = ${b}`);
  const as = Array.from({ length: 201 }, (_, i) => -extent + (extent * i) / 100);
  for (const name of ["relu", "gelu", "swish", "sigmoid", "identity"]) {
    const plain = as.map((a) => unitOutput(name, false, a, b));
    const gated = as.map((a) => unitOutput(name, true, a, b));
    const range = Math.max(...plain) - Math.min(...plain);
    const apart = Math.max(...plain.map((v, i) => Math.abs(v - gated[i])));
    assert.ok(apart >= 0.2 * range, `${name}: apart ${apart}, range ${range}`);
  }
});

test("a title too wide for its panel takes two lines, read as one", () => {
  // The standard panel is 360 units wide; the widest one-line title of the
  // views, 35 characters, measures 347 of them.
  const fits = "mean entropy of each head against T";
  assert.deepEqual(titleLines(fits), [fits]);
  const long = curvesTitle("attention+swiglu", 0.003, "attention+gelu", true);
  const lines = titleLines(long);
  assert.deepEqual(lines, [
    "attention+swiglu at 0.003, ",
    "reference at its best",
  ]);
  assert.equal(lines.join(""), long); // the text is the title's, whole
  assert.deepEqual(titleLines(long, 576), [long]); // a desktop's wide panel
  // no comma where it would fit: the last space that fits
  // (31 characters fit in 352 units, 42 do not)
  const [a, b, c] = ["a", "b", "c"].map((l) => l.repeat(15));
  const words = `${a} ${b} ${c.slice(5)}`;
  assert.deepEqual(titleLines(words), [`${a} ${b} `, c.slice(5)]);
});

test("a legend goes where it hides no line, or below the axes", () => {
  const box = { x: 70, y: 36, w: 268, h: 202 };
  const size = legendSize([{ label: "head 0" }, { label: "head 1" }]);
  assert.deepEqual(size, [34 + 0.55 * 16 * 6, 2 * 19 + 5]);
  const corners = ["top-right", "bottom-left", "top-left"];
  // a point under the top-right corner's box moves the legend on
  const [x0, y0] = legendCorner(box, size, "top-right");
  assert.deepEqual([x0, y0], [box.x + box.w - size[0] - 4, box.y + 4]);
  const underTopRight = [[x0 + 1, y0 + 1]];
  assert.equal(clearestCorner(box, size, [], corners), "top-right");
  const moved = clearestCorner(box, size, underTopRight, corners);
  assert.equal(moved, "bottom-left");
  // every corner hides a point: the fewest, or the fallback when given
  const everywhere = corners.flatMap((c) => {
    const [a, b] = legendCorner(box, size, c);
    const one = [[a + 1, b + 1]];
    return c === "top-left" ? one : [...one, [a + 2, b + 2]];
  });
  const fewest = clearestCorner(box, size, everywhere, corners);
  assert.equal(fewest, "top-left");
  const below = clearestCorner(box, size, everywhere, corners, "below");
  assert.equal(below, "below");
  // below: under the frame's bottom margin (54), inside the panel's width
  const wide = [324, 119];
  const [bx, by] = legendCorner(box, wide, "below");
  assert.equal(by, box.y + box.h + 54);
  assert.ok(bx >= 4 && bx + wide[0] <= box.x + box.w + 22 - 4);
});
