'use strict'

// Locks across machines, on PostgreSQL, with fencing tokens. Two agents (two
// managers in this process here; two hosts in production) pay invoice 42.
// The first is paused while it holds the lock (a long GC pause, a frozen
// VM); an operator steals the lock for the second, which pays. When the
// first wakes up and writes, its token is older than the invoice's fence,
// so the database refuses the stale write: the lock alone could not have
// stopped it. Run: npm run example:postgres (with the tests' server), or
// DATABASE_URL=postgres://... node example/postgres.js

const pg = require('pg')
const { openLockManager } = require('..')

const url = process.env.DATABASE_URL
if (!url) throw new Error('Set DATABASE_URL, or run: npm run example:postgres')

// A write guarded by the fence: only a holder with a newer token gets in.
async function pay (db, token, who) {
  const { rowCount } = await db.query(
    'UPDATE invoices SET fence = $1, paid_by = $2 WHERE id = 42 AND fence < $1', [token, who])
  console.log(`${who} (token ${token}) ${rowCount === 1 ? 'paid invoice 42' : 'was refused: a newer holder wrote first'}`)
}

async function main () {
  const db = new pg.Client(url)
  await db.connect()
  await db.query('CREATE TABLE IF NOT EXISTS invoices (id int PRIMARY KEY, fence bigint NOT NULL, paid_by text)')
  await db.query("INSERT INTO invoices VALUES (42, 0, NULL) ON CONFLICT (id) DO UPDATE SET fence = 0, paid_by = NULL")

  const hostA = await openLockManager('billing', { postgres: url })
  const hostB = await openLockManager('billing', { postgres: url })

  let wake, holding
  const paused = new Promise((resolve) => { wake = resolve })
  const held = new Promise((resolve) => { holding = resolve })
  const first = hostA.request('invoice-42', async (lock) => {
    console.log(`host A holds ${lock.name} with token ${lock.token}, and stalls`)
    holding()
    await paused
    await pay(db, lock.token, 'host A')
  })
  first.catch((error) => console.log(`host A's request ended: ${error.name}: ${error.message}`))

  await held
  const { held: holders } = await hostB.query()
  console.log(`host B sees ${holders.length} holder of ${holders[0].name}, client ${holders[0].clientId}`)
  await hostB.request('invoice-42', { steal: true }, async (lock) => {
    console.log(`host B stole ${lock.name} with token ${lock.token}`)
    await pay(db, lock.token, 'host B')
  })

  wake()
  await first.catch(() => {})
  const { rows } = await db.query('SELECT fence, paid_by FROM invoices WHERE id = 42')
  console.log(`invoice 42: paid by ${rows[0].paid_by}, fence ${rows[0].fence}`)
  // The stale holder's write was refused (CI runs this example).
  if (rows[0].paid_by !== 'host B') process.exitCode = 1

  await hostA.close()
  await hostB.close()
  await db.end()
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
