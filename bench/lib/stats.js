'use strict'

// Small statistics helpers. Nothing here knows about locks.

function sorted (values) {
  return Float64Array.from(values).sort()
}

function median (values) {
  if (values.length === 0) return NaN
  const s = sorted(values)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

// Nearest-rank percentile, p in [0, 100].
function percentile (values, p) {
  if (values.length === 0) return NaN
  const s = sorted(values)
  const rank = Math.ceil((p / 100) * s.length)
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]
}

// Least-squares slope of log(y) against log(x): y ~ x^k. k = 0 is flat
// (O(1) per operation), k = 1 is linear in the size.
function growthExponent (xs, ys) {
  const points = []
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] > 0 && ys[i] > 0 && Number.isFinite(ys[i])) points.push([Math.log(xs[i]), Math.log(ys[i])])
  }
  if (points.length < 2) return NaN
  const n = points.length
  const mx = points.reduce((a, p) => a + p[0], 0) / n
  const my = points.reduce((a, p) => a + p[1], 0) / n
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - mx) * (y - my)
    den += (x - mx) * (x - mx)
  }
  return num / den
}

// Per-metric medians of a list of per-round metric objects.
function medians (rounds) {
  const out = {}
  for (const key of Object.keys(rounds[0] || {})) {
    const values = rounds.map((r) => r[key]).filter((v) => typeof v === 'number' && !Number.isNaN(v))
    out[key] = median(values)
  }
  return out
}

module.exports = { median, percentile, growthExponent, medians }
