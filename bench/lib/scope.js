'use strict'

// What the cross-process cases (cases/scope-*.js) share: their table's
// columns and rows that take a column from another case's point.

const { cellOf } = require('./rows')

// Column -> implementation. 'web-locks' is web-locks through a scope (so
// that the targets and the ×X ratios read it as ours); 'process-wide' is
// require('web-locks').locks, measured in the same run; 'x@wine' is x's
// column under wine (--windows).
const COLUMNS = {
  'web-locks': 'web-locks-scope',
  'process-wide': 'web-locks',
  'proper-lockfile': 'proper-lockfile',
  floor: 'socket',
  'web-locks@wine': 'web-locks-scope@wine',
  'floor@wine': 'socket@wine'
}

// A row whose cells come from `key`, except those in `from`: { column:
// { key, impl, metric } } (the process-wide figure of a thread case).
function scopeRow (get, { id, label, unit, better = 'lower', key, metric, columns = COLUMNS, from = {} }) {
  const cells = {}
  for (const [column, impl] of Object.entries(columns)) {
    const cell = cellOf(get(key, impl), metric)
    if (cell) cells[column] = cell
  }
  for (const [column, src] of Object.entries(from)) {
    const cell = cellOf(get(src.key, src.impl || 'web-locks'), src.metric || metric)
    if (cell) cells[column] = cell
    else delete cells[column]
  }
  return { id, label, unit, better, cells }
}

module.exports = { COLUMNS, scopeRow }
