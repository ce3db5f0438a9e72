/** The `Key: value [kB]` fields of a /proc file (status, smaps_rollup), in bytes where given in kB; empty when it cannot be read (not Linux, process gone). */
import { readFileSync } from 'node:fs'

export function procKb(file: string): Record<string, number> {
  const out: Record<string, number> = {}
  try {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^(\w+):\s+(\d+)( kB)?/.exec(line)
      if (m) out[m[1]!] = m[3] ? Number(m[2]) * 1024 : Number(m[2])
    }
  } catch {
    // not Linux, or the process is gone
  }
  return out
}
