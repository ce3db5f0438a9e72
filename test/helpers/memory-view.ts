/**
 * apply without autobase: a Map standing in for the hyperbee view (with
 * hooks to poison or fail a read), a recording host, and nodes built from
 * ops. For unit tests of apply's rules; the real thing is tested with real
 * autobases elsewhere.
 */
import b4a from 'b4a'
import type { ApplyHost, ApplyNode } from 'autobase'
import { encodeOp, type Op } from '../../lib/log/ops.js'

/** A hyperbee stand-in: a Map, with hooks to poison a read. */
export class MemoryView {
  readonly data = new Map<string, unknown>()
  poison: ((key: string) => unknown) | null = null
  failRead: string | null = null
  /** Writes that reached a batch, per key (apply writes each key once per call). */
  readonly writes = new Map<string, number>()

  /** Hyperbee's range read, over the committed data (what a snapshot of the view reads). */
  async *createReadStream(range: { gte?: string; lt?: string } = {}): AsyncIterable<{ seq: number; key: string; value: unknown }> {
    const keys = [...this.data.keys()].filter((k) => (range.gte === undefined || k >= range.gte) && (range.lt === undefined || k < range.lt)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    for (const key of keys) yield { seq: 0, key, value: this.data.get(key) }
  }

  batch() {
    const staged = new Map<string, unknown>()
    return {
      get: async (key: string) => {
        if (this.failRead === key) throw Object.assign(new Error('disk on fire'), { code: 'EIO' })
        const poisoned = this.poison?.(key)
        if (poisoned !== undefined) return { seq: 0, key, value: poisoned }
        const v = staged.has(key) ? staged.get(key) : this.data.get(key)
        return v === undefined || v === DELETED ? null : { seq: 0, key, value: v }
      },
      put: async (key: string, value: unknown) => {
        this.writes.set(key, (this.writes.get(key) ?? 0) + 1)
        staged.set(key, value)
      },
      del: async (key: string) => {
        this.writes.set(key, (this.writes.get(key) ?? 0) + 1)
        staged.set(key, DELETED)
      },
      flush: async () => {
        for (const [k, v] of staged) {
          if (v === DELETED) this.data.delete(k)
          else this.data.set(k, v)
        }
      },
      close: async () => {}
    }
  }
}
const DELETED = Symbol('deleted')

export function host(calls: string[]): ApplyHost {
  return {
    addWriter: async (key) => void calls.push(`add ${b4a.toString(key, 'hex').slice(0, 4)}`),
    removeWriter: async (key) => void calls.push(`remove ${b4a.toString(key, 'hex').slice(0, 4)}`),
    removeable: () => true,
    interrupt: () => {}
  }
}

export function node(author: string, length: number, op: Op | Uint8Array): ApplyNode {
  return {
    indexed: true,
    optimistic: false,
    from: { key: b4a.from(author, 'hex') },
    length,
    value: op instanceof Uint8Array ? op : encodeOp(op)
  }
}

