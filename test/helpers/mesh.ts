/**
 * In-process replication between intent logs, with partition and heal:
 * every pair of peers is connected by a piped pair of replication streams;
 * isolating a peer destroys its streams, healing re-creates them.
 */
import type { IntentLog } from '../../lib/intent-log.js'
import type { Duplex } from 'node:stream'

interface Link {
  a: number
  b: number
  streams: [Duplex, Duplex]
}

export class Mesh {
  private readonly logs: IntentLog[] = []
  private links: Link[] = []
  private readonly cut = new Set<string>()

  add(log: IntentLog): number {
    const i = this.logs.push(log) - 1
    for (let j = 0; j < i; j++) this.link(j, i)
    return i
  }

  /** Cut every link of peer i (it keeps running, alone). */
  isolate(i: number): void {
    for (let j = 0; j < this.logs.length; j++) if (j !== i) this.cut.add(pair(i, j))
    this.apply()
  }

  /** Split into the given groups: links only inside a group survive. */
  partition(...groups: number[][]): void {
    this.cut.clear()
    for (let i = 0; i < this.logs.length; i++) {
      for (let j = i + 1; j < this.logs.length; j++) {
        const together = groups.some((g) => g.includes(i) && g.includes(j))
        if (!together) this.cut.add(pair(i, j))
      }
    }
    this.apply()
  }

  heal(): void {
    this.cut.clear()
    this.apply()
  }

  /** Put a reopened log in slot i (a restart on the same storage) and reconnect it. */
  replace(i: number, log: IntentLog): void {
    this.remove(i)
    this.logs[i] = log
    for (let j = 0; j < this.logs.length; j++) if (j !== i) this.cut.delete(pair(i, j))
    this.apply()
  }

  /** Drop peer i from the mesh for good (it was closed). */
  remove(i: number): void {
    for (let j = 0; j < this.logs.length; j++) if (j !== i) this.cut.add(pair(i, j))
    this.apply()
  }

  destroy(): void {
    for (const l of this.links) for (const s of l.streams) s.destroy()
    this.links = []
  }

  private apply(): void {
    this.links = this.links.filter((l) => {
      if (!this.cut.has(pair(l.a, l.b))) return true
      for (const s of l.streams) s.destroy()
      return false
    })
    for (let i = 0; i < this.logs.length; i++) {
      for (let j = i + 1; j < this.logs.length; j++) {
        if (this.cut.has(pair(i, j))) continue
        if (this.links.some((l) => l.a === i && l.b === j)) continue
        const a = this.logs[i]
        const b = this.logs[j]
        if (!a || !b || a.closing !== null || b.closing !== null) continue
        this.link(i, j)
      }
    }
  }

  private link(i: number, j: number): void {
    const a = this.logs[i]
    const b = this.logs[j]
    if (!a || !b) return
    const s1 = a.replicate(true)
    const s2 = b.replicate(false)
    s1.pipe(s2).pipe(s1)
    s1.on('error', noop)
    s2.on('error', noop)
    this.links.push({ a: i, b: j, streams: [s1, s2] })
  }
}

function pair(i: number, j: number): string {
  return i < j ? `${i}-${j}` : `${j}-${i}`
}

function noop(): void {}
