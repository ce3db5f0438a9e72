/**
 * Which UDX the swarm runs on. libudx (under hyperdht) retransmits a lost
 * packet only after max(SRTT + 4·RTTVAR, 1 s), doubled while it stays lost,
 * so a packet lost twice costs seconds and a confirmation several hops long
 * waits behind each. vendor/udx-native is udx-native with libudx built from
 * source with at least 200 ms of margin above the smoothed RTT instead (its
 * README.md): shipped prebuilt for linux-x64 only, loaded through Node-API,
 * so any node >= 20 on linux-x64 takes it, when asked for
 * (AUTOLEASE_UDX=auto or patched). By default, and everywhere no prebuilt
 * fits, the stock udx-native that dht-rpc loads itself: the patched build's
 * libudx is older than the stock one (registry source of October 2024, CUBIC,
 * without upstream's later fixes: vendor/udx-native/README.md) and the
 * lossy-link nemesis has not yet shown it worth that (docs/not-built.md).
 *
 * A patched device and a stock one talk: the wire format is libudx's one
 * version; only when a sender retransmits differs.
 */
import { createRequire } from 'node:module'
import { AutoleaseError } from '../errors.js'

/** A udx-native UDX instance (untyped: it goes to hyperdht as `opts.udx`). */
export type Udx = object

export interface UdxTransport {
  readonly kind: 'patched' | 'stock'
  /** What `status` prints after "udx:". */
  readonly label: string
  /** A new UDX of this transport, or null for the stock one (dht-rpc then makes its own). */
  create(): Udx | null
}

/** The variable that picks the transport: unset or "stock" (the default), "auto" (patched where it fits), "patched" (or fail). */
export const UDX_ENV = 'AUTOLEASE_UDX'

export const PATCHED_LABEL = 'patched (rto floor 200 ms)'

/** Relative to dist/lib/daemon/, where this module runs from. */
const PATCHED_ENTRY = '../../../vendor/udx-native/lib/udx.js'
/** Node-API version the prebuilt is compiled for (scripts/build-udx.sh). */
const PATCHED_NAPI = 8

type UdxClass = new () => Udx

export function chooseUdxTransport(env: NodeJS.ProcessEnv = process.env): UdxTransport {
  const given = env[UDX_ENV]
  const wanted = (given ?? 'stock').trim()
  if (wanted !== 'auto' && wanted !== 'patched' && wanted !== 'stock') {
    throw new AutoleaseError('INVALID_CONFIG', `${UDX_ENV}=${wanted}: expected auto, patched or stock (or leave it unset)`)
  }
  if (wanted === 'stock') return stock(given === undefined ? 'the default' : `${UDX_ENV}=stock`)
  let UDX: UdxClass
  try {
    UDX = loadPatched()
  } catch (err) {
    if (wanted === 'patched') {
      throw new AutoleaseError('INVALID_CONFIG', `${UDX_ENV}=patched but the patched UDX cannot load here: ${(err as Error).message}; unset ${UDX_ENV} to run the stock one`)
    }
    return stock((err as Error).message)
  }
  return { kind: 'patched', label: PATCHED_LABEL, create: () => new UDX() }
}

function stock(reason: string): UdxTransport {
  return { kind: 'stock', label: `stock (${reason})`, create: () => null }
}

/** The patched UDX class, or an error saying why it does not fit this process. */
export function loadPatched(): UdxClass {
  if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`no patched build for ${process.platform}-${process.arch}`)
  const napi = Number(process.versions.napi ?? 0)
  if (napi < PATCHED_NAPI) throw new Error(`node-api ${napi} is older than the patched build's ${PATCHED_NAPI}`)
  return createRequire(import.meta.url)(PATCHED_ENTRY) as UdxClass
}

/** The stock UDX class: udx-native as dht-rpc (under hyperdht) resolves it. */
export function loadStock(): UdxClass {
  const fromHere = createRequire(import.meta.url)
  const dhtRpc = createRequire(fromHere.resolve('hyperdht')).resolve('dht-rpc')
  return createRequire(dhtRpc)('udx-native') as UdxClass
}
